#!/usr/bin/env bash
# Installs the Debian 12 packages AttnScope needs. Idempotent: when every package is already present it does
# nothing (no network). Needs root (or sudo).
#   tools/install-deps.sh          everything: build, run, the whole test suite, the Python module, the package
#   tools/install-deps.sh --app    only what building and running the app needs (tools/setup.sh uses this)
set -euo pipefail

profile=all
case "${1:-}" in
  "" | --all) ;;
  --app) profile=app ;;
  *) echo "error: unknown argument '$1' (use --app or --all)" >&2; exit 2 ;;
esac

# Building and running `attnscope` (the CLI and the desktop app): tools/setup.sh.
APP_PACKAGES=(
  build-essential cmake ninja-build pkg-config ccache
  qt6-base-dev qt6-svg-dev libqcustomplot-dev libqcustomplot2.1-qt6
  libeigen3-dev libhdf5-dev libopenblas-dev liblapacke-dev
  libcli11-dev nlohmann-json3-dev libtomlplusplus-dev libfmt-dev libzip-dev libssl-dev
)
# Everything else: tools/test.sh.
TEST_PACKAGES=(
  clang-14 libclang-rt-14-dev   # the libFuzzer smoke run of tools/test.sh (tests/fuzz)
  libspectra-dev                # tests only: the second opinion on the block top-k (tests/core/metrics)
  libgtest-dev libgmock-dev libbenchmark-dev librapidcheck-dev
  xvfb xauth
  poppler-utils                 # pdfimages / pdffonts: the figure tests check exported PDFs
  python3 python3-numpy python3-h5py python3-scipy python3-mpmath   # scipy: bench/compare_numpy.py (svds) and aggregate references; mpmath: Student t to 40 digits
  python3-torch python3-sklearn
  pybind11-dev python3-pybind11 python3-dev   # the Python module `import attnscope` (python/, docs/python.md)
  python3-nbclient python3-ipykernel python3-matplotlib   # its notebook, run by tests/python
  python3-pandas                # Document.to_pandas() (python/attnscope), tested by tests/python
  slurm-wlm munge               # tests/cluster: a one-machine Slurm that the test starts and stops itself
  help2man dpkg-dev             # the Debian package (packaging/): man page from --help, dpkg-shlibdeps
  python3-markdown              # the packaged docs: docs/*.md as HTML (packaging/docs_html.py)
  lintian desktop-file-utils appstream shared-mime-info   # tests/packaging: the package's validators
  chromium chromium-driver python3-selenium   # tests/app/check_report_browser.py: the report page in a real browser
)

PACKAGES=("${APP_PACKAGES[@]}")
[ "$profile" = all ] && PACKAGES+=("${TEST_PACKAGES[@]}")

missing=()
for p in "${PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: all ${#PACKAGES[@]} packages present ($profile)"
  exit 0
fi

SUDO=""
if [ "$(id -u)" -ne 0 ]; then
  command -v sudo >/dev/null || { echo "error: run as root (or install sudo) to install: ${missing[*]}" >&2; exit 2; }
  SUDO="sudo"
fi
echo "install-deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get -o DPkg::Lock::Timeout=900 install -y --no-install-recommends "${missing[@]}"
