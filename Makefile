# Every target creates the environment it needs from a bare python3; nothing global is assumed.
#   .venv         development: the package editable with .[dev,bench] (tests, lint, types, docs)
#   .venv-demo    what a user of the command line installs: .[cli], nothing else
#   .venv-latest  .[test-core,bench,pkcs11]: the tests that do not need aioresponses, on the newest
#                 aiohttp the library allows
#   .venv-dist    the built wheel, installed like a user would, running the demo
#   .venv-min     every direct dependency at the lowest version pyproject.toml allows (uv, itself
#                 installed from PyPI into .venv-uv, does the install)
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

DEMO_VENV   := .venv-demo
DEMO_STAMP  := $(DEMO_VENV)/.installed
LATEST_VENV  := .venv-latest
LATEST_STAMP := $(LATEST_VENV)/.installed
DIST_VENV   := .venv-dist
MIN_VENV    := .venv-min
MIN_STAMP   := $(MIN_VENV)/.installed
UV_VENV     := .venv-uv

.PHONY: demo test lint types unit suite docs dist dist-check test-latest test-min soak bench clean venv

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev,bench]'
	touch $(STAMP)

venv: $(STAMP)

# The demo needs the package and its cli extra only: no test, lint, docs or bench tools.
# For speed the environment gets no pip of its own (the machine's pip installs into it with
# --python; an older pip falls back to a venv with pip). Its bytecode is compiled ahead of
# time, the package's (an editable install: its source tree) included: where
# PYTHONDONTWRITEBYTECODE=1 is set (many containers), Python would otherwise compile every
# module again on every run.
$(DEMO_STAMP): pyproject.toml
	rm -rf $(DEMO_VENV)
	( $(PYTHON) -m venv --without-pip $(DEMO_VENV) \
	  && $(PYTHON) -m pip --python $(DEMO_VENV)/bin/python install --quiet -e '.[cli]' ) \
	|| ( rm -rf $(DEMO_VENV) && $(PYTHON) -m venv $(DEMO_VENV) \
	  && $(DEMO_VENV)/bin/python -m pip install --quiet -e '.[cli]' )
	$(DEMO_VENV)/bin/python -m compileall -q payments_async
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

# The declared floors, tested: tools/floors.py turns every `>=` of the runtime dependencies
# and of the extras below (the test tools' extras included) into an `==` constraint, so the
# package and its test tools are installed at exactly their lowest allowed versions (their
# own dependencies resolve to the newest that fit, as they would for a user), and
# `floors.py --check` fails the target unless the environment holds exactly those. Run here:
# the demo, then every test but two folders: tests/benchmarks (the bench extra is a tool of
# this repository, not a dependency users install) and tests/reliability (long fault, crash
# and attack runs; they run in .venv and .venv-latest, and leaving them out here keeps
# `make test` short).
MIN_EXTRAS := cli otel pkcs11 scale speed test-core test
$(MIN_STAMP): pyproject.toml tools/floors.py
	rm -rf $(MIN_VENV)
	test -x $(UV_VENV)/bin/uv || ( $(PYTHON) -m venv $(UV_VENV) \
		&& $(UV_VENV)/bin/python -m pip install --quiet uv )
	$(UV_VENV)/bin/uv venv --quiet --python "$$($(PYTHON) -c 'import sys; print(sys.executable)')" \
		$(MIN_VENV)
	$(PYTHON) tools/floors.py $(MIN_EXTRAS) > $(MIN_VENV)/floors.txt
	$(UV_VENV)/bin/uv pip install --quiet --python $(MIN_VENV)/bin/python \
		--constraint $(MIN_VENV)/floors.txt -e ".[$$(echo $(MIN_EXTRAS) | tr ' ' ',')]"
	touch $(MIN_STAMP)

test-min: $(MIN_STAMP)
	$(MIN_VENV)/bin/python tools/floors.py --check $(MIN_EXTRAS)
	$(MIN_VENV)/bin/payments-async demo --processing-delay 0.5
	$(MIN_VENV)/bin/pytest -q -m "not soak" --ignore tests/benchmarks --ignore tests/reliability

test: lint types suite docs dist-check test-latest test-min

soak: $(STAMP)
	$(BIN)/pytest -q -m soak tests/reliability

bench: $(STAMP)
	$(BIN)/python benchmarks/run_all.py

clean:
	rm -rf $(VENV) $(DEMO_VENV) $(LATEST_VENV) $(DIST_VENV) $(MIN_VENV) $(UV_VENV) .mypy_cache .pytest_cache \
		.ruff_cache build dist site
