# Everything a new machine needs: `make demo` runs the demo, `make test` runs the tests.
SHELL := /bin/bash
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
# The lowest Airflow the provider declares (requirements-lowest.txt, pinned): its own virtualenv and suite.
LOWEST_VENV ?= .venv-lowest
LOWEST_BIN := $(LOWEST_VENV)/bin
LOWEST_STAMP := $(LOWEST_VENV)/.installed
# The test suites run on this many pytest-xdist workers: one more than the machine's cores, since the tests wait on
# subprocesses (emulators, Airflow, Docker) as much as they compute. A module's tests stay on one worker; the modules
# that start Airflow stacks share one (tests/parallel.py). TEST_WORKERS=0 runs the tests one by one, in-process.
TEST_WORKERS ?= $(shell echo $$(( $$(nproc 2>/dev/null || echo 1) + 1 )))
# The lowest-Airflow suite's workers: as many when run alone (make test-lowest), LOWEST_BESIDE_WORKERS beside the main
# suite (make test), at the CPU priority LOWEST_NICE, its output kept in LOWEST_LOG.
LOWEST_WORKERS ?= $(TEST_WORKERS)
LOWEST_BESIDE_WORKERS ?= 2
LOWEST_NICE ?= 10
LOWEST_LOG ?= test-artifacts/lowest-suite.log
# What runs without starting Airflow components, Docker or a browser.
IN_PROCESS := not e2e and not browser and not celery and not chaos and not integration and not bench and not compose and not install and not multiday

.PHONY: venv venv-lowest test test-unit test-lowest system-deps lint demo bench browser-deps compose-deps clean

$(STAMP): requirements.txt requirements-test.txt constraints.txt pyproject.toml include/pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip wheel
	$(BIN)/pip install --quiet -r requirements.txt -r requirements-test.txt -c constraints.txt
	@# the provider first, then the emulator: a provider of an older layout that carried the findings-emulator
	@# command takes that file with it when it is replaced, so the emulator's install comes after
	$(BIN)/pip install --quiet --no-deps -e '.[emulator]'
	$(BIN)/pip install --quiet --no-deps -e ./include
	touch $(STAMP)

venv: $(STAMP)

$(LOWEST_STAMP): requirements-lowest.txt pyproject.toml include/pyproject.toml
	test -x $(LOWEST_BIN)/python || $(PYTHON) -m venv $(LOWEST_VENV)
	$(LOWEST_BIN)/pip install --quiet --upgrade pip wheel
	$(LOWEST_BIN)/pip install --quiet --no-deps -r requirements-lowest.txt
	$(LOWEST_BIN)/pip install --quiet --no-deps -e '.[emulator]'
	$(LOWEST_BIN)/pip install --quiet --no-deps -e ./include
	$(LOWEST_BIN)/pip check
	touch $(LOWEST_STAMP)

venv-lowest: $(LOWEST_STAMP)

# Debian's Chromium and ChromeDriver for the browser test (no browser download: this machine has no internet), and
# Node.js for the dashboard bundle's test.
browser-deps:
	@if command -v chromium >/dev/null 2>&1 && command -v chromedriver >/dev/null 2>&1; then \
	  echo "browser-deps: chromium and chromedriver are installed"; \
	else \
	  SUDO=$$([ "$$(id -u)" = 0 ] || echo sudo); \
	  $$SUDO apt-get update -qq && \
	  $$SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium chromium-driver >/dev/null && \
	  echo "browser-deps: installed Debian's chromium and chromium-driver"; \
	fi
	@# Node.js loads the dashboard's bundle in tests/dashboard/test_bundle.py
	@if command -v node >/dev/null 2>&1; then \
	  echo "browser-deps: node is installed"; \
	else \
	  SUDO=$$([ "$$(id -u)" = 0 ] || echo sudo); \
	  $$SUDO apt-get update -qq && \
	  $$SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq nodejs >/dev/null && \
	  echo "browser-deps: installed Debian's nodejs"; \
	fi

# Debian's Docker engine, docker-compose and debootstrap for the compose stack test (tests/compose): official
# images cannot be pulled here, so the test builds stand-ins on a debootstrap Debian base.
compose-deps:
	@if command -v dockerd >/dev/null 2>&1 && command -v docker-compose >/dev/null 2>&1 \
	    && command -v debootstrap >/dev/null 2>&1; then \
	  echo "compose-deps: dockerd, docker-compose and debootstrap are installed"; \
	else \
	  SUDO=$$([ "$$(id -u)" = 0 ] || echo sudo); \
	  $$SUDO apt-get update -qq && \
	  $$SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq docker.io docker-compose debootstrap >/dev/null && \
	  echo "compose-deps: installed Debian's docker.io, docker-compose and debootstrap"; \
	fi

