#!/usr/bin/env bash
# Create the peers' environment for benchmarks/bench_peers.py, bench_compressed.py (FFCV) and
# bench_augment.py: a separate virtual environment (.venv-peers) with WebDataset, LitData, FFCV,
# matplotlib, the augmentation baselines (albumentations; Keras + scipy for ImageDataGenerator) and
# what packer's import needs there (the scripts re-invoke themselves in it with packer from the
# checkout), pinned in peers-requirements.txt. Nothing here touches packer's own .venv. FFCV
# compiles against the system OpenCV and libjpeg-turbo (apt); when it does not build, the log
# stays in .venv-peers/ffcv-install.log and the benchmarks report why instead of an FFCV row.
set -euo pipefail
cd "$(dirname "$0")/.."
VENV=.venv-peers  # where bench_peers.py looks for it
PYTHON=${PYTHON:-python3}
REQUIREMENTS=benchmarks/peers-requirements.txt

bash scripts/apt-install.sh libopencv-dev libturbojpeg0-dev pkg-config

[ -x "$VENV/bin/python" ] || "$PYTHON" -m venv "$VENV"
PIP="$VENV/bin/pip"
"$PIP" install -q --upgrade pip wheel setuptools
pin() { grep "^$1==" "$REQUIREMENTS" | cut -d' ' -f1; }
# torch first: with 2.13.0 (the CPU wheel) in place, no peer's requirement pulls a CUDA build.
"$PIP" install -q "$(pin torch)"
"$PIP" install -q -r <(grep -v '^ffcv==' "$REQUIREMENTS")
if "$PIP" install "$(pin ffcv)" >"$VENV/ffcv-install.log" 2>&1; then
  echo "peers: FFCV installed"
else
  echo "peers: FFCV did not install (see $VENV/ffcv-install.log):" >&2
  grep -iE "error|not found" "$VENV/ffcv-install.log" | tail -n 5 >&2 || true
fi
"$VENV/bin/python" -c "
import importlib.metadata as m
for name in ('torch', 'webdataset', 'litdata', 'ffcv', 'matplotlib', 'numpy', 'pyspng', 'imagecodecs',
             'albumentations', 'scipy', 'keras'):
    try:
        print('peers:', name, m.version(name))
    except m.PackageNotFoundError:
        print('peers:', name, 'not installed')
"
