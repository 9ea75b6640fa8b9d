# Two commands do everything on a fresh machine:
#   make sample   install, generate a small synthetic dataset, pack it, describe it
#   make test     install, lint, run the test suite without the tests marked slow
#                 (make test-all runs those too)
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: sample test test-all lint format bench clean

$(STAMP): setup.cfg pyproject.toml scripts/install.sh scripts/apt-install.sh
	bash scripts/install.sh
	touch $(STAMP)

sample: $(STAMP)
	$(BIN)/python -m packer.synthetic data/sample
	$(BIN)/pack data/sample --out data/sample-npy --format npy --size 160x120 --overwrite
	$(BIN)/packer info data/sample-npy

lint: $(STAMP)
	$(BIN)/ruff format --check .
	$(BIN)/ruff check .

format: $(STAMP)
	$(BIN)/ruff format .
	$(BIN)/ruff check --fix .

test: lint
	$(BIN)/pytest -q -m "not slow"

test-all: lint
	$(BIN)/pytest -q -m "slow or not slow"

bench: $(STAMP)
	$(BIN)/python benchmarks/bench_read.py
	$(BIN)/python benchmarks/bench_recordio.py
	$(BIN)/python benchmarks/bench_read_paths.py

clean:
	rm -rf $(VENV) data build *.egg-info
