# The two newcomer commands:
#   make demo   sets up and runs the sample pipeline on an embedded Temporal dev server
#   make test   sets up and runs lint, type checks and the test suite
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
# Empty: ./lw-data, or /var/tmp/lw-demo where the sandbox user cannot reach ./lw-data
# (a clone inside a home only its owner may enter); the demo says which.
DATA_DIR ?=
# HOLD=1 keeps the dev server and its UI up after the demo, until Ctrl-C.
HOLD ?=

.PHONY: setup system-deps demo test lint typecheck pytest bench clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip

$(VENV)/.installed: pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	touch $@

# bubblewrap, the sandbox behind lw.bash, and libseccomp2, which compiles its filter.
system-deps:
	@if ! command -v bwrap >/dev/null 2>&1 || ! /sbin/ldconfig -p | grep -q 'libseccomp\.so\.2'; then \
	  if [ "$$(id -u)" = 0 ]; then \
	    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq bubblewrap libseccomp2; \
	  else \
	    echo "bubblewrap or libseccomp2 is missing: run 'sudo apt-get install bubblewrap libseccomp2' (Debian/Ubuntu)" >&2; exit 1; \
	  fi; \
	fi

setup: system-deps $(VENV)/.installed

demo: setup
	$(BIN)/lw-temporal demo $(if $(DATA_DIR),--data-dir $(DATA_DIR)) $(if $(HOLD),--hold)

lint: setup
	$(BIN)/ruff check lw_temporal workflows tests benchmarks
	$(BIN)/ruff format --check lw_temporal workflows tests benchmarks

typecheck: setup
	$(BIN)/mypy

pytest: setup
	$(BIN)/pytest -q -p no:cacheprovider

test: lint typecheck pytest

bench: setup
	@for b in benchmarks/*.py; do echo "== $$b"; $(BIN)/python $$b || exit 1; done

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache
