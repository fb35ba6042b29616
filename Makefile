# Reproduce every number: `make report`. Run the tests: `make test`.
# `make` alone lists the targets.
.DEFAULT_GOAL := help
SHELL := /bin/bash

PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
PROFILE ?= standard
# FORCE=1 reruns cells that data/ already holds for the same code on this machine
FORCE_FLAG := $(if $(filter 1 yes true,$(FORCE)),--force,)
# STUDY=drain measures that study only, then renders the whole report from data/ (a change
# that touches one study re-publishes that study)
STUDY_FLAG := $(if $(STUDY),--study $(STUDY),)
# an adapter's sources: a change to one rebuilds it at the next setup (builds are cached by content)
ADAPTER_SOURCES := $(shell find benchlib/queues/adapters -type f -not -path '*/node_modules/*' 2>/dev/null)

.PHONY: help setup pgqrs-full report test test-all lab lock clean

help: ## list the targets
	@awk 'BEGIN {FS = ":.*## "} /^[a-z-]+:.*## / {printf "  make %-8s %s\n", $$1, $$2}' $(MAKEFILE_LIST)
	@echo "  variables: PROFILE=smoke|standard|seed|soak|full (report, default standard), FORCE=1 (rerun cached cells), STUDY=NAME (report: measure one study)"

setup: $(STAMP) ## create .venv with the pinned dependencies (skipped when up to date)

$(STAMP): pyproject.toml requirements.lock $(ADAPTER_SOURCES)
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --disable-pip-version-check -r requirements.lock
	$(PY) -m pip install --quiet --disable-pip-version-check --no-deps -e .
	$(PY) -m benchlib.wheels install
	$(PY) -m benchlib.adapters
	@touch $@

pgqrs-full: setup ## build pgqrs with its SQLite, Turso and S3 stores (needs Rust; a long compile, cached once)
	$(PY) -m benchlib.wheels build

# A sweep whose samples failed (exit 1) still renders its report, which says why, and make
# then fails too; bad input (2) or an interrupt (130) renders nothing.
report: setup ## run every study for PROFILE (papermill), then render its figures and report
	@rc=0; $(PY) -m benchlib sweep --profile $(PROFILE) $(STUDY_FLAG) $(FORCE_FLAG) || rc=$$?; \
	if [ $$rc -le 1 ]; then $(PY) -m benchlib report --profile $(PROFILE) || exit $$?; fi; exit $$rc

# Four workers (pytest-xdist, the maintained way to spread pytest over processes) on 2 cores:
# most integration tests wait on windows, servers and subprocesses, not the CPU, so four
# overlap those waits (pytest 7 min 15 s here against 10 min 30 s with two, 2026-11-28, each
# beside a smoke report). Each worker has its own session server; a test that looks for
# processes left behind looks only at its own (its descendants, its data directory), never at
# every process, which would count another worker's. nbval keeps each notebook's cells together
# on one worker (--dist loadscope). `make test XDIST=` runs serially.
XDIST := -n 4
NBVAL_DIST = $(XDIST) $(if $(strip $(XDIST)),--dist loadscope)
test: setup ## unit, integration and contract tests (real servers), then nbval over every notebook; not the slow ones
	$(PY) -m pytest -m "not slow" $(XDIST) --durations=25 tests
	$(PY) -m pytest -p no:cacheprovider $(NBVAL_DIST) --nbval-lax notebooks

test-all: setup ## every test, the slow ones too (every cell of a study, long crash runs)
	$(PY) -m pytest $(XDIST) --durations=25 tests
	$(PY) -m pytest -p no:cacheprovider $(NBVAL_DIST) --nbval-lax notebooks

lab: setup ## open the notebooks in JupyterLab (prints the URL to open)
	$(PY) -m benchlib.lab

lock: ## re-pin requirements.lock from pyproject.toml (uv)
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --disable-pip-version-check uv
	$(VENV)/bin/uv pip compile pyproject.toml --python-version 3.11 --quiet -o requirements.lock

clean: ## remove the venv, build/ and the resume cache (data/, figures/ and report.md stay)
	rm -rf $(VENV) build .pytest_cache data/*/.cells
	find . -name __pycache__ -type d -prune -exec rm -rf {} +
