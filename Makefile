# Every target creates the environment it needs from a bare python3; nothing global is assumed.
#   .venv         development: the package editable with .[dev,bench] (tests, lint, types, docs)
#   .venv-demo    what a user of the command line installs: .[cli], nothing else
#   .venv-latest  every extra users can install (and the test tools but aioresponses), each at the
#                 newest version allowed: the whole suite runs here
#   .venv-dist    the built wheel, installed like a user would, running the demo
#   .venv-min     every direct dependency at the lowest version pyproject.toml allows
# uv, itself installed from PyPI into .venv-uv by the machine's pip, creates and fills .venv,
# .venv-latest, .venv-dist and .venv-min: it resolves and installs the same versions pip would,
# in a fraction of pip's time. Those environments get pip too (uv venv --seed), for whoever
# runs `.venv/bin/python -m pip` in them. .venv-demo stays pip's: it is what `make demo` shows
# a user installing the command line.
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
UV          := $(UV_VENV)/bin/uv
# The interpreter every environment is made from, named absolutely for uv.
VENV_PYTHON  = "$$($(PYTHON) -c 'import sys; print(sys.executable)')"

.PHONY: demo test test-all lint types unit suite docs dist dist-check test-latest test-aioresponses \
	min-demo test-min test-min-all soak bench clean venv

# The tests run in this many processes (pytest-xdist). Each test is independent of the
# others: it starts its own servers on free ports, keeps its files under its own tmp_path
# and its environment and working directory in monkeypatch; each worker process starts its
# own PostgreSQL (tests/support/postgres.py) and its own SoftHSM2 token.
# Two workers a core: most integration tests spend half their time waiting on the processes
# and servers they start (a run, a worker, a receiver, PostgreSQL), and a core left idle by
# a waiting test takes the next one. Work stealing (--dist worksteal) hands the tests still
# queued to whichever worker is free, so the long tests do not end up queued behind each
# other on one worker while the others are done.
WORKERS   ?= $(shell $(PYTHON) -c "import os; print(2 * (os.cpu_count() or 1))")
PARALLEL  := -n $(WORKERS) --dist worksteal
# `make test` prints the 25 slowest tests of its main run, so that where the time goes is seen.
DURATIONS := --durations=25
# pytest keeps the test modules whose asserts it rewrote in __pycache__ (git-ignored) and
# reuses them. Where PYTHONDONTWRITEBYTECODE is set (many containers), every pytest run, each
# xdist worker included, rewrote all of them again: most of a run's collection time. Python
# reads an empty value as unset.
export PYTHONDONTWRITEBYTECODE :=

# uv's own environment gets no pip of its own where the machine's pip can install into it
# (--python): ensurepip alone took over a minute on a loaded machine. An older pip, or none,
# falls back to a venv with pip.
$(UV):
	rm -rf $(UV_VENV)
	( $(PYTHON) -m venv --without-pip $(UV_VENV) \
	  && $(PYTHON) -m pip --python $(UV_VENV)/bin/python install --quiet uv ) \
	|| ( rm -rf $(UV_VENV) && $(PYTHON) -m venv $(UV_VENV) \
	  && $(UV_VENV)/bin/python -m pip install --quiet uv )

$(STAMP): pyproject.toml | $(UV)
	$(UV) venv --quiet --seed --allow-existing --python $(VENV_PYTHON) $(VENV)
	$(UV) pip install --quiet --python $(BIN)/python -e '.[dev,bench]'
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
# tests) in .venv (aiohttp below 3.14, with aioresponses), hypothesis at its ci profile
# (1,000 examples a property). Part of `make test-all`; `make test` runs the whole suite in
# .venv-latest instead, and here only what needs aioresponses (test-aioresponses).
suite: $(STAMP)
	HYPOTHESIS_PROFILE=ci $(BIN)/pytest -q $(PARALLEL) -m "not soak and not alone"
	$(BIN)/pytest -q -m "alone and not soak"

# The tests of the modules that use aioresponses (tests/conftest.py marks them), on the
# aiohttp it supports: aioresponses cannot build aiohttp 3.14 responses, so these are the
# tests .venv-latest cannot collect. Everything else ran in .venv-latest already.
test-aioresponses: $(STAMP)
	HYPOTHESIS_PROFILE=ci $(BIN)/pytest -q $(PARALLEL) -m "aioresponses and not soak"

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

