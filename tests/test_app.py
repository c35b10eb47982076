"""Handler-level tests of the app: the functions Gradio calls, on a tiny Llama."""

import gradio as gr
import pytest
import torch

from app.main import build_demo, continue_handler
from magnet_model.engine import Engine
from magnet_model.loading import LoadedModel
from magnet_model.settings import ModelSpec


@pytest.fixture
def engine(tiny_llama, tiny_tokenizer):
    loaded = LoadedModel(
        tiny_llama, tiny_tokenizer, ModelSpec(), torch.device("cpu"), torch.float32, "tiny", 0.0
    )
    return Engine(loaded)


def test_continue_streams_growing_text_equal_to_engine_result(engine):
    pieces = list(continue_handler(engine, "the cat sat on the", "base", 6))
    assert pieces and all(b.startswith(a) for a, b in zip(pieces, pieces[1:], strict=False))
    expected = engine.generate("the cat sat on the", adapter=None, max_new_tokens=6).text
    assert pieces[-1] == expected


@pytest.mark.parametrize("prompt", ["", "   ", "x" * 5000])
def test_bad_prompts_are_readable_errors(engine, prompt):
    with pytest.raises(gr.Error):
        list(continue_handler(engine, prompt, "base", 4))


def test_unknown_model_is_a_readable_error(engine):
    with pytest.raises(gr.Error, match="nope"):
        list(continue_handler(engine, "the cat", "nope", 4))


def test_demo_builds(engine):
    assert isinstance(build_demo(engine), gr.Blocks)
