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

bench: $(STAMP)
	$(PY) -m pip install -q -e ".[test,bench,scale]"
	$(PY) bench/run_all.py    # every bench script, quick mode (--full for the full sizes)

clean:
	rm -rf $(VENV) build *.egg-info .pytest_cache
