#!/usr/bin/env bash
# Set up everything packer needs on a fresh Debian/Ubuntu machine: the system libraries
# Pillow-SIMD compiles against, then a virtual environment with the project and its extras.
set -euo pipefail
cd "$(dirname "$0")/.."
VENV=${VENV:-.venv}
PYTHON=${PYTHON:-python3}

# Pillow-SIMD ships as source only; it needs these headers to build JPEG/PNG/TIFF/WebP support.
bash scripts/apt-install.sh libjpeg-dev zlib1g-dev libpng-dev libtiff-dev libwebp-dev

[ -x "$VENV/bin/python" ] || "$PYTHON" -m venv "$VENV"
"$VENV/bin/pip" install -q --upgrade pip wheel setuptools
# torch first and alone: 2.13.0 is a CPU build on this project's machines, and with it in
# place no extra pulls a CUDA build (elsewhere, point pip at a CPU wheel index for torch).
"$VENV/bin/pip" install -q "torch==${TORCH_VERSION:-2.13.0}"
"$VENV/bin/pip" install -q -e ".[tf,torch,ray,remote,test]"

# Anything that depends on plain Pillow would install it over Pillow-SIMD (same PIL module).
# Make sure the SIMD build is the one that imports.
if "$VENV/bin/pip" show pillow >/dev/null 2>&1; then
  "$VENV/bin/pip" uninstall -y -q pillow pillow-simd
  "$VENV/bin/pip" install -q --no-binary pillow-simd pillow-simd
fi
"$VENV/bin/python" -c "import packer.imaging as i; print('packer: imaging backends:', i.backend_versions())"