dist-check: dist | $(UV)
	rm -rf $(DIST_VENV)
	$(UV) venv --quiet --seed --python $(VENV_PYTHON) $(DIST_VENV)
	$(UV) pip install --quiet --python $(DIST_VENV)/bin/python "$$(ls dist/*.whl)[cli]"
	tmp="$$(mktemp -d)" && cd "$$tmp" && $(CURDIR)/$(DIST_VENV)/bin/payments-async --version \
		&& $(CURDIR)/$(DIST_VENV)/bin/payments-async demo --processing-delay 0.5; \
		status=$$?; rm -rf "$$tmp"; exit $$status

# What `pip install 'payments-async[...]'` gives users: the newest version of every
# dependency and extra the library allows (the test extra pins an older aiohttp for
# aioresponses, so it is the one thing left out). The whole suite runs here, once: unit,
# integration, reliability and the benchmarks' smoke tests. Test modules that need
# aioresponses are not collected (tests/conftest.py says which): test-aioresponses runs them.
LATEST_EXTRAS := test-core,cli,examples,otel,pkcs11,scale,speed,xml,bench
# (uv pip install --upgrade: every package at the newest version that fits, as pip's
# --upgrade-strategy eager.)
$(LATEST_STAMP): pyproject.toml | $(UV)
	$(UV) venv --quiet --seed --allow-existing --python $(VENV_PYTHON) $(LATEST_VENV)
	$(UV) pip install --quiet --upgrade --python $(LATEST_VENV)/bin/python \
		-e '.[$(LATEST_EXTRAS)]'
	touch $(LATEST_STAMP)

# The tests marked `alone` bound a latency or a rate under load they make themselves (3,000
# slow connections, three workers sharing a rate): another test on the other core turned
# their bounds into a measure of that test, so they run after the others, one at a time.
test-latest: $(LATEST_STAMP)
	$(LATEST_VENV)/bin/python -c "import aiohttp; print('aiohttp', aiohttp.__version__)"
	HYPOTHESIS_PROFILE=ci $(LATEST_VENV)/bin/pytest -q $(PARALLEL) $(DURATIONS) -m "not soak and not alone"
	$(LATEST_VENV)/bin/pytest -q -m "alone and not soak"

# The declared floors, tested: tools/floors.py turns every `>=` of the runtime dependencies
# and of the extras below (the test tools' extras included) into an `==` constraint, so the
# package and its test tools are installed at exactly their lowest allowed versions (their
# own dependencies resolve to the newest that fit, as they would for a user), and
# `floors.py --check` fails the target unless the environment holds exactly those.
#
# What runs at the floors is what a floor can change: the tests that call a dependency.
#   - the demo (every step of the mission, over real HTTP, through the CLI);
#   - tests/unit: msgspec's structs and codecs, joserfc's JWTs, cryptography's keys and
#     signatures, multidict headers, aiohttp's client (through
#     aioresponses, at its floor too) and server (the serving tests), click's parsing,
#     xmlschema and lxml, the OpenTelemetry API, schwifty's and pycountry's registries.
#     All of it, not a chosen list of modules: nearly every unit module reaches msgspec,
#     cryptography or aiohttp through the package, so a list of "the modules that call a
#     dependency" would be most of them and would drift as modules change, for a saving of
#     seconds (the unit tests are the cheap part of this target). Its two `slow` tests
#     (MIN_DESELECT) are left out: they bound our own memory and page size, not a floor's;
#   - the contract tests at the top of tests/ (public API, architecture, docs);
#   - MIN_INTEGRATION: the integration modules that meet a dependency nothing in tests/unit
#     meets, one or two per dependency (named below).
# Left to .venv-latest (test-latest): the tests of the package's own state machines under
# faults, crashes, kills, outages, rate limits and load (the rest of tests/integration,
# tests/reliability) and tests/benchmarks (a tool of this repository, not a dependency users
# install). They reach the dependencies through the same calls as the modules run here, so a
# floor that breaks them breaks these first; running them a second time at the floors
# tested our code twice, not the floors. `make test-min-all` still runs them all here.
MIN_INTEGRATION := \
	tests/integration/test_client_sandbox.py \
	tests/integration/test_sandbox_lifecycle.py \
	tests/integration/test_cli.py \
	tests/integration/test_cli_faults.py \
	tests/integration/test_bulk_stores.py \
	tests/integration/test_bulk_queue.py::test_queue_run_end_to_end_with_status_and_results \
	tests/integration/test_bulk_queue_rows.py \
	tests/integration/test_notification_inbox.py \
	tests/integration/test_cli_xml.py \
	tests/integration/test_telemetry_client.py \
	tests/integration/test_example_receiver_starlette.py \
	tests/integration/test_hsm_signing.py \
	tests/integration/test_proxy_client.py \
	tests/integration/test_examples.py \
	tests/integration/test_readme.py
