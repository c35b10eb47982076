# Hugging Face Docker Space (sdk: docker, app_port: 7860). Same set-up as the README:
# `make setup` builds .venv, `make prepare` warms the model cache, `make run` serves.
FROM python:3.11-slim

RUN apt-get update \
    && apt-get install -y --no-install-recommends make git \
    && rm -rf /var/lib/apt/lists/*

# Spaces run the container as UID 1000.
RUN useradd -m -u 1000 user
USER user
ENV HOME=/home/user \
    GRADIO_SERVER_NAME=0.0.0.0 \
    GRADIO_SERVER_PORT=7860 \
    PYTHONUNBUFFERED=1
WORKDIR /home/user/app

COPY --chown=user requirements.txt requirements-assets.txt Makefile ./
RUN make setup PYTHON=python3
COPY --chown=user . .
# De-quantize the embedded model at build time so the Space starts in seconds.
RUN make prepare

EXPOSE 7860
CMD ["make", "run"]
