"""An autouse fixture for unit tests on tiny models: run torch on one thread.

Tiny matmuls gain nothing from threads, and on a shared 2-core machine OpenMP threads that
spin-wait for each other made these tests ~10x slower (161 s vs 15 s). Import it into a test
module to apply it there; tests marked `integration` (the real model) keep every thread.
"""

from __future__ import annotations

import pytest
import torch


@pytest.fixture(autouse=True)
def single_torch_thread(request):
    if request.node.get_closest_marker("integration"):
        yield
        return
    saved = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(saved)
