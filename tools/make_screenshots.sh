#!/usr/bin/env bash
# Regenerates every screenshot of docs/ (docs/gui.md, docs/cli.md, docs/security.md, README.md) from the current
# build. Each window screenshot is a session of docs/*.attnscope opened by the app itself and grabbed
# (`attnscope --session S --screenshot OUT.png --size WxH [--view V]`, Qt's offscreen platform, no display
# needed): 1600 x 1000, and 1280 x 720 for the *-1280.png ones. The sessions that hold sweeps (curves, model
# overview) are first made again by the window, as a user makes them (test_readable's DocsSessions test,
# which also grabs the two states no session can open into: not computed, a refused session). The figures
# are `attnscope figure`. Run from anywhere, after building the app and test_readable:
#
#   tools/make_screenshots.sh                 # uses build/app/attnscope and build/tests/widgets/test_readable
#   tools/make_screenshots.sh --quick         # without the N = 8192 screenshot (minutes of dense SVD)
#   BUILD=build-rel tools/make_screenshots.sh
#
# A screenshot that no page references does not belong in docs/: the script lists any it finds at the end.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${BUILD:-$root/build}"
[[ "$build" = /* ]] || build="$root/$build"
bin="$build/app/attnscope"
sessions_test="$build/tests/widgets/test_readable"
docs="$root/docs"
quick=0
[ "${1:-}" = "--quick" ] && quick=1
for f in "$bin" "$sessions_test"; do
    [ -x "$f" ] || { echo "error: $f not found: build first (cmake --build build --target attnscope test_readable)" >&2; exit 2; }
done
export QT_QPA_PLATFORM=offscreen

# shot SESSION OUT [VIEW] [SIZE]: one window screenshot of a docs session.
shot() {
    local session=$1 out=$2 view=${3:-} size=${4:-1600x1000}
    local args=(--session "$docs/$session" --screenshot "$docs/$out" --size "$size")
    [ -n "$view" ] && args+=(--view "$view")
    echo "$out  <-  $session ${view:+--view $view} --size $size"
    "$bin" "${args[@]}"
}
# both OUT-BASE SESSION [VIEW]: OUT-BASE.png at 1600 x 1000 and OUT-BASE-1280.png at 1280 x 720.
both() {
    shot "$2" "$1.png" "${3:-}"
    shot "$2" "$1-1280.png" "${3:-}" 1280x720
}

# 1. The sessions with sweeps, and the two states no session opens into.
echo "docs sessions with sweeps (test_readable DocsSessions) ..."
ATTNSCOPE_DOCS_SESSIONS="$docs" "$sessions_test" --gtest_filter='ReadableWindow.DocsSessions' > /dev/null

# 2. The window, from the sessions of docs/.
shot screenshot-main.attnscope screenshot-main.png
shot screenshot-lm.attnscope screenshot-lm.png
shot screenshot-layers.attnscope screenshot-layers.png
shot screenshot-mechanisms.attnscope screenshot-mechanisms.png
both screenshot-maps screenshot-maps.attnscope
both screenshot-query screenshot-query.attnscope
shot screenshot-query-image.attnscope screenshot-query-image.png
shot screenshot-gqa.attnscope screenshot-gqa-maps.png maps
both screenshot-gqa-query screenshot-gqa.attnscope query
for view in mixing spectrum entropy metrics; do
    both "screenshot-$view" screenshot-main.attnscope "$view"
done
both screenshot-curves screenshot-curves.attnscope curves
both screenshot-overview screenshot-overview.attnscope overview
shot screenshot-overview-jump.attnscope screenshot-overview-jump.png maps
shot screenshot-overview-not-current.attnscope screenshot-overview-not-current.png overview
echo "screenshot-heads.png  <-  data/trained_lm_mhla.h5 --view heads --size 1600x1000"
"$bin" "$root/data/trained_lm_mhla.h5" --screenshot "$docs/screenshot-heads.png" --view heads --size 1600x1000
if [ "$quick" = 0 ]; then
    shot screenshot-n8192.attnscope screenshot-n8192.png   # about a minute: the dense SVD of the 8192 x 8192 softmax matrix
else
    echo "screenshot-n8192.png kept (--quick)"
fi

# 3. Figures rendered headless (attnscope figure).
echo "figure-*-column.png, screenshot-families.png, views-curves-n.png <- attnscope figure"
lm="$root/data/lm_local1d.h5"
"$bin" figure --view maps --q "$lm:/q" --k "$lm:/k" --mechanism softmax,mhla --preset column --dpi 150 \
    --out "$docs/figure-maps-column.png" 2> /dev/null
vit="$root/data/vit_digits.h5"
clm="$root/data/char_lm_licenses.h5"
"$bin" figure --view entropy --q "$vit:/layers/0/q" --k "$vit:/layers/0/k" --preset column --dpi 150 \
    --out "$docs/figure-entropy-column.png" 2> /dev/null
"$bin" figure --view query --q "$vit:/layers/0/q" --k "$vit:/layers/0/k" --preset column --dpi 150 \
    --out "$docs/figure-query-column.png" 2> /dev/null
"$bin" figure --view query --q "$clm:/layers/0/q" --k "$clm:/layers/0/k" --preset column --dpi 150 \
    --out "$docs/figure-query-lm-column.png" 2> /dev/null
"$bin" figure --view maps --q "$lm:/q" --k "$lm:/k" --causal --mechanism linear,mhla,decay,cosformer \
    --width 1600 --height 520 --dpi 96 --out "$docs/screenshot-families.png" 2> /dev/null
"$bin" figure --view curves --synth local1d --d 16 --seeds 2 --vary n=32,64,128,256 --blocks 4 --metric rank \
    --width 860 --height 560 --dpi 96 --out "$docs/views-curves-n.png" 2> /dev/null

# The report page in headless Chromium (docs/report-*.png), when the browser test's packages are installed.
if [ -x /usr/bin/chromium ] && [ -x /usr/bin/chromedriver ]; then
    /usr/bin/python3 "$root/tests/app/check_report_browser.py" "$bin" "$(mktemp -d)" "$root/data" "$docs" > /dev/null
    echo "report-*.png <- tests/app/check_report_browser.py"
fi

# 4. Screenshots no page references.
cd "$docs"
unused=()
for png in screenshot-*.png figure-*.png views-*.png report-*.png; do
    [ -e "$png" ] || continue
    grep -qF "$png" "$root/README.md" ./*.md || unused+=("$png")
done
if [ ${#unused[@]} -gt 0 ]; then
    echo "not referenced by README.md or docs/*.md (remove them): ${unused[*]}" >&2
    exit 1
fi
echo "done: every screenshot of docs/ regenerated and referenced"
