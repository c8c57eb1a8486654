# Every target creates the environment it needs from a bare python3; nothing global is assumed.
#   .venv         development: the package editable with .[dev,bench] (tests, lint, types, docs)
#   .venv-demo    what a user of the command line installs: .[cli], nothing else
#   .venv-latest  .[test-core,bench,pkcs11]: the tests that do not need aioresponses, on the newest
#                 aiohttp the library allows
#   .venv-dist    the built wheel, installed like a user would, running the demo
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

DEMO_VENV   := .venv-demo
DEMO_STAMP  := $(DEMO_VENV)/.installed
LATEST_VENV  := .venv-latest
LATEST_STAMP := $(LATEST_VENV)/.installed
DIST_VENV   := .venv-dist

.PHONY: demo test lint types unit suite docs dist dist-check test-latest soak bench clean venv

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev,bench]'
	touch $(STAMP)

venv: $(STAMP)

# The demo needs the package and its cli extra only: no test, lint, docs or bench tools.
# For speed the environment gets no pip of its own (the machine's pip installs into it with
# --python; an older pip falls back to a venv with pip) and no ahead-of-time bytecode
# (Python compiles what the demo imports, once).
$(DEMO_STAMP): pyproject.toml
	rm -rf $(DEMO_VENV)
	( $(PYTHON) -m venv --without-pip $(DEMO_VENV) \
	  && $(PYTHON) -m pip --python $(DEMO_VENV)/bin/python install --quiet --no-compile \
		-e '.[cli]' ) \
	|| ( rm -rf $(DEMO_VENV) && $(PYTHON) -m venv $(DEMO_VENV) \
	  && $(DEMO_VENV)/bin/python -m pip install --quiet --no-compile -e '.[cli]' )
	touch $(DEMO_STAMP)

demo: $(DEMO_STAMP)
	$(DEMO_VENV)/bin/payments-async demo

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

types: $(STAMP)
	$(BIN)/mypy --strict payments_async

# The quick loop while working: tests/unit without the tests marked slow, hypothesis at
# its dev profile (about 100 examples a property).
unit: $(STAMP)
	$(BIN)/pytest -q -m "not soak and not slow" tests/unit

# The whole suite but the soak (unit, slow, integration, reliability, benchmark smoke
# tests), hypothesis at its ci profile (1,000 examples a property).
suite: $(STAMP)
	HYPOTHESIS_PROFILE=ci $(BIN)/pytest -q -m "not soak"

# The site (API reference from the docstrings, and the guides) in site/; --strict turns a
# broken link or a reference to a renamed name into a failure.
docs: $(STAMP)
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict --site-dir site
	$(BIN)/python tools/check_site.py site

# sdist, then the wheel built from that sdist; both checked; the wheel installed into a
# clean environment runs the demo from outside the source tree.
dist: $(STAMP)
	rm -rf dist
	$(BIN)/python -m build --outdir dist .
	$(BIN)/twine check --strict dist/*

dist-check: dist
	rm -rf $(DIST_VENV)
	$(PYTHON) -m venv $(DIST_VENV)
	$(DIST_VENV)/bin/python -m pip install --quiet "$$(ls dist/*.whl)[cli]"
	tmp="$$(mktemp -d)" && cd "$$tmp" && $(CURDIR)/$(DIST_VENV)/bin/payments-async --version \
		&& $(CURDIR)/$(DIST_VENV)/bin/payments-async demo --processing-delay 0.5; \
		status=$$?; rm -rf "$$tmp"; exit $$status

# What `pip install payments-async` gives users: the newest aiohttp the library allows
# (the test extra pins an older one for aioresponses). Test modules that need aioresponses
# are not collected here (tests/conftest.py says which); everything else runs.
$(LATEST_STAMP): pyproject.toml
	$(PYTHON) -m venv $(LATEST_VENV)
	$(LATEST_VENV)/bin/python -m pip install --quiet --upgrade pip
	$(LATEST_VENV)/bin/python -m pip install --quiet --upgrade --upgrade-strategy eager \
		-e '.[test-core,bench,pkcs11]'
	touch $(LATEST_STAMP)

test-latest: $(LATEST_STAMP)
	$(LATEST_VENV)/bin/python -c "import aiohttp; print('aiohttp', aiohttp.__version__)"
	HYPOTHESIS_PROFILE=ci $(LATEST_VENV)/bin/pytest -q -m "not soak"

test: lint types suite docs dist-check test-latest

soak: $(STAMP)
	$(BIN)/pytest -q -m soak tests/reliability

bench: $(STAMP)
	$(BIN)/python benchmarks/run_all.py

clean:
	rm -rf $(VENV) $(DEMO_VENV) $(LATEST_VENV) $(DIST_VENV) .mypy_cache .pytest_cache \
		.ruff_cache build dist site
