#!/usr/bin/env bash
# One command from a fresh Debian 12 machine to a working AttnScope: installs the packages, builds,
# and runs the main job: the analysis of a real (small, trained) vision transformer's last layer,
# head 1, dumped with the PyTorch bridge (its CLS token and 8x8 token grid come from the file).
set -euo pipefail
cd "$(dirname "$0")/.."
tools/install-deps.sh
tools/build.sh
echo
echo "== attnscope analyze on data/vit_digits.h5 (layer 2, head 1) =="
build/app/attnscope analyze --q data/vit_digits.h5:/layers/2/q --k data/vit_digits.h5:/layers/2/k --head 1
