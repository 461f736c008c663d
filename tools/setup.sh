#!/usr/bin/env bash
# One command from a fresh Debian 12 machine to a working AttnScope: installs the packages the app needs,
# builds the app (`attnscope`: the command line and the desktop app; the tests, the Python module and the
# package are built by tools/test.sh), and runs the main job: the analysis of a real (small, trained) vision
# transformer's last layer, head 1, dumped with the PyTorch bridge (its CLS token and 8x8 token grid come
# from the file).
set -euo pipefail
cd "$(dirname "$0")/.."
start=$SECONDS
tools/install-deps.sh --app
tools/build.sh --target attnscope -- -DATTNSCOPE_BUILD_TESTS=OFF -DATTNSCOPE_BUILD_PYTHON=OFF -DATTNSCOPE_PACKAGE=OFF
echo
echo "== attnscope analyze on data/vit_digits.h5 (layer 2, head 1) =="
build/app/attnscope analyze --q data/vit_digits.h5:/layers/2/q --k data/vit_digits.h5:/layers/2/k --head 1
echo
echo "setup: done in $((SECONDS - start)) s; the app is build/app/attnscope (tools/test.sh builds and runs the tests)"
