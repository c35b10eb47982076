# Hugging Face Docker Space (sdk: docker, app_port: 7860; CPU basic, or a dedicated GPU).
# Two stages. `build` makes the venv with the runtime dependencies only (`make deps DEV=`: no
# pytest, ruff, playwright or hypothesis) and bakes the model cache (`make prepare DEV=`).
# `runtime`, the image that runs, copies the app folder with its venv and the cache from it and
# serves `python -m app` (what `make run` runs), without make, git or the test tools.
# ZeroGPU cannot run a Docker Space: see deploy/zerogpu/ for that recipe.

# What both stages share: the user, its folders and the Space's environment.
FROM python:3.11-slim AS base

# Spaces run the container as UID 1000. The app folder is made and handed to that user here,
# as root: a WORKDIR that has to create it would make it root's on some builders.
RUN useradd -m -u 1000 user \
    && install -d -o user -g user /home/user/app /home/user/.cache
# A Space's page on huggingface.co shows the app in a frame; no other site may. Only the
# Space's proxy reaches the container, from a private address (app.settings.SPACE_PROXIES).
ENV HOME=/home/user \
    GRADIO_SERVER_NAME=0.0.0.0 \
    GRADIO_SERVER_PORT=7860 \
    MAGNET_FRAME_ANCESTORS=https://huggingface.co \
    MAGNET_TRUSTED_PROXIES=10.0.0.0/8,172.16.0.0/12,192.168.0.0/16,fc00::/7 \
    PIP_NO_CACHE_DIR=1 \
    PYTHONUNBUFFERED=1
WORKDIR /home/user/app

FROM base AS build

# Where torch comes from. The default, PyTorch's CPU wheel index, gives the CPU build (no CUDA
# libraries, several GB lighter). For a GPU Docker Space set the Space variable
# TORCH_INDEX_URL=https://pypi.org/simple (Spaces pass variables as build arguments): PyPI's
# build of the same release, with CUDA.
ARG TORCH_INDEX_URL=https://download.pytorch.org/whl/cpu

RUN apt-get update \
    && apt-get install -y --no-install-recommends make git \
    && rm -rf /var/lib/apt/lists/*
USER user

COPY --chown=user requirements.txt requirements-assets.txt Makefile ./
# torch first, at the release requirements.txt pins, from TORCH_INDEX_URL; `make deps` then
# finds it installed (2.13.0+cpu satisfies torch==2.13.0) and adds everything else from PyPI.
RUN python3 -m venv .venv \
    && .venv/bin/pip install --index-url "$TORCH_INDEX_URL" \
        "$(grep -E '^torch==' requirements.txt | cut -d' ' -f1)" \
    && make deps PYTHON=python3 DEV=
COPY --chown=user . .
# De-quantize the embedded model at build time so the Space starts in seconds (`make prepare`
# first installs the project itself, editable, now that its code is here).
RUN make prepare DEV=

FROM base AS runtime
USER user
# The same paths as in `build`: the venv's scripts and the editable install point at them.
COPY --from=build --chown=user /home/user/app /home/user/app
COPY --from=build --chown=user /home/user/.cache /home/user/.cache

EXPOSE 7860
CMD [".venv/bin/python", "-m", "app"]
