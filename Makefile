# Two commands on a fresh machine: `make demo` and `make test`.
# The venv is installed once per version of pyproject.toml (a stamp keyed on its hash).
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
PYPROJECT_HASH := $(shell $(PYTHON) -c "import hashlib,sys;print(hashlib.sha256(open('pyproject.toml','rb').read()).hexdigest()[:16])")
STAMP := $(VENV)/.installed-$(PYPROJECT_HASH)
BENCH_STAMP := $(VENV)/.bench-$(PYPROJECT_HASH)
CHAOS_ARGS ?=
BENCH_ARGS ?=

PYTEST_WORKERS ?= 4

.PHONY: install demo test check lint typecheck pytest bench chaos clean

install: $(STAMP)

$(STAMP): pyproject.toml
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	@rm -f $(VENV)/.installed-*
	@touch $(STAMP)

$(BENCH_STAMP): $(STAMP)
	$(BIN)/python -m pip install --quiet -e '.[dev,bench]'
	@rm -f $(VENV)/.bench-*
	@touch $(BENCH_STAMP)

demo: $(STAMP)
	$(BIN)/toolbatch demo

lint: $(STAMP)
	$(BIN)/ruff check toolbatch tests examples bench
	$(BIN)/ruff format --check toolbatch tests examples bench

typecheck: $(STAMP)
	$(BIN)/mypy --strict toolbatch

# Tests wait on subprocesses and servers more than they compute: more workers than cores.
pytest: $(STAMP)
	$(BIN)/python -m pytest -n $(PYTEST_WORKERS) --dist loadgroup

test: lint typecheck pytest

# The edit loop: lint, types and the fast tier (no subprocess, server or model API).
check: lint typecheck
	$(BIN)/python -m pytest -n 2 -m "not integration"

bench: $(BENCH_STAMP)
	$(BIN)/python -m bench $(BENCH_ARGS)

chaos: $(STAMP)
	$(BIN)/python -m bench.chaos $(CHAOS_ARGS)

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache
