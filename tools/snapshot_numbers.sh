#!/usr/bin/env bash
# Writes `analyze --json` of the bundled samples (every file, a spread of layers, heads and options) into
# OUT_DIR, one file per run, with the fields that vary between runs (timings, the kernel report) removed.
# A refactor must leave them byte-identical: run before and after, then `diff -r BEFORE AFTER`.
#   tools/snapshot_numbers.sh [BINARY] OUT_DIR
set -euo pipefail
cd "$(dirname "$0")/.."
bin=build/app/attnscope
if [ $# -ge 2 ]; then bin=$1; shift; fi
out=${1:?usage: tools/snapshot_numbers.sh [BINARY] OUT_DIR}
mkdir -p "$out"
n=0
run() {
  local name=$1; shift
  "$bin" analyze "$@" --json - --row-entropy |
    /usr/bin/python3 -c '
import json, sys
d = json.load(sys.stdin)
def strip(o):
    if isinstance(o, dict):
        return {k: strip(v) for k, v in o.items() if k not in ("kernels", "timing", "seconds", "elapsed_s", "attnscope_version")}
    if isinstance(o, list):
        return [strip(v) for v in o]
    return o
json.dump(strip(d), sys.stdout, indent=1, sort_keys=True)
' >"$out/$name.json"
  n=$((n + 1))
}
for f in vit_local2d lm_local1d lowrank gaussian; do
  for h in 0 1; do
    run "${f}_h$h" --q data/$f.h5:/q --k data/$f.h5:/k --head $h --blocks 8
    run "${f}_h${h}_causal_elu1" --q data/$f.h5:/q --k data/$f.h5:/k --head $h --causal --chunk 64 --feature-map elu1
  done
done
run vit_local2d_grid --q data/vit_local2d.h5:/q --k data/vit_local2d.h5:/k --head 2 --grid 16,16 --block-grid 4,4 --mixing cos
run vit_local2d_grid_none --q data/vit_local2d.h5:/q --k data/vit_local2d.h5:/k --head 3 --grid 16,16 --block-grid 4,4 --mixing linear --normalize none --top-k 8
run lowrank_favor --q data/lowrank.h5:/q --k data/lowrank.h5:/k --mechanism softmax,linear --feature-map favor --favor-features 128 --seed 7
run lowrank_official --q data/lowrank.h5:/q --k data/lowrank.h5:/k --blocks 4 --normalize official --rank-rtol 1e-3
run gaussian_identity --q data/gaussian.h5:/q --k data/gaussian.h5:/k --feature-map identity --blocks 4 --mixing gaussian
for f in vit_digits char_lm_licenses char_llama_gqa trained_vit_softmax trained_vit_linear trained_vit_mhla \
         trained_lm_softmax trained_lm_linear trained_lm_mhla; do
  for l in 0 1; do
    for h in 0 1; do
      run "${f}_l${l}_h$h" --q data/$f.h5:/layers/$l/q --k data/$f.h5:/layers/$l/k --head $h
    done
  done
done
for f in trained_mqar_softmax trained_mqar_linear trained_mqar_mhla_blocks16 trained_mqar_decay; do
  run "${f}_l0_b3_h1" --q data/$f.h5:/layers/0/q --k data/$f.h5:/layers/0/k --at b=3,h=1 --mechanism softmax,linear,mhla,decay
done
run trained_mqar_gated_l1 --q data/trained_mqar_gated.h5:/layers/1/q --k data/trained_mqar_gated.h5:/layers/1/k --head 0 \
  --mechanism linear,mhla,decay,gated
run char_llama_gqa_h3 --q data/char_llama_gqa.h5:/layers/2/q --k data/char_llama_gqa.h5:/layers/2/k --head 3
run vit_digits_streaming --q data/vit_digits.h5:/layers/2/q --k data/vit_digits.h5:/layers/2/k --head 1 --method streaming
echo "snapshot: $n runs in $out"
