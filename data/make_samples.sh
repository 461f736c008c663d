#!/usr/bin/env bash
# Regenerates the bundled samples with `attnscope synth` (deterministic: fixed seeds).
# Usage: data/make_samples.sh [path/to/attnscope]   (default build/app/attnscope)
set -euo pipefail
cd "$(dirname "$0")"
bin=${1:-../build/app/attnscope}
"$bin" synth --kind local2d  --n 256 --d 64 --heads 4 --grid 16,16 --seed 1 --out vit_local2d.h5
"$bin" synth --kind local1d  --n 512 --d 64 --heads 4 --seed 2 --out lm_local1d.h5
"$bin" synth --kind lowrank  --n 256 --d 32 --heads 2 --seed 3 --out lowrank.h5
"$bin" synth --kind gaussian --n 256 --d 64 --heads 2 --seed 4 --out gaussian.h5
ls -l *.h5
