# `make run`: set up and start the registry on port 4000. `make test`: set up and run every test.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
TEST_STAMP := $(VENV)/.installed-test

.PHONY: run test test-postgres test-deps setup migrate static clean bench soak lint docs

# Tests start hundreds of Python processes (gunicorn workers, manage.py, clients, pytest's own):
# let them write bytecode caches (__pycache__, ignored by git) and reuse them instead of compiling
# every module again, which an environment with PYTHONDONTWRITEBYTECODE set would make them do.
unexport PYTHONDONTWRITEBYTECODE

# A virtualenv whose pip does not run (a first `make run` interrupted, python3-venv missing when it
# was made, the system Python replaced under it) is made again, rather than failing on .venv/bin/pip.
ifneq ($(shell $(BIN)/python -m pip --version >/dev/null 2>&1 && echo ok),ok)
$(shell rm -f $(STAMP) $(TEST_STAMP))
endif

# `make run` installs what the registry runs on; the test extras (pytest, clients, linters: several
# hundred MB) only when a target needs them.
$(STAMP): pyproject.toml
	@$(BIN)/python -m pip --version >/dev/null 2>&1 || { rm -rf $(VENV) && $(PYTHON) -m venv $(VENV); } \
	    || { rm -rf $(VENV); echo "make: '$(PYTHON) -m venv' failed: install python3-venv (apt-get install python3-venv)" >&2; exit 1; }
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e .
	touch $(STAMP)

$(TEST_STAMP): $(STAMP)
	$(BIN)/pip install --quiet -e '.[test]'
	touch $(TEST_STAMP)

setup: $(TEST_STAMP)

migrate: $(STAMP)
	$(BIN)/python manage.py migrate --noinput

static: $(STAMP)
	$(BIN)/python manage.py collectstatic --noinput --verbosity 0

run: migrate static
	exec $(BIN)/gunicorn -c gunicorn.conf.py

test-deps:
	scripts/install-test-deps.sh

# Lint and type checks (configured in pyproject.toml): ruff over everything, mypy with django-stubs
# over the product code. `make test` runs them first, so a type error fails in seconds.
lint: $(TEST_STAMP)
	$(BIN)/ruff check .
	$(BIN)/mypy

# The whole suite on SQLite (the default), then the unit tests again on PostgreSQL: the tests in
# pytest-xdist processes (TEST_WORKERS for SQLite, PG_TEST_WORKERS for PostgreSQL, both runs at
# once), then the timing-sensitive ones (marked serial) alone. scripts/run-tests.sh says how.
test: $(TEST_STAMP) lint test-deps static
	scripts/run-tests.sh

test-postgres: $(TEST_STAMP) test-deps static
	scripts/run-tests.sh postgres

# `make bench`: ours against the CNCF registry side by side (bench/README.md); BENCH_ARGS=--quick
# runs in under a minute.
BENCH_ARGS ?=
bench: $(TEST_STAMP) test-deps static
	$(BIN)/python -m bench $(BENCH_ARGS)

# `make soak`: the full 60 s soak (16 clients, zero errors, flat memory); `make test` runs 15 s of it.
soak: $(TEST_STAMP) test-deps static
	SOAK_SECONDS=60 $(BIN)/pytest -q -s tests/e2e/test_soak.py

# `make docs`: the documentation site (docs/, mkdocs.yml) into site/, strict: a broken link or an
# unclosed code fence fails the build (never --quiet: it hides the warnings strict mode counts).
docs: $(STAMP)
	$(BIN)/python -c 'import mkdocs' 2>/dev/null || $(BIN)/pip install --quiet -e '.[docs]'
	$(BIN)/mkdocs build --strict

clean:
	rm -rf $(VENV) staticfiles site .pytest_cache .mypy_cache .ruff_cache
