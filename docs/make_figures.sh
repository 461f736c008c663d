#!/usr/bin/env bash
# Regenerates every figure of docs/collapse.md (docs/figures/*.png) and the CSVs and JSON summaries its
# numbers come from, with the attnscope command line only (figure and sweep --plot: the desktop app's
# own views rendered headless; no display needed). Run from anywhere:
#
#   docs/make_figures.sh                      # uses build/app/attnscope
#   ATTNSCOPE=build-fig/app/attnscope docs/make_figures.sh
#
# Synthetic data (attnscope's own `synth` kinds, seeds 0..K-1) and the bundled samples
# data/vit_local2d.h5 (4 heads, 16 x 16 token grid) and data/lm_local1d.h5 (4 heads, N = 512, 1-D).
# Takes about a minute on two cores.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
bin="${ATTNSCOPE:-$root/build/app/attnscope}"
[[ "$bin" = /* ]] || bin="$root/$bin"
out="$root/docs/figures"
vit="$root/data/vit_local2d.h5"
lm="$root/data/lm_local1d.h5"
mkdir -p "$out"
[ -x "$bin" ] || { echo "error: $bin not found: build first (cmake --build build) or set ATTNSCOPE" >&2; exit 2; }

size=(--width 720 --height 440 --dpi 110)   # small PNGs (< 300 KB), readable on a docs page

# The same sweep drawn for another metric (figure --view curves recomputes it: same numbers, same code path).
curves() {
    local name=$1 metric=$2
    shift 2
    "$bin" figure --view curves "$@" --metric "$metric" "${size[@]}" --out "$out/$name.png" 2> >(grep -v '^wrote' >&2 || true)
}

# 1. Linear attention's rank is pinned at the feature dimension while softmax's grows with N.
synth_n=(--synth local1d --d 16 --seeds 3 --vary n=64,128,256,512,1024 --blocks 8)
"$bin" sweep "${synth_n[@]}" --csv "$out/collapse-n.csv" --json "$out/collapse-n.json"
curves collapse-rank-n rank "${synth_n[@]}" --log
curves collapse-entropy-n entropy_normalized_mean "${synth_n[@]}"

# 2. MHLA's rank against the block count M (1-D blocks, N = 1024), for three mixing matrices:
#    cos (rank 2: MHLA rank <= 2 d), exp (full rank) and identity (independent blocks).
for mixing in cos exp identity; do
    synth_m=(--synth local1d --d 16 --seeds 3 --n 1024 --vary m=1,2,4,8,16,32,64 --mixing "$mixing")
    "$bin" sweep "${synth_m[@]}" --csv "$out/mhla-m-$mixing.csv" --json "$out/mhla-m-$mixing.json"
    curves "mhla-m-$mixing" rank "${synth_m[@]}" --mechanism linear,mhla --log   # softmax: 1024 throughout (CSV)
done
# The mixing matrices themselves (rank in the title): the cause of the cap.
for mixing in cos exp; do
    "$bin" figure --view mixing --q "$lm:/q" --k "$lm:/k" --blocks 16 --mixing "$mixing" --width 860 --height 400 --dpi 100 \
        --out "$out/mixing-$mixing.png"
done

# 3. The bundled ViT-like sample: centred crops of the 16 x 16 grid (4 x 4-token blocks kept), all heads.
vit_n=(--q "$vit:/q" --k "$vit:/k" --grid 16,16 --block-grid 4,4 --subsample crop --vary n=16,64,144,256 --heads all)
"$bin" sweep "${vit_n[@]}" --csv "$out/vit-crop-n.csv" --json "$out/vit-crop-n.json"
curves vit-rank-n rank "${vit_n[@]}"
#    ... and 2-D block grids B x B on the full grid.
vit_m=(--q "$vit:/q" --k "$vit:/k" --grid 16,16 --block-grid 4,4 --vary m=1,2,4,8,16 --heads all)
"$bin" sweep "${vit_m[@]}" --csv "$out/vit-grid-m.csv" --json "$out/vit-grid-m.json"
curves vit-rank-m rank "${vit_m[@]}"
#    ... and which heads collapse: the model overview (one row: the sample has no layer axis).
"$bin" figure --view overview --q "$vit:/q" --k "$vit:/k" --grid 16,16 --block-grid 4,4 --metric effective_rank \
    --width 1100 --height 320 --dpi 100 --out "$out/vit-overview.png"
# 4. The bundled LM-like sample: the first N tokens, all heads; rows flatten as N grows.
lm_n=(--q "$lm:/q" --k "$lm:/k" --vary n=64,128,256,512 --heads all --blocks 8)
"$bin" sweep "${lm_n[@]}" --csv "$out/lm-first-n.csv" --json "$out/lm-first-n.json"
curves lm-entropy-n entropy_normalized_mean "${lm_n[@]}"
curves lm-rank-n rank "${lm_n[@]}" --log
"$bin" figure --view maps --q "$lm:/q" --k "$lm:/k" --blocks 8 --prefix-tokens 384 --colormap magma --log \
    --width 1100 --height 400 --dpi 100 --out "$out/lm-maps.png"

# 5. The learned samples (data/vit_digits.h5, data/char_lm_licenses.h5; attributes give CLS, grid, causal).
"$bin" figure --view overview --q "$root/data/vit_digits.h5:/layers/0/q" --k "$root/data/vit_digits.h5:/layers/0/k" \
    --metric rank --width 1100 --height 380 --dpi 100 --out "$out/learned-vit-overview-rank.png"
"$bin" figure --view curves --q "$root/data/char_lm_licenses.h5:/layers/1/q" --k "$root/data/char_lm_licenses.h5:/layers/1/k" \
    --heads all --causal --chunk 64 --mixing exp --vary n=64,128,256,512 --metric effective_rank \
    --width 900 --height 520 --dpi 100 --out "$out/learned-lm-effrank-n.png"

# 5b. The semiseparable profile of the MHLA-trained character LM (layer 1, head 0): the past block's rank at each split.
lmq=(--q "$root/data/trained_lm_mhla.h5:/layers/1/q" --k "$root/data/trained_lm_mhla.h5:/layers/1/k")
"$bin" figure --view spectrum "${lmq[@]}" --mechanism softmax,linear,mhla,decay --view-state '{"profile": true}' \
    --out "$out/profile-lm-softmax.png"
"$bin" figure --view spectrum "${lmq[@]}" --mechanism linear,mhla,decay --past-splits all \
    --view-state '{"profile": true}' --out "$out/profile-lm-learned-all.png"
"$bin" figure --view spectrum "${lmq[@]}" --mechanism linear,mhla --mixing exp --past-splits all \
    --view-state '{"profile": true}' --out "$out/profile-lm-exp-all.png"

# 6. sweep --plot: the one-command form (CSV, summary and figure of one sweep).
"$bin" sweep --synth gaussian --d 8 --seeds 2 --vary n=32,64,128,256 --blocks 4 --csv "$out/plot-example.csv" \
    --plot "$out/plot-example.png" --metric effective_rank

# The numbers docs/collapse.md quotes: mean (std) per point from the JSON summaries.
python3 - "$out" <<'EOF'
import json, sys, pathlib
out = pathlib.Path(sys.argv[1])
for name in ["collapse-n", "mhla-m-cos", "mhla-m-exp", "mhla-m-identity", "vit-crop-n", "vit-grid-m", "lm-first-n"]:
    doc = json.loads((out / f"{name}.json").read_text())
    print(f"\n{name}")
    print(f"  {'mechanism':9} {'n':>5} {'m':>4} {'rank':>14} {'eff.rank':>9} {'H/ln n':>7}")
    for p in doc["points"]:
        def mean(key):
            v = p.get(key)
            return v.get("mean") if isinstance(v, dict) else v
        def fmt(key, nd):
            v = mean(key)
            return "-" if v is None else f"{v:.{nd}f}"
        rank = mean("rank")
        std = p["rank"].get("std") if isinstance(p.get("rank"), dict) else None
        rtxt = "-" if rank is None else (f"{rank:.1f}" + (f" ({std:.1f})" if std else ""))
        print(f"  {p['mechanism']:9} {p['n']:>5} {p['m']:>4} {rtxt:>14} {fmt('effective_rank', 1):>9} "
              f"{fmt('entropy_normalized_mean', 3):>7}")
EOF
ls -l "$out"/*.png | awk '{ printf "%8d  %s\n", $5, $9 }'
