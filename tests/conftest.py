"""Shared fixtures: a tiny randomly initialised Llama and a small tokenizer built in code.

The builders live in tiny_models.py (import them from there, not from conftest: pytest loads
several conftest modules under the same name).
"""

from __future__ import annotations

import pytest
from tiny_models import make_tiny_llama, make_tiny_tokenizer


@pytest.fixture
def tiny_tokenizer():
    return make_tiny_tokenizer()


@pytest.fixture
def tiny_llama(tiny_tokenizer):
    return make_tiny_llama(len(tiny_tokenizer))
