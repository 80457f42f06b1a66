# FaceFusion Portal. `make up` brings everything up on a local real cluster; `make test` runs every test.
SHELL := /bin/bash
PY := .venv/bin/python
PYTEST_ARGS ?=

.PHONY: system venv test test-worker bench up clean

system:
	bash scripts/install-system.sh

venv:
	bash scripts/setup-python.sh

test: system venv
	bash scripts/test.sh $(PYTEST_ARGS)

test-worker: venv
	$(PY) -m pytest tests/worker $(PYTEST_ARGS)

bench: venv
	$(PY) bench/worker_throughput.py

up: system venv
	bash scripts/up.sh

clean:
	rm -rf .venv .pytest_cache
