# Two commands do all set-up on a fresh machine: `make demo` (SGD vs ATMC on
# digits) and `make test`.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: demo test test-slow test-all bench fashion-mnist clean

$(STAMP): pyproject.toml constraints.txt
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --upgrade pip
	$(PY) -m pip install -e ".[test]" -c constraints.txt
	touch $(STAMP)

demo: $(STAMP)
	$(PY) -m keras_bnn.cli demo --output-dir runs/demo --export-dir saved_models/demo

# Two pytest worker processes (pytest-xdist): most of a test's time is one Python
# thread tracing and compiling, so two share two cores well.
PYTEST_WORKERS ?= 2

# Default suite: everything not marked slow (target: < 20 min on 2 cores).
test: $(STAMP)
	$(PY) -m pytest -m "not slow" -n $(PYTEST_WORKERS) --durations=15

# Long statistical and multi-process tests.
test-slow: $(STAMP)
	$(PY) -m pytest -m slow --durations=15

test-all: $(STAMP)
	$(PY) -m pytest

bench: $(STAMP)
	$(PY) benchmarks/sampler_overhead.py

# README "Fashion-MNIST", main row: one ATMC chain on the MLP, seeds 0 and 1, as in the
# scaled-down comparison (12 epochs, 4 of burn-in, h0 = 5e-4 chosen on a validation split)
# (needs the files: `apt-get install dataset-fashion-mnist`).
fashion-mnist: $(STAMP)
	$(PY) examples/fashion_mnist.py compare --out runs/fashion_mnist --rows "atmc 1 chain" \
		--chain-epochs 12 --chain-burn-in-epochs 4 --step-size 5e-4 --seeds 0 1
	$(PY) examples/fashion_mnist.py table --out runs/fashion_mnist

clean:
	rm -rf $(VENV) build *.egg-info .pytest_cache
