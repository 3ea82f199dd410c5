# kvplan — two commands on a fresh machine: `make demo` and `make test`.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin

.PHONY: install demo test lint bench fuzz schema wheel-check clean

$(BIN)/kvplan: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e '.[dev]'
	touch $(BIN)/kvplan

install: $(BIN)/kvplan

demo: install
	@bash examples/demo.sh $(BIN)/kvplan

test: install
	$(BIN)/python -m pytest

lint: install
	$(BIN)/ruff check kvplan tests
	$(BIN)/mypy kvplan

bench: install
	$(BIN)/python bench/bench.py

fuzz: install
	KVPLAN_FUZZ_EXAMPLES=10000 $(BIN)/python -m pytest tests/test_fuzz.py -q

schema: install
	$(BIN)/python -m kvplan.analysis.plan > docs/plan.schema.json
	$(BIN)/python -m kvplan.pipeline.fit_result > docs/fit.schema.json

# the wheel in a fresh virtualenv (not editable): CLI, `python -m kvplan`, package data, API
wheel-check: install
	PYTHON=$(BIN)/python bash .ci/wheel-check

clean:
	rm -rf $(VENV) build *.egg-info .pytest_cache .hypothesis
