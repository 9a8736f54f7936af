# kafkalog — every target sets up .venv itself, so a fresh checkout needs nothing else.
PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed-$(shell cat pyproject.toml | cksum | cut -d' ' -f1)
PYTEST_ARGS ?=
LINT_DIRS := src tests $(wildcard bench) hatch_build.py

.PHONY: all venv test test-deps lint typecheck unit pythons wheel-smoke demo bench bench-quick clean numba-cache readme-layout

all: test

$(PY):
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip

$(STAMP): $(PY) pyproject.toml
	$(PY) -m pip install -q -e '.[test,spark,connect,bench,metrics,server,cloud]'
	rm -f $(VENV)/.installed-*
	touch $(STAMP)

venv: $(STAMP)

# Numba checks a cached kernel against its own source file only; kernels that compile in the parsers of
# records/_kernels.py (_kernels_index, _kernels_columnar, cleaner/kernels) would keep stale machine code
# after an edit there. Any cache older than _kernels.py or _intrinsics.py is dropped (all of them: recompiled on use)
# from this install's cache directory (`python -m kafkalog.jit` names it: NUMBA_CACHE_DIR, else a per-user
# directory outside the package, see src/kafkalog/jit.py). Caches older kafkalog versions wrote under src/
# are dropped too (numba no longer reads them).
KERNEL_SOURCES := src/kafkalog/records/_kernels.py src/kafkalog/records/_intrinsics.py
numba-cache: $(STAMP)
	@find src -name '*.nb[ic]' -delete
	@dir="$$($(PY) -m kafkalog.jit 2>/dev/null)"; \
	if [ -n "$$dir" ] && [ -d "$$dir" ]; then \
	  for f in $(KERNEL_SOURCES); do \
	    if [ -n "$$(find "$$dir" -name '*.nbi' ! -newer $$f -print -quit)" ]; then \
	      echo "numba caches older than $$f: removed from $$dir"; find "$$dir" -name '*.nb[ic]' -delete; break; \
	    fi; \
	  done; \
	fi

# lint-imports: pyproject's [tool.importlinter] contracts (the layers point down only; no import cycle inside a
# package, TYPE_CHECKING imports aside). Its report lists every contract, kept or broken.
lint: $(STAMP)
	$(VENV)/bin/ruff check $(LINT_DIRS)
	$(VENV)/bin/ruff format --check $(LINT_DIRS)
	$(VENV)/bin/lint-imports

typecheck: $(STAMP)
	$(VENV)/bin/mypy

# What the client tests need besides the Python extras: kafkajs 2 for the Node.js client test, installed with npm
# into the directory tests/server/test_more_clients.py reads (never from inside a test). Without npm the kafkajs
# test skips, which `.ci/run` (KAFKALOG_REQUIRE_ALL=1) turns into a failure.
KAFKAJS_DIR := .interop-build/node/kafkajs-2
test-deps:
	@if [ -f $(KAFKAJS_DIR)/node_modules/kafkajs/package.json ]; then :; \
	elif command -v npm >/dev/null 2>&1; then \
	  npm install --prefix $(KAFKAJS_DIR) --no-audit --no-fund --loglevel=error kafkajs@2 \
	    || echo "npm install kafkajs@2 failed: the kafkajs test will skip"; \
	else echo "npm is not on PATH: the kafkajs test will skip"; fi

unit: $(STAMP) numba-cache test-deps
	$(PY) -m pytest $(PYTEST_ARGS)

# Other CPythons (3.11 is .venv's): each one on PATH gets its own venv (.venv-py3.N, kafkalog installed from
# this tree, not editable) and runs a representative part of the suite; one that is absent is skipped with
# the reason. pyproject's classifiers list only the versions this has actually run on.
PY_VERSIONS ?= 3.12 3.13
PY_SMOKE_TESTS ?= tests/records/test_batch.py tests/records/test_columnar.py tests/storage/test_segment_smoke.py \
  tests/log/test_log_smoke.py tests/test_partitioner.py tests/cli/test_produce_consume.py
# The Kafka jars (for the partitioner's interop check) come from .venv's shigawire-apache-flink-libraries.
pythons: $(STAMP)
	@for v in $(PY_VERSIONS); do \
	  py=; for c in python$$v $${PYENV_ROOT:-$$HOME/.pyenv}/versions/$$v.*/bin/python$$v; do \
	    if "$$c" -c 'import sys' >/dev/null 2>&1; then py=$$c; break; fi; \
	  done; \
	  if [ -z "$$py" ]; then \
	    echo "pythons: CPython $$v SKIPPED: no working python$$v on PATH or under pyenv (install it to test $$v)"; \
	    continue; \
	  fi; \
	  venv=$(CURDIR)/.venv-py$$v; \
	  [ -x $$venv/bin/python ] || "$$py" -m venv $$venv || exit 1; \
	  $$venv/bin/python -m pip install -q --upgrade pip && \
	  $$venv/bin/python -m pip install -q --force-reinstall --no-deps . && \
	  $$venv/bin/python -m pip install -q '.[arrow]' pytest pytest-timeout hypothesis kafka-python || exit 1; \
	  echo "pythons: CPython $$v: $$($$venv/bin/python -c 'import sys; print(sys.version.split()[0])')"; \
	  (cd tests && KAFKALOG_INTEROP_JAR_DIR="$$(ls -d $(CURDIR)/$(VENV)/lib/python3*/site-packages/pyflink/lib | head -1)" \
	    $$venv/bin/python -m pytest -q -p no:cacheprovider --rootdir=$(CURDIR) \
	    -c $(CURDIR)/pyproject.toml $(addprefix $(CURDIR)/,$(PY_SMOKE_TESTS))) || exit 1; \
	done

# The wheel as a user installs it: built from this tree, installed non-editable into .venv-wheel, then
# tests/smoke/wheel_smoke.py runs the README's command lines and a Spark read with that venv not activated.
WHEEL_DIR := build/wheel
wheel-smoke: $(STAMP)
	rm -rf $(WHEEL_DIR)
	$(PY) -m pip wheel -q --no-deps -w $(WHEEL_DIR) .
	[ -x .venv-wheel/bin/python ] || $(PYTHON) -m venv .venv-wheel
	.venv-wheel/bin/python -m pip install -q --force-reinstall --no-deps $(WHEEL_DIR)/kafkalog-*.whl
	.venv-wheel/bin/python -m pip install -q "$$(ls $(WHEEL_DIR)/kafkalog-*.whl)[spark,server,cloud]"
	env -u VIRTUAL_ENV -u PYSPARK_PYTHON -u PYSPARK_DRIVER_PYTHON PATH="$$(echo "$$PATH" | tr ':' '\n' | \
	  grep -v '/\.venv' | paste -sd: -)" .venv-wheel/bin/python tests/smoke/wheel_smoke.py README.md

test: lint typecheck unit pythons wheel-smoke

demo: $(STAMP) numba-cache
	$(PY) -m kafkalog.demo

readme-layout: $(STAMP)  # the README's "What a data directory looks like" picture, from a directory it writes
	$(PY) -m kafkalog.cli.layout

bench: $(STAMP) numba-cache
	$(PY) -m bench

bench-quick: $(STAMP) numba-cache
	$(PY) -m bench --quick

clean:
	rm -rf $(VENV) build dist .pytest_cache .mypy_cache .ruff_cache
