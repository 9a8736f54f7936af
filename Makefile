# kafkalog — every target sets up .venv itself, so a fresh checkout needs nothing else.
PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed-$(shell cat pyproject.toml | cksum | cut -d' ' -f1)
PYTEST_ARGS ?=
LINT_DIRS := src tests $(wildcard bench)

.PHONY: all venv test lint typecheck unit demo bench bench-quick clean numba-cache

all: test

$(PY):
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip

$(STAMP): $(PY) pyproject.toml
	$(PY) -m pip install -q -e '.[test,spark,connect,bench,metrics,server]'
	rm -f $(VENV)/.installed-*
	touch $(STAMP)

venv: $(STAMP)

# Numba checks a cached kernel against its own source file only; kernels that compile in the parsers of
# records/_kernels.py (_kernels_index, _kernels_columnar, log/cleaner_kernels) would keep stale machine code
# after an edit there. Any cache older than _kernels.py or _intrinsics.py is dropped (all of them: recompiled on use).
KERNEL_SOURCES := src/kafkalog/records/_kernels.py src/kafkalog/records/_intrinsics.py
numba-cache:
	@for f in $(KERNEL_SOURCES); do \
	  if [ -n "$$(find src -name '*.nbi' ! -newer $$f -print -quit)" ]; then \
	    echo "numba caches older than $$f: removed"; find src -name '*.nb[ic]' -delete; break; \
	  fi; \
	done

lint: $(STAMP)
	$(VENV)/bin/ruff check $(LINT_DIRS)
	$(VENV)/bin/ruff format --check $(LINT_DIRS)

typecheck: $(STAMP)
	$(VENV)/bin/mypy

unit: $(STAMP) numba-cache
	$(PY) -m pytest $(PYTEST_ARGS)

test: lint typecheck unit

demo: $(STAMP) numba-cache
	$(PY) -m kafkalog.demo

bench: $(STAMP) numba-cache
	$(PY) -m bench

bench-quick: $(STAMP) numba-cache
	$(PY) -m bench --quick

clean:
	rm -rf $(VENV) build dist .pytest_cache .mypy_cache .ruff_cache
