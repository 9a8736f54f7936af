# kafkalog — every target sets up .venv itself, so a fresh checkout needs nothing else.
PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed-$(shell cat pyproject.toml | cksum | cut -d' ' -f1)
PYTEST_ARGS ?=
LINT_DIRS := src tests $(wildcard bench)

.PHONY: all venv test lint typecheck unit demo bench bench-quick clean

all: test

$(PY):
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip

$(STAMP): $(PY) pyproject.toml
	$(PY) -m pip install -q -e '.[test,spark,bench,metrics,server]'
	rm -f $(VENV)/.installed-*
	touch $(STAMP)

venv: $(STAMP)

lint: $(STAMP)
	$(VENV)/bin/ruff check $(LINT_DIRS)
	$(VENV)/bin/ruff format --check $(LINT_DIRS)

typecheck: $(STAMP)
	$(VENV)/bin/mypy

unit: $(STAMP)
	$(PY) -m pytest $(PYTEST_ARGS)

test: lint typecheck unit

demo: $(STAMP)
	$(PY) -m kafkalog.demo

bench: $(STAMP)
	$(PY) -m bench

bench-quick: $(STAMP)
	$(PY) -m bench --quick

clean:
	rm -rf $(VENV) build dist .pytest_cache .mypy_cache .ruff_cache
