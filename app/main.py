"""`python -m app`: load the model once, serve the Gradio UI on http://127.0.0.1:7860.

At this stage the page answers continuation requests with the base model and every loaded
adapter; the infill, search and rating tabs come with the app issue.
"""

from __future__ import annotations

import argparse
import functools
import logging
import os
import sys
from collections.abc import Iterator

import gradio as gr

from magnet_model.engine import Engine
from magnet_model.errors import MagnetError
from magnet_model.settings import ModelSpec, add_model_args

log = logging.getLogger("app")

MAX_PROMPT_CHARS = 4000
EXAMPLES = [
    "The capital of France is",
    "Photosynthesis is the process by which plants",
    "In 1969, the first humans to walk on the Moon",
]


def continue_handler(
    engine: Engine, prompt: str, adapter: str, max_new_tokens: float
) -> Iterator[str]:
    """Stream a continuation; errors reach the visitor as one readable sentence."""
    prompt = (prompt or "").strip()
    if not prompt:
        raise gr.Error("Type a prompt to continue.")
    if len(prompt) > MAX_PROMPT_CHARS:
        raise gr.Error(f"The prompt is too long: at most {MAX_PROMPT_CHARS} characters.")
    text = ""
    name = None if adapter == "base" else adapter
    try:
        for piece in engine.continue_text(prompt, adapter=name, max_new_tokens=int(max_new_tokens)):
            text += piece
            yield text
    except MagnetError as e:
        raise gr.Error(str(e)) from None


def build_demo(engine: Engine) -> gr.Blocks:
    adapters = ["base", *engine.adapter_names]
    with gr.Blocks(title="MAGNET") as demo:
        gr.Markdown(
            "# MAGNET\nOne decoder LLM for infilling, continuation and embeddings. "
            f"Base model: {engine.loaded.source}."
        )
        with gr.Tab("Continue"):
            prompt = gr.Textbox(label="Prompt", lines=3, max_length=MAX_PROMPT_CHARS)
            with gr.Row():
                adapter = gr.Dropdown(adapters, value=adapters[-1], label="Model")
                max_tokens = gr.Slider(1, 256, value=64, step=1, label="Max new tokens")
            button = gr.Button("Continue", variant="primary")
            output = gr.Textbox(label="Continuation", lines=6, interactive=False)
            gr.Examples(EXAMPLES, inputs=prompt)
        button.click(
            functools.partial(continue_handler, engine),
            inputs=[prompt, adapter, max_tokens],
            outputs=output,
            api_name="continue",
        )
    demo.queue(default_concurrency_limit=1, max_size=32)
    return demo


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Serve the MAGNET demo.")
    add_model_args(parser)
    parser.add_argument("--host", default=os.environ.get("GRADIO_SERVER_NAME", "127.0.0.1"))
    parser.add_argument(
        "--port", type=int, default=int(os.environ.get("GRADIO_SERVER_PORT", "7860"))
    )
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s: %(message)s")
    try:
        engine = Engine.from_spec(ModelSpec.from_args(args))
    except MagnetError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    log.info("Serving %s with adapters %s", engine.loaded.source, engine.adapter_names or "none")
    build_demo(engine).launch(server_name=args.host, server_port=args.port)
    return 0
