# Two commands for a fresh machine: `make demo` and `make test`.
# Everything else is set up here: the virtualenv, the packages, Debian packages.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-stamp

.PHONY: test setup demo lint typecheck pytest sysdeps eg-venv notebooks bench clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -e ".[test]"
	touch $(STAMP)

# bubblewrap for isolation="sandbox" and libseccomp2 for its system-call filter, chromium for
# the page tests, PostgreSQL for the registry test with several API replicas (Debian/Ubuntu):
# the missing ones in one apt-get run; each test that needs one says so where it is missing.
sysdeps:
	@missing=""; \
	command -v bwrap >/dev/null 2>&1 || missing="$$missing bubblewrap"; \
	ldconfig -p 2>/dev/null | grep -q 'libseccomp\.so\.2' || missing="$$missing libseccomp2"; \
	command -v chromium >/dev/null 2>&1 || missing="$$missing chromium"; \
	ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || command -v initdb >/dev/null 2>&1 \
	  || missing="$$missing postgresql"; \
	if [ -n "$$missing" ]; then \
	  SUDO=$$( [ "$$(id -u)" = 0 ] || echo sudo ); \
	  $$SUDO apt-get update -qq >/dev/null; \
	  $$SUDO apt-get install -y -qq $$missing >/dev/null 2>&1 || for p in $$missing; do \
	    $$SUDO apt-get install -y -qq $$p >/dev/null || echo "note: $$p could not be installed; the tests that need it say so"; \
	  done; \
	fi

# The virtualenv and the Debian packages download at once (two jobs), then the rest in order.
setup:
	$(MAKE) -j2 --output-sync=target $(STAMP) sysdeps

# Jupyter Enterprise Gateway 3.3 for the gateway tests, in a virtualenv of its own under
# $(VENV) (it pins jupyter-client<7 and pyzmq<25): made here, before the tests, so its pip
# install (about 20 s) is not counted against a test's timeout. The tests make it too
# when it is missing; a second run only checks it.
eg-venv: $(STAMP)
	$(BIN)/python -m tests.enterprise_gateway_fixtures

lint: $(STAMP)
	$(BIN)/ruff check kernel_analyst tests benchmarks examples

typecheck: $(STAMP)
	$(BIN)/mypy kernel_analyst

# Two workers (whole modules each, so module fixtures stay shared; the long modules first,
# see LONG_MODULES in tests/conftest.py), then the tests that load the machine on purpose,
# alone, so they never slow a neighbour's timing.
pytest: $(STAMP) sysdeps eg-venv
	$(BIN)/pytest -q -p no:cacheprovider -n 2 --dist loadfile --no-loadscope-reorder -m "not busy_machine" --durations=15
	$(BIN)/pytest -q -p no:cacheprovider -m busy_machine

# The gateway's virtualenv downloads (network) while mypy and ruff read the code (CPU).
test: setup
	$(MAKE) -j2 --output-sync=target lint typecheck eg-venv
	$(MAKE) pytest

demo: $(STAMP)
	$(BIN)/kernel-analyst eda examples/data/penguins.csv -o out/penguins-eda.ipynb --html out/penguins-eda.html

notebooks: $(STAMP)
	$(BIN)/kernel-analyst eda examples/data/penguins.csv -o notebooks/penguins-eda.ipynb
	$(BIN)/kernel-analyst eda examples/data/tips.csv -o notebooks/tips-eda.ipynb

bench: $(STAMP)
	$(BIN)/python benchmarks/run.py

clean:
	rm -rf $(VENV) out .pytest_cache .mypy_cache .ruff_cache
