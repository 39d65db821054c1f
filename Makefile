# Two commands do all set-up on a fresh machine with Python 3.11 and git:
#   make all    – create the environment if missing, run the pipeline (dvc repro), build the book
#   make test   – create the environment if missing, run the test suite
PYTHON ?= python3.11
VENV   := .venv
BIN    := $(VENV)/bin
# Stage commands call `python`, `papermill`, `jupyter-book`: the environment's, not the system's.
export PATH := $(abspath $(VENV))/bin:$(PATH)
export DVC_NO_ANALYTICS := 1
export PYTHONHASHSEED := 0

.PHONY: all env test test-all test-device smoke rehearsal lint bench clean-env

# dvc repro, with the many small training and measuring stages two at a time (scripts/lanes.py)
all: env
	$(BIN)/python scripts/lanes.py --pipeline

# The environment is (re)built whenever pyproject.toml or requirements-nodeps.txt changes.
env: $(VENV)/.installed
$(VENV)/.installed: pyproject.toml requirements-nodeps.txt
	@command -v $(PYTHON) >/dev/null || { echo "need $(PYTHON) on PATH (or: make PYTHON=python3)"; exit 1; }
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e ".[dev]"
	$(BIN)/python -m pip install --quiet --no-deps -r requirements-nodeps.txt
	touch $@

# A worker per core; tests/conftest.py gives each its share of the cores' threads.
test: env
	$(BIN)/python -m pytest -q -n auto

test-all: env
	$(BIN)/python -m pytest -q -n auto -m "not device"

# Tests that need a CUDA GPU (marked `device`); they fail, not skip, where there is none.
test-device: env
	$(BIN)/python -m pytest -q -m device

# The CI smoke profile: the same pipeline with profiles/smoke.yaml applied, run in a scratch copy
# of the working tree (profile-runs/smoke/) so the workspace and its default results stay as
# they were; every file a stage opens is checked against its deps and outs.
smoke: env
	$(BIN)/python scripts/run_profile.py smoke --audit

# The paper profile rehearsed offline: profiles/rehearsal.yaml (the paper profile at
# the smoke sizes) against a fake hub (scripts/fake_hub.py: tiny models and corpora under the
# real hub names, HF_HUB_OFFLINE=1), in a scratch copy like `make smoke`.
rehearsal: env
	eval "$$($(BIN)/python scripts/fake_hub.py profile-runs/fake-hub)" && \
	  $(BIN)/python scripts/run_profile.py rehearsal --audit

lint: env
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/python scripts/strip_notebooks.py --check

bench: env
	$(BIN)/python benchmarks/bench_metrics.py
	$(BIN)/python benchmarks/bench_train.py

clean-env:
	rm -rf $(VENV)
