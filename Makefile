# r2med-eval. `make` sets everything up and runs the embedded default; `make test` runs the tests.
PYTHON ?= python3
VENV ?= .venv
CORES ?= 8
# test files run on this many workers (pytest-xdist, one file per worker at a time: a file's module fixtures run once)
TEST_WORKERS ?= 2
BIN := $(VENV)/bin
# torch 2.13.0 comes from PyPI: on Linux x86_64 its CUDA build (it runs on CPU too), on macOS and Windows the CPU
# build; TORCH_INDEX=https://download.pytorch.org/whl/cpu takes the CPU build (another of PyTorch's indexes: a CUDA
# version, docs/development.md#cuda)
TORCH_INDEX ?=

.PHONY: all setup run test lint readme clean
all: run

setup: $(VENV)/.installed

$(VENV)/.installed: requirements.lock requirements.txt requirements-nodeps.txt pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --upgrade pip
	$(BIN)/python -m pip install torch==2.13.0 $(if $(TORCH_INDEX),--index-url $(TORCH_INDEX))
	$(BIN)/python -m pip install -r requirements.lock
	$(BIN)/python -m pip install --no-deps -r requirements-nodeps.txt
	$(BIN)/python -m pip install --no-deps -e .
	touch $@

# the terminal: a line per finished job with an ETA (Snakemake's logger plugin r2med-eval); the full output is
# in .snakemake/log/ (named at the end), or on the terminal with LOGGER= (make run LOGGER=)
LOGGER ?= --logger=r2med-eval
run: setup
	$(BIN)/snakemake --cores $(CORES) --rerun-incomplete $(LOGGER) all

test: setup
	$(BIN)/python -m pytest -n $(TEST_WORKERS) --dist loadfile tests

lint: setup
	$(BIN)/ruff check src tests bench scripts .ci
	$(BIN)/snakemake --lint

readme: setup
	$(BIN)/python .ci/readme_table.py

clean:
	rm -rf results logs benchmarks .snakemake
