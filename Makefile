# engram: `make run` starts the embedded stack, `make test` runs every test. Both install what is missing first.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed-stamp

# Debian packages the tests drive for real: Prometheus (and promtool) and docker-compose (validates the compose file
# without a Docker engine). Installed only when missing; root or sudo needed then.
SYSTEM_TOOLS := prometheus:prometheus promtool:prometheus docker-compose:docker-compose
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)

.PHONY: run test lint system-deps bench soak flood eval clean

# Reinstall only when pyproject.toml changed since the last install (or the venv is missing).
$(STAMP): pyproject.toml
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --disable-pip-version-check --upgrade pip
	$(BIN)/python -m pip install --quiet --disable-pip-version-check -e '.[dev]'
	@touch $(STAMP)

run: $(STAMP)
	$(BIN)/engram up

test: $(STAMP) lint system-deps
	$(BIN)/python -m pytest -q -ra

lint: $(STAMP)
	$(BIN)/ruff check shared services tests bench
	$(BIN)/mypy

system-deps:
	@missing=$$(for t in $(SYSTEM_TOOLS); do command -v $${t%%:*} >/dev/null || echo $${t#*:}; done | sort -u); \
	if [ -n "$$missing" ]; then \
	  echo "installing Debian packages: $$missing"; \
	  $(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends $$missing >/dev/null \
	  || { $(SUDO) apt-get update -q >/dev/null && \
	       $(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends $$missing >/dev/null; }; \
	fi

bench: $(STAMP)
	$(BIN)/python -m bench --out bench-out

# SOAK_ARGS, e.g. "--duration-s 3600 --kill-every-s 300 --restart-nats-every-s 900" (python -m bench.soak --help)
soak: $(STAMP)
	$(BIN)/python -m bench.soak --out bench-out/soak $(SOAK_ARGS)

flood: $(STAMP)
	$(BIN)/python -m bench.flood --out bench-out/flood

eval: $(STAMP)
	$(BIN)/engram eval locomo --out eval-out

clean:
	rm -rf $(VENV) data .pytest_cache .mypy_cache .ruff_cache
