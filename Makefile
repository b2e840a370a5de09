# Everything a new machine needs: `make demo` runs the demo, `make test` runs the tests.
SHELL := /bin/bash
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: venv test test-unit lint demo bench browser-deps compose-deps clean

$(STAMP): requirements.txt requirements-test.txt constraints.txt pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip wheel
	$(BIN)/pip install --quiet -r requirements.txt -r requirements-test.txt -c constraints.txt
	$(BIN)/pip install --quiet --no-deps -e .
	touch $(STAMP)

venv: $(STAMP)

# Debian's Chromium and ChromeDriver for the browser test (no browser download: this machine has no internet).
browser-deps:
	@if command -v chromium >/dev/null 2>&1 && command -v chromedriver >/dev/null 2>&1; then \
	  echo "browser-deps: chromium and chromedriver are installed"; \
	else \
	  SUDO=$$([ "$$(id -u)" = 0 ] || echo sudo); \
	  $$SUDO apt-get update -qq && \
	  $$SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium chromium-driver >/dev/null && \
	  echo "browser-deps: installed Debian's chromium and chromium-driver"; \
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

lint: venv
	$(BIN)/ruff check plugins include dags tests bench

test: venv browser-deps compose-deps lint
	PATH="$(abspath $(BIN)):$$PATH" $(BIN)/python -m pytest -p no:cacheprovider $(PYTEST_ARGS)

test-unit: venv
	$(BIN)/python -m pytest -m "not e2e and not browser and not celery and not chaos and not integration and not bench and not compose and not install" $(PYTEST_ARGS)

demo: venv
	PATH="$(abspath $(BIN)):$$PATH" $(BIN)/python devtools/demo.py $(DEMO_ARGS)

bench: venv
	PATH="$(abspath $(BIN)):$$PATH" $(BIN)/python bench/run_all.py

clean:
	rm -rf $(VENV) build *.egg-info
