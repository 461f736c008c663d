#!/usr/bin/env bash
# Runs the whole test suite: installs missing packages, builds everything (tests included), runs CTest.
set -euo pipefail
cd "$(dirname "$0")/.."
tools/install-deps.sh
tools/build.sh -DATTNSCOPE_BUILD_TESTS=ON
jobs=$(nproc 2>/dev/null || echo 2)
export QT_QPA_PLATFORM=${QT_QPA_PLATFORM:-offscreen}
ctest --test-dir build --output-on-failure -j "$jobs" "$@"
