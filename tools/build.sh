#!/usr/bin/env bash
# Configures and builds AttnScope in ./build (Release, ccache).
#   tools/build.sh [CMAKE_CONFIGURE_ARGS...]                      everything the configuration enables
#   tools/build.sh --target T [--target T2 ...] -- [CONFIGURE_ARGS...]   only those targets
set -euo pipefail
cd "$(dirname "$0")/.."
# ccache: paths under the checkout are hashed relative to it, so a clone in another folder (CI's) reuses the cache.
export CCACHE_BASEDIR="${CCACHE_BASEDIR:-$PWD}"
jobs=$(nproc 2>/dev/null || echo 2)
targets=()
while [ $# -gt 0 ] && [ "$1" = --target ]; do
  targets+=(--target "${2:?--target needs a name}")
  shift 2
done
[ "${1:-}" = -- ] && shift
gen=()
command -v ninja >/dev/null && [ ! -f build/CMakeCache.txt ] && gen=(-G Ninja)
cmake -S . -B build "${gen[@]}" -DCMAKE_BUILD_TYPE=Release "$@"
cmake --build build -j "$jobs" "${targets[@]}"
