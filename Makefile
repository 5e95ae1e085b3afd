# Two commands a newcomer needs: `make run` (install + API on :4102) and `make test`.
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
# EXTRAS=dev,transformers adds the optional in-process models (CPU torch, ~1 GB); `make run` never pulls them
EXTRAS ?= dev

.PHONY: run test fuzz lint install clean mutation mutation-sample mutation-estimate bench

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[$(EXTRAS)]'
	touch $(STAMP)

install: $(STAMP)

run: $(STAMP)
	$(BIN)/agtos serve

# the suite on every core, at most 4 workers (TEST_WORKERS=0: one process); a file's tests stay in one
# worker, so its module fixtures (servers, Prefect workers) start once
TEST_WORKERS ?= auto
test: $(STAMP)
	$(BIN)/python -m pytest -q -n $(TEST_WORKERS) --maxprocesses 4 --dist loadfile

# the property tests (state machines, API fuzzing) under the long, random Hypothesis profile
fuzz: $(STAMP)
	HYPOTHESIS_PROFILE=fuzz $(BIN)/python -m pytest -q tests/test_isolation_properties.py tests/test_api_fuzz.py

lint: $(STAMP)
	$(BIN)/ruff check agtos tests benchmarks tools
	$(BIN)/ruff format --check agtos tests benchmarks tools
	$(BIN)/mypy  # agtos/, configured by [tool.mypy] in pyproject.toml
	$(BIN)/lint-imports  # the layer contract of [tool.importlinter] in pyproject.toml

# Mutation score of the core modules (docs/testing.md): mutmut 3 over [tool.mutmut] in pyproject.toml,
# results kept in mutants/ (a rerun only retests changed functions); fails below 85 % in any module.
MUTATION_JOBS ?= 2
mutation: $(STAMP)
	$(BIN)/mutmut run --max-children $(MUTATION_JOBS)
	$(BIN)/python tools/mutation_report.py --survivors

# The CI check: a seeded random sample of the core's mutants, time-boxed to 5 minutes.
mutation-sample: $(STAMP)
	$(BIN)/python tools/mutation_sample.py --max-children $(MUTATION_JOBS)

# An estimate of the whole core at one commit: 30 mutants of every core module (seeded), all run (no time
# box; about 30 minutes on 2 cores), each module's score with a 95 % Wilson lower bound (docs/testing.md).
mutation-estimate: $(STAMP)
	$(BIN)/python tools/mutation_sample.py --per-module 30 --seed 1205 --time-box 0 --max-children $(MUTATION_JOBS)

# Every benchmark, then the README's figures rewritten from benchmarks/results/ (stamped with date,
# commit and load). The default size runs in about 10 minutes on 2 cores; BENCH_SIZES=10000,100000 for 100k.
BENCH_SIZES ?= 10000
bench: $(STAMP)
	$(BIN)/python -m benchmarks.suite --sizes $(BENCH_SIZES) --update-readme

clean:
	rm -rf $(VENV)
