#!/usr/bin/env bash
# Set up everything packer needs on a fresh Debian/Ubuntu machine: the system libraries
# Pillow-SIMD compiles against, then a virtual environment with the project and its extras.
set -euo pipefail
cd "$(dirname "$0")/.."
VENV=${VENV:-.venv}
PYTHON=${PYTHON:-python3}

# Pillow-SIMD ships as source only; it needs these headers to build JPEG/PNG/TIFF/WebP support.
# g++ and Python's headers build packer.tf's compiled batch read (below).
bash scripts/apt-install.sh libjpeg-dev zlib1g-dev libpng-dev libtiff-dev libwebp-dev \
  build-essential python3-dev

[ -x "$VENV/bin/python" ] || "$PYTHON" -m venv "$VENV"
"$VENV/bin/pip" install -q --upgrade pip wheel setuptools
# torch first and alone: 2.13.0 is a CPU build on this project's machines (elsewhere, point
# pip at a CPU wheel index for torch). The extras' install names the same torch again: left
# free, pip's resolver (with the torch, remote and test extras together) swapped it for a
# newer CUDA build, whose triton then crashed the test run at import.
TORCH="torch==${TORCH_VERSION:-2.13.0}"
"$VENV/bin/pip" install -q "$TORCH"
"$VENV/bin/pip" install -q -e ".[tf,torch,ray,remote,test]" "$TORCH"
"$VENV/bin/python" - "${TORCH_VERSION:-2.13.0}" <<'PY'
import sys, torch
if not torch.__version__.startswith(sys.argv[1]):
    sys.exit(f"packer: expected torch {sys.argv[1]}, the environment has {torch.__version__}")
PY

# Anything that depends on plain Pillow would install it over Pillow-SIMD (same PIL module).
# Make sure the SIMD build is the one that imports.
if "$VENV/bin/pip" show pillow >/dev/null 2>&1; then
  "$VENV/bin/pip" uninstall -y -q pillow pillow-simd
  "$VENV/bin/pip" install -q --no-binary pillow-simd pillow-simd
fi
"$VENV/bin/python" -c "import packer.imaging as i; print('packer: imaging backends:', i.backend_versions())"
# packer.tf's compiled batch read (a tf.data source in C++, packer/tf/ops), built against the
# TensorFlow just installed (packer.tf builds it at first use otherwise). A build that fails
# does not stop the install: one line says why, and packer.tf.dataset reads through
# tf.numpy_function.
"$VENV/bin/python" -c "import packer.tf.compiled as c
print('packer: tf.data batch read:', 'compiled' if c.library() else 'tf.numpy_function')"
