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

.PHONY: install bubblewrap demo test check lint typecheck pytest bench chaos clean

install: $(STAMP)

$(STAMP): pyproject.toml
	@$(MAKE) --no-print-directory bubblewrap
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	@rm -f $(VENV)/.installed-*
	@touch $(STAMP)

# The shell sandbox's namespaces layer: installed when missing and we are root on Debian or
# Ubuntu (a failure is only reported: commands then run under Landlock alone), else the one
# command to install it is printed.
BWRAP_HINT := bubblewrap (bwrap) is missing: shell commands run under Landlock alone; install it with: sudo apt-get install -y bubblewrap
bubblewrap:
	@if command -v bwrap >/dev/null 2>&1; then :; \
	elif [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	  echo "installing bubblewrap (the shell sandbox's namespaces)"; \
	  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq bubblewrap >/dev/null 2>&1 \
	  || { apt-get update -qq >/dev/null 2>&1 \
	       && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq bubblewrap >/dev/null 2>&1; } \
	  || echo "$(BWRAP_HINT)"; \
	else echo "$(BWRAP_HINT)"; fi

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
# Bytecode is cached even where PYTHONDONTWRITEBYTECODE is set (this machine sets it):
# otherwise every worker and every `toolbatch`, hook or MCP server process the tests start
# compiles the package and the tests from source (a third of collection, of a CLI start).
PYTEST := env -u PYTHONDONTWRITEBYTECODE $(BIN)/python -m pytest
pytest: $(STAMP)
	$(PYTEST) -n $(PYTEST_WORKERS) --dist loadgroup

test: lint typecheck pytest

# The edit loop: lint, types and the fast tier (no subprocess, server or model API).
check: lint typecheck
	$(PYTEST) -n 2 -m "not integration"

bench: $(BENCH_STAMP)
	$(BIN)/python -m bench $(BENCH_ARGS)

chaos: $(STAMP)
	$(BIN)/python -m bench.chaos $(CHAOS_ARGS)

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache
