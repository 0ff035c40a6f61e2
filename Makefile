# engram: `make run` starts the embedded stack, `make test` runs every test. Both install what is missing first.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed-stamp

.PHONY: run test lint bench eval clean

# Reinstall only when pyproject.toml changed since the last install (or the venv is missing).
$(STAMP): pyproject.toml
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --disable-pip-version-check --upgrade pip
	$(BIN)/python -m pip install --quiet --disable-pip-version-check -e '.[dev]'
	@touch $(STAMP)

run: $(STAMP)
	$(BIN)/engram up

test: $(STAMP) lint
	$(BIN)/python -m pytest -q -ra

lint: $(STAMP)
	$(BIN)/ruff check shared services tests bench
	$(BIN)/mypy

bench: $(STAMP)
	$(BIN)/python -m bench --out bench-out

eval: $(STAMP)
	$(BIN)/engram eval locomo --out eval-out

clean:
	rm -rf $(VENV) data .pytest_cache .mypy_cache .ruff_cache
