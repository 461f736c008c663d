#!/usr/bin/env bash
# Configures and builds AttnScope in ./build (Release, ccache). Extra arguments go to cmake's configure.
set -euo pipefail
cd "$(dirname "$0")/.."
jobs=$(nproc 2>/dev/null || echo 2)
gen=()
command -v ninja >/dev/null && [ ! -f build/CMakeCache.txt ] && gen=(-G Ninja)
cmake -S . -B build "${gen[@]}" -DCMAKE_BUILD_TYPE=Release "$@"
cmake --build build -j "$jobs"
