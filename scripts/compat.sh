#!/usr/bin/env bash
# Run the framework seams' tests against the OLDEST supported Keras and torch (setup.cfg),
# installed into a side folder put first on PYTHONPATH: the virtual environment itself keeps
# the newest. The newest are what `make test` runs already.
#   bash scripts/compat.sh                    # Keras 3.12.0 and torch 2.1.2
#   KERAS=3.13.0 TORCH= bash scripts/compat.sh   # another Keras, no torch
# The PyPI torch wheels are CUDA builds that need NVIDIA's runtime packages too; where those
# cannot be had, set TORCH= (empty) to skip torch, or TORCH_WHEEL=path/to/a/cpu.whl.
set -euo pipefail
cd "$(dirname "$0")/.."
VENV=${VENV:-.venv}
KERAS=${KERAS-3.12.0}
TORCH=${TORCH-2.1.2}
SIDE=${SIDE:-${TMPDIR:-/tmp}/packer-compat}

run() {  # $1: side folder, $2: module, $3: what pip installs; then the tests in TESTS
  local dir="$SIDE/$1"
  [ -d "$dir" ] || "$VENV/bin/pip" install -q --no-deps --target "$dir" "$3"
  PYTHONPATH="$dir" "$VENV/bin/python" -c "import $2; print('== $2', $2.__version__)"
  PYTHONPATH="$PWD:$dir" TF_CPP_MIN_LOG_LEVEL=3 "$VENV/bin/python" -m pytest -q "${TESTS[@]}"
}

if [ -n "$KERAS" ]; then
  TESTS=(tests/adapters/test_framework_compat.py tests/adapters/test_keras_backup.py)
  run "keras-$KERAS" keras "keras==$KERAS"
fi
if [ -n "${TORCH_WHEEL:-}" ] || [ -n "$TORCH" ]; then
  TESTS=(tests/adapters/test_framework_compat.py tests/adapters/test_torch.py -k "refused or compat")
  run "torch-$(basename "${TORCH_WHEEL:-$TORCH}")" torch "${TORCH_WHEEL:-torch==$TORCH}"
fi
