#!/usr/bin/env bash
# Makes the data files that sessions in docs/ need and the repository does not ship (too large), with
# `attnscope synth` (fixed seeds: the same files every time). Run from anywhere:
#
#   docs/make_session_data.sh             # uses build/app/attnscope, writes data/generated/ (ignored by git)
#   ATTNSCOPE=build-rel/app/attnscope docs/make_session_data.sh [OUT_DIR]
#
# local1d_n8192.h5: /q /k /v [1, 8192, 64], kind local1d, seed 0 (5 MB, made in under a second), for
# docs/screenshot-n8192.attnscope (docs/gui.md "Large N").
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
bin="${ATTNSCOPE:-$root/build/app/attnscope}"
[[ "$bin" = /* ]] || bin="$root/$bin"
[ -x "$bin" ] || { echo "error: $bin not found: build first (cmake --build build) or set ATTNSCOPE" >&2; exit 2; }
out="${1:-$root/data/generated}"
mkdir -p "$out"

"$bin" synth --kind local1d --n 8192 --d 64 --heads 1 --seed 0 --out "$out/local1d_n8192.h5"
