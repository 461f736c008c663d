#!/usr/bin/env bash
# Runs the whole test suite: installs missing packages, builds everything (tests included), runs CTest (which
# also builds the Debian package and checks it: the tests labelled package, docs/packaging.md),
# then the fuzz smoke run: the five libFuzzer targets (tests/fuzz, docs/hardening.md) built with clang-14
# in ./build-fuzz and run FUZZ_SECONDS (default 30) each on their seed corpora, nproc at a time; any
# crash, sanitizer report, timeout or OOM fails the run. ATTNSCOPE_SKIP_FUZZ=1 skips the smoke run
# locally (ignored when CI=true: CI always runs it).
set -euo pipefail
cd "$(dirname "$0")/.."
tools/install-deps.sh
# CI builds with warnings as errors (the tree is warning-free with Debian 12's g++ 12); locally it is your choice.
werror=()
if [ "${CI:-}" = true ]; then werror=(-DATTNSCOPE_WERROR=ON); fi
# Explicit: a ./build that tools/setup.sh configured has the tests, the module and the package switched off.
tools/build.sh -DATTNSCOPE_BUILD_TESTS=ON -DATTNSCOPE_BUILD_PYTHON=ON -DATTNSCOPE_PACKAGE=ON "${werror[@]}"
jobs=$(nproc 2>/dev/null || echo 2)
export QT_QPA_PLATFORM=${QT_QPA_PLATFORM:-offscreen}
ctest --test-dir build --output-on-failure -j "$jobs" "$@"
if [ "${ATTNSCOPE_SKIP_FUZZ:-0}" = 1 ] && [ "${CI:-}" != true ]; then
  echo "fuzz smoke: skipped (ATTNSCOPE_SKIP_FUZZ=1)"
  exit 0
fi
start=$SECONDS
echo "fuzz smoke: building build-fuzz (clang-14), ${FUZZ_SECONDS:-30} s per target"
if FUZZ_FRESH=1 FUZZ_PARALLEL=$jobs JOBS=$jobs tests/fuzz/run.sh "${FUZZ_SECONDS:-30}"; then
  echo "fuzz smoke: passed ($((SECONDS - start)) s)"
else
  echo "fuzz smoke: FAILED (see above; docs/hardening.md says how to reproduce)" >&2
  exit 1
fi
