"""Shared fixtures: a tiny randomly initialised Llama and a small tokenizer built in code.

The builders live in tiny_models.py (import them from there, not from conftest: pytest loads
several conftest modules under the same name).
"""

from __future__ import annotations

import os

import pytest
import torch
from tiny_models import make_tiny_llama, make_tiny_tokenizer, tiny_engine

# `make test` runs the suite in pytest-xdist workers (one per core): each worker's torch gets
# its share of the cores, so that two workers' threads do not spin-wait for each other
WORKERS = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))


def pytest_configure(config):
    if WORKERS > 1:
        torch.set_num_threads(max(1, (os.cpu_count() or 1) // WORKERS))


@pytest.fixture
def tiny_tokenizer():
    return make_tiny_tokenizer()


@pytest.fixture
def tiny_llama(tiny_tokenizer):
    return make_tiny_llama(len(tiny_tokenizer))


@pytest.fixture
def tiny_dir(tmp_path, tiny_llama, tiny_tokenizer):
    """The tiny Llama and its tokenizer saved as a local model directory."""
    path = tmp_path / "tiny"
    tiny_llama.save_pretrained(path)
    tiny_tokenizer.save_pretrained(path)
    return path


@pytest.fixture(scope="module")
def engine():
    """An Engine over the tiny Llama with its 'magnet' and 'llm2vec' adapters, one per module."""
    return tiny_engine()


@pytest.fixture
def app(engine, tmp_path):
    """A MagnetApp over `engine` with a store and cache of its own (app_fixtures.make_app)."""
    from app_fixtures import make_app  # here, not at the top: gradio loads for app tests only

    return make_app(tmp_path, engine)


@pytest.fixture(autouse=True)
def single_torch_thread(request):
    """Unit tests on tiny models run torch on one thread; `integration` tests keep them all.

    Tiny matmuls gain nothing from threads, and on a shared 2-core machine OpenMP threads
    that spin-wait for each other made these tests about 10x slower (161 s against 15 s).
    """
    if request.node.get_closest_marker("integration"):
        yield
        return
    saved = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(saved)
