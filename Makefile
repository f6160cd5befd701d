# Two commands from a fresh machine: `make demo` and `make test`.
PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed

.PHONY: demo test test-slow fuzz bench install clean

$(PY):
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip

$(STAMP): pyproject.toml | $(PY)
	$(PY) -m pip install -q -e ".[test]"
	touch $(STAMP)

install: $(STAMP)

demo: $(STAMP)
	$(VENV)/bin/lumber demo

test: $(STAMP)
	$(PY) -m pytest -q -n 2 -m "not slow"

test-slow: $(STAMP)
	$(PY) -m pytest -q -m slow

# Property tests with fresh random examples (300 each): finds what the fixed CI examples miss.
fuzz: $(STAMP)
	HYPOTHESIS_PROFILE=thorough $(PY) -m pytest -q -n 2 -m "not slow" tests

# The peers pin llvmlite < 0.45 (lleaves), which shap's numba in the test extra cannot use: a venv of their own.
BENCH_VENV ?= .venv-bench

bench:
	test -x $(BENCH_VENV)/bin/python || $(PYTHON) -m venv $(BENCH_VENV)
	$(BENCH_VENV)/bin/python -m pip install -q -e ".[bench,scale]"
	$(BENCH_VENV)/bin/python bench/run_all.py    # every bench script, quick mode (--full for the full sizes)

clean:
	rm -rf $(VENV) $(BENCH_VENV) build *.egg-info .pytest_cache
