# Two commands do all set-up on a fresh machine: `make demo` (SGD vs ATMC on
# digits) and `make test`.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: demo test test-slow test-all bench clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --upgrade pip
	$(PY) -m pip install -e ".[test]"
	touch $(STAMP)

demo: $(STAMP)
	$(PY) -m keras_bnn.cli demo --output-dir runs/demo --export-dir saved_models/demo

# Default suite: everything not marked slow (target: < 20 min on 2 cores).
test: $(STAMP)
	$(PY) -m pytest -m "not slow"

# Long statistical and multi-process tests.
test-slow: $(STAMP)
	$(PY) -m pytest -m slow

test-all: $(STAMP)
	$(PY) -m pytest

bench: $(STAMP)
	$(PY) benchmarks/sampler_overhead.py

clean:
	rm -rf $(VENV) build *.egg-info .pytest_cache
