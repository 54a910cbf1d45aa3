# erobs_bt developer commands. Everything goes through scripts/setup.sh (idempotent: a no-op
# when nothing changed) and scripts/env.sh (ROS discovery on localhost, fast Fast DDS discovery,
# throw-away ROS log directory).
#
#   make setup   system packages, .venv, pinned requirements, ROS interfaces, erobs_bt (-e)
#   make test    setup, then pytest on TEST_WORKERS (2) processes  PYTEST_ARGS="-k cache -x" to narrow
#   make test-fast  setup, then the tests without ROS, a browser or a long run (-m "not ros and not browser and not slow")
#   make run     setup, then run SCRIPT with POSES on the simulated cell (--auto-resume)
#   make lint    ruff (check + format --check), mypy, lint-imports (the layers, pyproject.toml) and
#                scripts/class_sizes.py (a class over 400 lines or 25 methods says why at its top)
#   make bench   setup, then bench/run_all.py
#   make clean   remove build trees and caches (keeps .venv);  make distclean  also .venv
#
# ROS 2 distro: Jazzy (EROBS's cell) by default, in .venv; `EROBS_ROS_DISTRO=kilted` sets up and
# uses .venv-kilted instead (e.g. `make test EROBS_ROS_DISTRO=kilted PYTEST_ARGS="-m ros"`).
# Not ROS_DISTRO: a sourced /opt/ros/<distro>/setup.bash sets that one.

SHELL := /bin/bash
.SHELLFLAGS := -euo pipefail -c
.DEFAULT_GOAL := help

EROBS_ROS_DISTRO ?= jazzy
ifeq ($(strip $(EROBS_ROS_DISTRO)),)
override EROBS_ROS_DISTRO := jazzy
endif
export EROBS_ROS_DISTRO
VENV ?= $(if $(filter jazzy,$(EROBS_ROS_DISTRO)),.venv,.venv-$(EROBS_ROS_DISTRO))
SCRIPT ?= config/full_experiment.json
POSES ?= config/poses.yaml
RUN_ARGS ?= --auto-resume
PYTEST_ARGS ?=
# `make test` spreads the test files over this many pytest-xdist workers (CI's machine has 2 cores);
# TEST_WORKERS=0 runs them in this process.
TEST_WORKERS ?= 2
LINT_PATHS ?= erobs_bt test bench scripts setup.py

ENV := scripts/env.sh

.PHONY: help setup test test-fast run lint bench clean distclean

help:
	@sed -n 's/^#   make /  make /p' Makefile

setup:
	@EROBS_VENV="$(abspath $(VENV))" scripts/setup.sh

# pytest exit statuses: 0 passed, 1 failures, 2 interrupted, 3 internal error, 4 usage error,
# 5 no tests collected. 5 is a failure here: the suite exists, so collecting nothing means a
# broken selection or collection, never success.
define run_pytest
	@status=0; EROBS_VENV="$(abspath $(VENV))" $(ENV) $(VENV)/bin/python -m pytest $(1) || status=$$?; \
	if [ $$status -eq 5 ]; then echo "make test: pytest collected no tests (exit 5); treating it as a failure" >&2; fi; \
	exit $$status
endef

test: setup
	$(call run_pytest,-n $(TEST_WORKERS) --dist loadfile $(PYTEST_ARGS))

# The quick tier for a change: the same as `make test` without the markers ros, browser and slow
# (pyproject.toml). CI runs `make test`, every tier.
test-fast: setup
	$(call run_pytest,-m "not ros and not browser and not slow" $(PYTEST_ARGS))

run: setup
	EROBS_VENV="$(abspath $(VENV))" $(ENV) $(VENV)/bin/erobs-bt run "$(SCRIPT)" --poses "$(POSES)" $(RUN_ARGS)

lint: setup
	$(VENV)/bin/ruff check $(LINT_PATHS)
	$(VENV)/bin/ruff format --check $(LINT_PATHS)
	@# mypy reads Kilted's rclpy (9.x) annotations: Jazzy's rclpy 7 classes are not Generic and
	@# type some events loosely, so the types are checked against the fuller stubs, in .venv-kilted.
	@EROBS_ROS_DISTRO=kilted EROBS_VENV="$(abspath .venv-kilted)" scripts/setup.sh >/dev/null
	.venv-kilted/bin/mypy erobs_bt
	$(VENV)/bin/lint-imports --no-logo
	$(VENV)/bin/python scripts/class_sizes.py erobs_bt

bench: setup
	@if [ -f bench/run_all.py ]; then \
		EROBS_VENV="$(abspath $(VENV))" $(ENV) $(VENV)/bin/python bench/run_all.py; \
	else \
		echo "make bench: bench/run_all.py not found; nothing to run"; \
	fi

clean:
	rm -rf interfaces/*/build build *.egg-info .pytest_cache .mypy_cache .ruff_cache .hypothesis .import_linter_cache
	find erobs_bt test bench -name __pycache__ -type d -prune -exec rm -rf {} +

distclean: clean
	rm -rf .venv .venv-*/