# ruff, then the import contracts ([tool.importlinter] in pyproject.toml: the layers, no Airflow below the hooks, no
# circles), then mypy ([tool.mypy]: strict on client, warehouse, pipeline, governance), twice: the provider,
# emulator, DAGs, devtools and tests; then bench/, whose scripts import each other as top-level modules.
lint: venv
	$(BIN)/ruff check plugins include dags tests bench devtools
	$(BIN)/lint-imports
	$(BIN)/python -m mypy
	MYPYPATH=bench $(BIN)/python -m mypy bench

# Both virtualenvs and the Debian packages are made side by side, lint runs once the first virtualenv is there; then
# the main suite and the lowest-Airflow suite run side by side. The lowest suite runs at a lower CPU priority
# (LOWEST_NICE), so that it takes what the main suite's waits leave idle and does not starve the Airflow stacks;
# its output is kept in $(LOWEST_LOG) and printed when both are done. The target fails if either suite fails.
test:
	@$(MAKE) --no-print-directory -j3 lint venv-lowest system-deps
	@mkdir -p $(dir $(LOWEST_LOG))
	@echo "test: the lowest-Airflow suite runs beside the main suite (output: $(LOWEST_LOG))"
	@PATH="$(abspath $(LOWEST_BIN)):$$PATH" nice -n $(LOWEST_NICE) $(call LOWEST_PYTEST,$(LOWEST_BESIDE_WORKERS)) \
	  $(LOWEST_PYTEST_ARGS) >$(LOWEST_LOG) 2>&1 & lowest=$$!; trap 'kill $$lowest 2>/dev/null' INT TERM; \
	PATH="$(abspath $(BIN)):$$PATH" $(BIN)/python -m pytest -p no:cacheprovider -n $(TEST_WORKERS) $(PYTEST_ARGS); \
	main=$$?; wait $$lowest; low=$$?; \
	echo "===== the lowest-Airflow suite ($(LOWEST_LOG)) ====="; cat $(LOWEST_LOG); \
	echo "test: main suite exit $$main, lowest-Airflow suite exit $$low"; \
	[ $$main -eq 0 ] && [ $$low -eq 0 ]

# The Debian packages, one apt-get after the other (two at once would wait on dpkg's lock).
system-deps:
	@$(MAKE) --no-print-directory browser-deps
	@$(MAKE) --no-print-directory compose-deps

test-unit: venv
	$(BIN)/python -m pytest -m "$(IN_PROCESS)" -n $(TEST_WORKERS) $(PYTEST_ARGS)

# The provider, hook, operator, sensor, trigger, DAG and warehouse tests on the lowest declared Airflow (with the
# lowest declared versions of the provider's dependencies), DAG runs against the emulator included. Not here: the
# suites that start Airflow components, Docker or a browser, and the three that answer an approval inside
# dag.test(), which Airflow 3.2's dag.test() cannot serve (approvals there need the scheduler and triggerer).
# The client's tests run here too (the lowest httpx, msgspec and pydantic read both wire dialects); the seven DAGs
# against the real dialect (tests/dags/test_real_dialect_dags.py) do not: which dialect the service speaks is the
# client's concern, not Airflow's, and tests/pipeline/test_both_dialects.py pulls both dialects on these versions.
# The DAG runs, the longest modules, come first (the workers take the modules in this order, tests/parallel.py).
LOWEST_PYTEST = $(LOWEST_BIN)/python -m pytest -p no:cacheprovider -n $(1) \
  -m "(not e2e and not browser and not celery and not chaos and not bench and not compose and not install) and not approval_in_dag_test" \
  --ignore=tests/dags/test_real_dialect_dags.py \
  tests/dags tests/pipeline tests/operators tests/sensors tests/triggers tests/hooks tests/client \
  tests/test_provider_info.py tests/warehouse tests/governance tests/test_alerts.py

test-lowest: venv-lowest
	PATH="$(abspath $(LOWEST_BIN)):$$PATH" $(call LOWEST_PYTEST,$(LOWEST_WORKERS)) $(LOWEST_PYTEST_ARGS)

demo: venv
	PATH="$(abspath $(BIN)):$$PATH" $(BIN)/python devtools/demo.py $(DEMO_ARGS)

bench: venv
	PATH="$(abspath $(BIN)):$$PATH" $(BIN)/python bench/run_all.py

clean:
	rm -rf $(VENV) $(LOWEST_VENV) build *.egg-info plugins/*.egg-info include/build include/*.egg-info
