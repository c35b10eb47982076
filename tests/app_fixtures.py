"""Builders shared by the app tests: a tiny Llama with 'magnet' and 'llm2vec' LoRA adapters,
and a MagnetApp over it with a temporary annotation store and cache."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import torch
from peft import LoraConfig, get_peft_model
from tiny_models import make_tiny_llama, make_tiny_tokenizer

from annotation_db import AnnotationStore
from app.handlers import MagnetApp
from app.settings import AppSettings
from magnet_model.adapter_meta import AdapterMeta
from magnet_model.engine import Engine
from magnet_model.loading import LoadedModel
from magnet_model.settings import ModelSpec
from magnet_model.tokens import choose_token_roles

TARGETS = ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]


def _lora(seed: int) -> LoraConfig:
    torch.manual_seed(seed)
    return LoraConfig(r=4, lora_alpha=16, target_modules=TARGETS, init_lora_weights=False)


def tiny_engine(adapters: bool = True) -> Engine:
    """Positions up to 1024: the five-shot prompt of the baseline fits."""
    tok = make_tiny_tokenizer()
    model = make_tiny_llama(len(tok), initializer_range=0.5, max_position_embeddings=1024)
    metas = {}
    if adapters:
        model = get_peft_model(model, _lora(1), adapter_name="magnet")
        model.add_adapter("llm2vec", _lora(2))
        model.eval()
        roles = choose_token_roles(tok)
        metas = {
            "magnet": AdapterMeta(token_roles=roles),
            "llm2vec": AdapterMeta(
                token_roles=roles, attention="bidirectional", pooling="mean", instruction=""
            ),
        }
    # An existing folder without magnet_config.json: the engine takes `metas` and never asks
    # the Hub (a missing path is looked up there, with retries, when offline).
    here = str(Path(__file__).parent)
    names = {"magnet": here, "llm2vec": here} if adapters else {}
    cpu = torch.device("cpu")
    loaded = LoadedModel(model, tok, ModelSpec(), cpu, torch.float32, "tiny", 0.0, names)
    return Engine(loaded, metas=metas)


def make_app(tmp: Path, engine: Engine, **settings) -> MagnetApp:
    defaults = {"admin_password": "s3cret", "max_input_tokens": 128, "max_span_tokens": 8}
    defaults.update(settings)
    store = AnnotationStore(path=tmp / "db.sqlite3")
    return MagnetApp(engine, store, AppSettings(**defaults), tmp / "cache")


def fake_request(**query) -> SimpleNamespace:
    """What handlers read from gr.Request: query params, headers, the session hash."""
    return SimpleNamespace(
        query_params=query, headers={"host": "demo.test:7860"}, session_hash="visitor-1"
    )
