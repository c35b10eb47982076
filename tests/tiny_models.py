"""A tiny randomly initialised Llama and a small tokenizer built in code (used by tests).

No download: the tokenizer is a word-level `tokenizers` model over a fixed vocabulary that
also holds the special tokens SmolLM2 has (so magnet_model.tokens picks the same roles).
"""

from __future__ import annotations

SPECIALS = [
    "<|endoftext|>",
    "<|im_start|>",
    "<|im_end|>",
    "<repo_name>",
    "<reponame>",
    "<file_sep>",
    "<filename>",
    "<gh_stars>",
    "<issue_start>",
    "<issue_comment>",
]
WORDS = (
    "the a an of to in and is was on for with as by at from it that this be are were "
    "cat dog bird fish sat ran flew swam mat log tree pond red blue green small big old "
    "house river city king queen man woman child day night sun moon star sky sea land "
    "first second third one two three four five six seven eight nine ten paris france "
    "capital music art science history war peace water fire earth air given sentence "
    "find its representation : . , ! ? ' \" ( ) -"
).split()


def make_tiny_tokenizer():
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    vocab = {tok: i for i, tok in enumerate(SPECIALS + ["[UNK]"] + WORDS)}
    tk = Tokenizer(models.WordLevel(vocab=vocab, unk_token="[UNK]"))
    tk.pre_tokenizer = pre_tokenizers.Sequence(
        [pre_tokenizers.WhitespaceSplit(), pre_tokenizers.Punctuation()]
    )
    from tokenizers import decoders

    tk.decoder = decoders.WordPiece(prefix="##")  # joins tokens with spaces
    tok = PreTrainedTokenizerFast(
        tokenizer_object=tk,
        bos_token="<|im_start|>",
        eos_token="<|im_end|>",
        unk_token="[UNK]",
        pad_token="<|im_end|>",
    )
    tok.add_special_tokens({"additional_special_tokens": SPECIALS[3:]})
    return tok


def make_tiny_llama(vocab_size: int, seed: int = 0, **overrides):
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(seed)
    cfg = dict(
        vocab_size=vocab_size,
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=256,
        tie_word_embeddings=True,
        attn_implementation="sdpa",
    )
    cfg.update(overrides)
    model = LlamaForCausalLM(LlamaConfig(**cfg))
    model.eval()
    return model


# Eight short sentences in the tiny vocabulary: a corpus the tiny model can learn in seconds.
TINY_CORPUS = [
    "the cat sat on the mat and the dog ran to the tree .",
    "the king of france was in paris on the first day of the war .",
    "a small bird flew over the river in the city at night .",
    "the queen and the child were at the old house by the sea .",
    "music and art are the history of the land , the sea and the sky .",
    "the big red fish swam in the blue pond with the green log .",
    "one two three four five six seven eight nine ten .",
    "the sun , the moon and the star were in the sky on the second day .",
]

LORA_TARGETS = ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]


def _lora(seed: int):
    import torch
    from peft import LoraConfig

    torch.manual_seed(seed)
    return LoraConfig(r=4, lora_alpha=16, target_modules=LORA_TARGETS, init_lora_weights=False)


def tiny_engine(adapters: bool = True, max_positions: int = 1024, packing: str | None = None):
    """An Engine over a tiny Llama with random 'magnet' (hybrid, last token) and 'llm2vec'
    (bidirectional, mean pooling) LoRA adapters.

    Room for five-shot prompts (max_positions); larger initial weights so outputs vary.
    packing: the base weights packed for fbgemm (magnet_model.packed.KINDS) under the adapters.
    """
    from pathlib import Path

    import torch
    from peft import get_peft_model

    from magnet_model.adapter_meta import AdapterMeta
    from magnet_model.inference.engine import Engine
    from magnet_model.loading import LoadedModel
    from magnet_model.settings import ModelSpec
    from magnet_model.tokens import choose_token_roles

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
    # An existing folder without magnet_config.json: the engine takes `metas` as given.
    here = str(Path(__file__).parent)
    names = {"magnet": here, "llm2vec": here} if adapters else {}
    cpu = torch.device("cpu")
    if packing is not None:
        from magnet_model.packed import pack_linears

        pack_linears(model, packing)
    loaded = LoadedModel(
        model, tok, ModelSpec(), cpu, torch.float32, "tiny", 0.0, names, packing=packing
    )
    return Engine(loaded, metas=metas)


def save_tiny_model(folder):
    """A tiny Llama + tokenizer as a model directory, and two adapters with their metadata."""
    import shutil

    from magnet_model.adapter_meta import save_meta

    engine = tiny_engine()
    base = folder / "base"
    engine.model.get_base_model().save_pretrained(base)
    engine.tokenizer.save_pretrained(base)
    paths = {"base": base}
    for name in ("magnet", "llm2vec"):
        engine.model.save_pretrained(folder / "adapters", selected_adapters=[name])
        out = folder / "adapters" / name
        if not (out / "adapter_config.json").is_file():  # peft saves "default" at the top
            out.mkdir(parents=True, exist_ok=True)
            for f in ("adapter_config.json", "adapter_model.safetensors"):
                shutil.move(folder / "adapters" / f, out / f)
        save_meta(out, engine.runner.meta(name))
        paths[name] = out
    return paths
