#!/usr/bin/env bash
# tests/fuzz/run.sh [SECONDS [TARGET...]]: builds the libFuzzer targets with clang-14 in ./build-fuzz and
# runs each (default: all of them) for SECONDS (default 30), then reports executions and crash files.
# Corpus: build-fuzz/corpus/<target>, seeded from tests/fuzz/corpus/<target> and grown across runs; with
# FUZZ_FRESH=1 a temporary copy of the seeds only (the CI smoke run: nothing is kept but artifacts).
# FUZZ_PARALLEL=N runs N targets at a time (default 1). JOBS: build parallelism (default 2).
# Crash/timeout/OOM inputs of this run land in build-fuzz/artifacts/<target>/; reproduce one with
# build-fuzz/tests/fuzz/<target> FILE. Needs clang-14 and libclang-rt-14-dev (tools/install-deps.sh).
# Exit status: 0 nothing found, 1 a target found something, 2 the build failed.
set -uo pipefail
cd "$(dirname "$0")/../.."
secs=${1:-30}
[ $# -gt 0 ] && shift
jobs=${JOBS:-2}
par=${FUZZ_PARALLEL:-1}
gen=()
command -v ninja >/dev/null && [ ! -f build-fuzz/CMakeCache.txt ] && gen=(-G Ninja)
# ccache: paths relative to the checkout, and -g's working directory left out of the hash, so a clone in another
# folder (CI's) reuses the cache (the debug info then names the first folder's paths).
export CCACHE_BASEDIR="${CCACHE_BASEDIR:-$PWD}" CCACHE_NOHASHDIR="${CCACHE_NOHASHDIR:-1}"
CC=clang-14 CXX=clang++-14 cmake -S . -B build-fuzz "${gen[@]}" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DATTNSCOPE_FUZZ=ON -DATTNSCOPE_BUILD_GUI=OFF -DATTNSCOPE_BUILD_TESTS=OFF >/dev/null || exit 2
targets=(fuzz_npy fuzz_npz fuzz_safetensors fuzz_selection fuzz_toml_job fuzz_gemm_cache fuzz_session fuzz_shard)
[ $# -gt 0 ] && targets=("$@")
cmake --build build-fuzz -j "$jobs" --target "${targets[@]}" >/dev/null || {
  cmake --build build-fuzz -j 1 --target "${targets[@]}"   # again, to show the error
  exit 2
}
declare -A maxlen=([fuzz_npy]=4096 [fuzz_npz]=8192 [fuzz_safetensors]=4096 [fuzz_selection]=256 [fuzz_toml_job]=4096 [fuzz_gemm_cache]=4096 [fuzz_session]=4096 [fuzz_shard]=8192)
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=0}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
fresh_root=""
if [ "${FUZZ_FRESH:-0}" = 1 ]; then
  fresh_root=$(mktemp -d "${TMPDIR:-/tmp}/attnscope-fuzz.XXXXXX")
  trap 'rm -rf "$fresh_root"' EXIT
fi

# Runs one target; prints one summary line (and the crash files); status 1 on a finding.
run_target() {
  local t=$1 corpus art=build-fuzz/artifacts/$1 log=build-fuzz/$1.log rc execs crashes
  if [ -n "$fresh_root" ]; then corpus=$fresh_root/$t log=build-fuzz/$t.fresh.log; else corpus=build-fuzz/corpus/$t; fi
  rm -rf "$art"; mkdir -p "$corpus" "$art"   # artifacts: this run only
  cp -n tests/fuzz/corpus/"$t"/* "$corpus"/ 2>/dev/null || true
  build-fuzz/tests/fuzz/"$t" "$corpus" -max_len="${maxlen[$t]}" -max_total_time="$secs" -timeout=10 \
    -rss_limit_mb=2048 -artifact_prefix="$art/" -print_final_stats=1 > "$log" 2>&1
  rc=$?
  execs=$(grep -m1 'stat::number_of_executed_units' "$log" | awk '{print $2}')
  crashes=$(ls "$art" | wc -l)
  echo "$t: ${secs}s rc=$rc execs=${execs:-?} corpus=$(ls "$corpus" | wc -l) artifacts=$crashes (log $log)"
  ls "$art" | sed "s|^|  $art/|"
  if [ "$rc" -ne 0 ] || [ "$crashes" -ne 0 ]; then
    grep -m1 -A12 -E '^==[0-9]+==ERROR|runtime error|ERROR: libFuzzer|deadly signal|uncaught' "$log" | sed 's/^/  | /'
    return 1
  fi
}

status=0
pids=()
for t in "${targets[@]}"; do
  run_target "$t" &
  pids+=($!)
  if [ "${#pids[@]}" -ge "$par" ]; then
    wait "${pids[0]}" || status=1
    pids=("${pids[@]:1}")
  fi
done
for p in "${pids[@]}"; do wait "$p" || status=1; done
exit $status
