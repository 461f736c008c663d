#!/usr/bin/env bash
# One command from a fresh Debian 12 machine to a working AttnScope: installs the packages, builds,
# and runs the main job (analysis of the bundled ViT-like sample, head 0, 16x16 token grid, 4x4 blocks).
set -euo pipefail
cd "$(dirname "$0")/.."
tools/install-deps.sh
tools/build.sh
echo
echo "== attnscope analyze on data/vit_local2d.h5 (head 0) =="
build/app/attnscope analyze --q data/vit_local2d.h5:/q --k data/vit_local2d.h5:/k --head 0 \
  --grid 16,16 --block-grid 4,4
