#!/usr/bin/env bash
# tests/fuzz/run.sh [SECONDS [TARGET...]]: builds the libFuzzer targets with clang-14 in ./build-fuzz and
# runs each (default: all five) for SECONDS (default 30) on a copy of its seed corpus (tests/fuzz/corpus/<target>), then reports
# executions and crash files. Crash/timeout/OOM inputs of this run land in build-fuzz/artifacts/<target>/.
# Needs: apt-get install clang-14 libclang-rt-14-dev. Exit status 1 if any target found something.
set -uo pipefail
cd "$(dirname "$0")/../.."
secs=${1:-30}
[ $# -gt 0 ] && shift
jobs=${JOBS:-2}
gen=()
command -v ninja >/dev/null && [ ! -f build-fuzz/CMakeCache.txt ] && gen=(-G Ninja)
CC=clang-14 CXX=clang++-14 cmake -S . -B build-fuzz "${gen[@]}" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DATTNSCOPE_FUZZ=ON -DATTNSCOPE_BUILD_GUI=OFF -DATTNSCOPE_BUILD_TESTS=OFF || exit 2
targets=(fuzz_npy fuzz_npz fuzz_safetensors fuzz_selection fuzz_toml_job)
[ $# -gt 0 ] && targets=("$@")
cmake --build build-fuzz -j "$jobs" --target "${targets[@]}" || exit 2
declare -A maxlen=([fuzz_npy]=4096 [fuzz_npz]=8192 [fuzz_safetensors]=4096 [fuzz_selection]=256 [fuzz_toml_job]=4096)
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=0}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
status=0
for t in "${targets[@]}"; do
  corpus=build-fuzz/corpus/$t; art=build-fuzz/artifacts/$t; log=build-fuzz/$t.log
  rm -rf "$art"; mkdir -p "$corpus" "$art"   # artifacts: this run only
  cp -n tests/fuzz/corpus/$t/* "$corpus"/ 2>/dev/null || true
  build-fuzz/tests/fuzz/$t "$corpus" -max_len="${maxlen[$t]}" -max_total_time="$secs" -timeout=10 \
    -rss_limit_mb=2048 -artifact_prefix="$art/" -print_final_stats=1 > "$log" 2>&1
  rc=$?
  execs=$(grep -m1 'stat::number_of_executed_units' "$log" | awk '{print $2}')
  crashes=$(ls "$art" 2>/dev/null | wc -l)
  echo "$t: ${secs}s rc=$rc execs=${execs:-?} corpus=$(ls "$corpus" | wc -l) artifacts=$crashes (log $log)"
  ls "$art" 2>/dev/null | sed "s|^|  $art/|"
  if [ "$rc" -ne 0 ] || [ "$crashes" -ne 0 ]; then status=1; fi
done
exit $status
