"""A tiny Engine for the evaluation tests: a random Llama with two random LoRA adapters,
'magnet' (hybrid, last-token sentences) and 'llm2vec' (bidirectional, mean pooling)."""

from __future__ import annotations

import torch
from peft import LoraConfig, get_peft_model
from tiny_models import make_tiny_llama, make_tiny_tokenizer

from magnet_model.adapter_meta import AdapterMeta
from magnet_model.engine import Engine
from magnet_model.loading import LoadedModel
from magnet_model.settings import ModelSpec
from magnet_model.tokens import choose_token_roles

TARGETS = ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]


def _lora(seed: int) -> LoraConfig:
    torch.manual_seed(seed)
    return LoraConfig(r=4, lora_alpha=16, target_modules=TARGETS, init_lora_weights=False)


def tiny_engine(adapters: bool = True, max_positions: int = 1024) -> Engine:
    """Room for five-shot prompts (max_positions); larger initial weights so outputs vary."""
    tok = make_tiny_tokenizer()
    model = make_tiny_llama(len(tok), initializer_range=0.5, max_position_embeddings=max_positions)
    metas = {}
    if adapters:
        model = get_peft_model(model, _lora(1), adapter_name="magnet")
        model.add_adapter("llm2vec", _lora(2))
        model.eval()
        roles = choose_token_roles(tok)
        metas = {
            "magnet": AdapterMeta(token_roles=roles),
            "llm2vec": AdapterMeta(
                token_roles=roles,
                attention="bidirectional",
                objectives=["mntp", "sscl"],
                pooling="mean",
                instruction="",
            ),
        }
    cpu = torch.device("cpu")
    loaded = LoadedModel(model, tok, ModelSpec(), cpu, torch.float32, "test", 0.0, {})
    return Engine(loaded, metas=metas)
