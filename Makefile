# FaceFusion Portal. `make up` brings everything up on a local real cluster; `make test` runs every test.
SHELL := /bin/bash
PY := .venv/bin/python
PYTEST_ARGS ?=

.PHONY: system venv deps lint test test-sqlite test-worker test-clock bench up clean screenshots prod-shape

system:
	bash scripts/install-system.sh

venv:
	bash scripts/setup-python.sh

# Both at once (apt downloads while pip installs: about a minute less from a bare machine), when the
# Python that builds the venv has its own venv module; else the system packages (python3-venv) first.
deps:
	@if python3 -c 'import ensurepip, venv' 2>/dev/null; then \
	  bash scripts/install-system.sh & apt_pid=$$!; \
	  bash scripts/setup-python.sh; venv_rc=$$?; wait $$apt_pid; apt_rc=$$?; \
	  [ $$apt_rc = 0 ] && [ $$venv_rc = 0 ]; \
	else bash scripts/install-system.sh && bash scripts/setup-python.sh; fi

# The linter (ruff.toml says which rules and why); the first thing `make test` runs.
lint: venv
	$(PY) -m ruff check .

test: deps
	$(PY) -m ruff check .
	bash scripts/test.sh $(PYTEST_ARGS)

# Every test on SQLite, make up's database (make test runs them on PostgreSQL, and the
# database-sensitive part of the portal suite on SQLite too).
test-sqlite: system venv
	FFP_TEST_DATABASE=sqlite bash scripts/test.sh tests

test-worker: venv
	$(PY) -m pytest tests/worker $(PYTEST_ARGS)

# The portal and worker suites (SQLite) at a chosen moment in a chosen zone, the clock moving on from
# there (libfaketime): make test-clock CLOCK="2026-12-31 23:50:00" TZONE=Europe/Berlin (docs/testing.md).
TZONE ?= UTC
test-clock: system venv
	bash scripts/cluster/up.sh
	CLOCK="$(CLOCK)" TZONE="$(TZONE)" bash scripts/test-clock.sh $(PYTEST_ARGS)

# Pictures of every page (English and Chinese, desktop and phone) for docs/screenshots/, taken by the
# browser tests on the real local cluster (tests/e2e/shots.py); a plain test run keeps them in artifacts/.
screenshots: system venv
	FFP_SCREENSHOTS=$(CURDIR)/docs/screenshots bash scripts/test.sh tests/e2e/test_screenshots.py \
	  tests/e2e/test_browser_access.py tests/e2e/test_browser_recovery.py tests/e2e/test_videos_live.py \
	  tests/e2e/test_browser_uploads.py tests/e2e/test_browser_chinese.py tests/jobs/test_browser_gallery.py \
	  tests/e2e/test_browser_bookings.py tests/jobs/test_browser_preview.py tests/jobs/test_browser_new_job.py \
	  tests/jobs/test_browser_template_words.py tests/jobs/test_bookings_browser.py tests/jobs/test_browser_header.py \
	  tests/jobs/test_browser_progress.py tests/jobs/test_browser_teams.py tests/jobs/test_browser_team_lead.py \
	  tests/jobs/test_browser_cluster_page.py

bench: venv
	$(PY) bench/worker_throughput.py

up: system venv
	bash scripts/up.sh

# The production shape on this machine (docs/deploy.md): nginx with TLS on :8443, two ASGI processes,
# two RQ workers and the watcher as the systemd units run them, on PostgreSQL. `bash scripts/prod-shape.sh down` stops it.
prod-shape: system venv
	bash scripts/cluster/up.sh
	bash scripts/prod-shape.sh up

clean:
	rm -rf .venv .pytest_cache