#   aiohttp client and server over real sockets (HTTP/1.1 keep-alive, TLS, shutdown):
#     test_client_sandbox, test_sandbox_lifecycle
#   click and rich as the installed command and through CliRunner: test_cli, test_cli_faults
#   psycopg, procrastinate and PostgreSQL: test_bulk_stores (journal), a queued run end to
#     end (jobs deferred in batches, a worker, status, results) and test_bulk_queue_rows (a
#     row's job), test_notification_inbox (the inbox, SQLite and PostgreSQL); the rest of
#     test_bulk_queue (kills, races, refused addresses: about sixty CLI processes) is ours
#   xmlschema and lxml through the command line: test_cli_xml
#   the OpenTelemetry SDK's in-memory exporters: test_telemetry_client
#   starlette and uvicorn: test_example_receiver_starlette
#   python-pkcs11 with SoftHSM2: test_hsm_signing
#   proxy.py and aiohttp's proxy support: test_proxy_client
#   what a user copies (examples/, the README's first example): test_examples, test_readme
MIN_EXTRAS := cli otel pkcs11 scale speed test-core test
$(MIN_STAMP): pyproject.toml tools/floors.py | $(UV)
	rm -rf $(MIN_VENV)
	$(UV) venv --quiet --python $(VENV_PYTHON) $(MIN_VENV)
	$(PYTHON) tools/floors.py $(MIN_EXTRAS) > $(MIN_VENV)/floors.txt
	$(UV) pip install --quiet --python $(MIN_VENV)/bin/python \
		--constraint $(MIN_VENV)/floors.txt -e ".[$$(echo $(MIN_EXTRAS) | tr ' ' ',')]"
	touch $(MIN_STAMP)

# The floors are the ones installed, and the demo runs on them.
min-demo: $(MIN_STAMP)
	$(MIN_VENV)/bin/python tools/floors.py --check $(MIN_EXTRAS)
	$(MIN_VENV)/bin/payments-async demo --processing-delay 0.5

MIN_DESELECT := \
	--deselect tests/unit/test_bulk_streaming.py::test_memory_does_not_grow_with_the_number_of_rows \
	--deselect tests/unit/test_bulk_operator.py::test_a_report_lists_a_bounded_number_of_rows_whatever_the_runs_size

test-min: min-demo
	$(MIN_VENV)/bin/pytest -q $(PARALLEL) -m "not soak" $(MIN_DESELECT) tests/unit tests/test_*.py \
		$(MIN_INTEGRATION)

# The floors, exhaustively: every test but tests/benchmarks and tests/reliability.
test-min-all: min-demo
	$(MIN_VENV)/bin/pytest -q $(PARALLEL) -m "not soak and not alone" --ignore tests/benchmarks \
		--ignore tests/reliability
	$(MIN_VENV)/bin/pytest -q -m "alone and not soak" --ignore tests/benchmarks --ignore tests/reliability

# What CI runs (.ci/run) and the README promises: lint, strict types, the docs site, every
# test once on the newest dependencies, the aioresponses tests on the aiohttp they support,
# the built wheel, and the floors installed, checked and tested where they matter.
test: lint types docs test-latest test-aioresponses dist-check test-min

# The exhaustive matrix: the whole suite in .venv and in .venv-latest, and at the floors.
test-all: lint types suite docs dist-check test-latest test-min-all

soak: $(STAMP)
	$(BIN)/pytest -q -m soak tests

bench: $(STAMP)
	$(BIN)/python benchmarks/run_all.py

clean:
	rm -rf $(VENV) $(DEMO_VENV) $(LATEST_VENV) $(DIST_VENV) $(MIN_VENV) $(UV_VENV) .mypy_cache .pytest_cache \
		.ruff_cache build dist site
