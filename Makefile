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

# bubblewrap, the sandbox behind lw.bash, libseccomp2, which compiles its filter, and a
# python3 under /usr, which the sandbox's self-test and its connect broker run inside
# the sandbox; libnss-wrapper gives commands under Landlock their account (whoami,
# id -un); git is what the tests of ordinary agent work commit with; pip, git, curl and
# openssl are the real clients the egress tests run inside the sandbox through the proxy;
# chromium is the headless browser the review page's tests drive (installed for root;
# without it those tests are skipped, saying so).
SYSTEM_PACKAGES := bubblewrap libseccomp2 python3 python3-pip libnss-wrapper git curl openssl chromium
system-deps:
	@if ! command -v bwrap >/dev/null 2>&1 || ! /sbin/ldconfig -p | grep -q 'libseccomp\.so\.2' \
	    || ! { [ -x /usr/bin/python3 ] || [ -x /usr/local/bin/python3 ]; } \
	    || ! { /usr/bin/python3 -c 'import pip' 2>/dev/null || /usr/local/bin/python3 -c 'import pip' 2>/dev/null; } \
	    || ! ls /usr/lib/*/libnss_wrapper.so /usr/lib64/libnss_wrapper.so 2>/dev/null | grep -q . \
	    || ! command -v git >/dev/null 2>&1 || ! command -v curl >/dev/null 2>&1 \
	    || ! command -v openssl >/dev/null 2>&1 \
	    || { [ "$$(id -u)" = 0 ] && [ ! -x /usr/bin/chromium ]; }; then \
	  if [ "$$(id -u)" = 0 ]; then \
	    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $(SYSTEM_PACKAGES); \
	  else \
	    echo "a system package is missing: run 'sudo apt-get install $(SYSTEM_PACKAGES)' (Debian/Ubuntu)" >&2; exit 1; \
	  fi; \
	fi

setup: system-deps $(VENV)/.installed

demo: setup
	$(BIN)/lw-temporal demo $(if $(DATA_DIR),--data-dir $(DATA_DIR)) $(if $(HOLD),--hold)

lint: setup
	$(BIN)/ruff check lw_temporal _lw_temporal_entry.py workflows tests benchmarks
	$(BIN)/ruff format --check lw_temporal _lw_temporal_entry.py workflows tests benchmarks

typecheck: setup
	$(BIN)/mypy

pytest: setup
	$(BIN)/pytest -q -p no:cacheprovider -n 3 --dist loadfile --durations=15

test: lint typecheck pytest

bench: setup
	@for b in benchmarks/*.py; do echo "== $$b"; $(BIN)/python $$b || exit 1; done

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache
