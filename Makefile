# Two commands a newcomer needs: `make run` (install + API on :4102) and `make test`.
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

.PHONY: run test fuzz lint install clean bench

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[dev]'
	touch $(STAMP)

install: $(STAMP)

run: $(STAMP)
	$(BIN)/agtos serve

test: $(STAMP)
	$(BIN)/python -m pytest -q

# the property tests (state machines, API fuzzing) under the long, random Hypothesis profile
fuzz: $(STAMP)
	HYPOTHESIS_PROFILE=fuzz $(BIN)/python -m pytest -q tests/test_isolation_properties.py tests/test_api_fuzz.py

lint: $(STAMP)
	$(BIN)/ruff check agtos tests benchmarks
	$(BIN)/ruff format --check agtos tests benchmarks

# Every benchmark, then the README's figures rewritten from benchmarks/results/ (stamped with date,
# commit and load). The default size runs in about 10 minutes on 2 cores; BENCH_SIZES=10000,100000 for 100k.
BENCH_SIZES ?= 10000
bench: $(STAMP)
	$(BIN)/python -m benchmarks.suite --sizes $(BENCH_SIZES) --update-readme

clean:
	rm -rf $(VENV)
