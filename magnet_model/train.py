"""Adapt a decoder LLM with MAGNET (or a baseline / ablation) using LoRA.

    python -m magnet_model.train --output adapters/magnet                       # MAGNET
    python -m magnet_model.train --output adapters/llm2vec --attention bidirectional \\
        --objectives mntp,sscl --stage2-objectives sscl                          # LLM2Vec-style

Stage 1 trains MNTP + MSG (teaches the model to use the future context), stage 2 adds SSCL.
Each optimizer step: x_m -> MNTP + MSG in one forward (backward), then the sentence pairs ->
SSCL in a second forward with attention dropout (backward); gradients add up.

Output: a standard PEFT adapter directory + magnet_config.json (adapter_meta) + train_log.jsonl
(one line per step: the losses), and checkpoints/step-N/ for --resume.
"""

from __future__ import annotations

import argparse
import json
import math
import random
import shutil
import sys
import time
from contextlib import nullcontext
from dataclasses import asdict, dataclass, field
from functools import lru_cache
from pathlib import Path

import torch

from .adapter_meta import SENTENCE_INSTRUCTION, AdapterMeta, save_meta
from .errors import ConfigError, MagnetError
from .masks import MODES
from .objectives import POOLINGS, attention_dropout, masked_view_losses, sscl_loss
from .settings import ModelSpec, add_model_args
from .tokens import TokenRoles, choose_token_roles, word_edges, word_start_table
from .views import (
    ViewConfig,
    collate_masked,
    collate_sentences,
    masked_example,
    replacement_vocab,
)

OBJECTIVES = ("mntp", "msg", "sscl")
TOKEN_OBJECTIVES = ("mntp", "msg")
LORA_TARGETS = "q_proj,k_proj,v_proj,o_proj,gate_proj,up_proj,down_proj"
MIN_TOKENS = 4  # shorter texts teach nothing (no room for a span and context)
LOG_FILE = "train_log.jsonl"
STATE_FILE = "trainer_state.pt"
# flags that must match between a checkpoint and the run resuming it
RESUME_KEYS = (
    "objectives", "stage2_objectives", "attention", "stage1_steps", "stage2_steps", "batch_size",
    "grad_accum", "max_length", "sscl_max_length", "seed", "lora_r", "lora_alpha",
    "lora_targets", "corpus", "vital_extracts", "sscl_positives",
)  # fmt: skip
SSCL_POSITIVES = ("dropout", "description")


@dataclass
class TrainConfig:
    output: str
    corpus: list[str] = field(default_factory=list)  # text/JSONL files; empty = default_rows()
    vital_extracts: bool = True  # the default corpus adds the vital-article training extracts
    sscl_positives: str = "dropout"  # default corpus: x itself, or vital title: description
    text_column: str = "text"
    paraphrase_column: str = "paraphrase"
    max_length: int = 128  # tokens per training text
    sscl_max_length: int | None = None  # SSCL texts cut to this (default: max_length)
    objectives: list[str] = field(default_factory=lambda: list(OBJECTIVES))
    stage2_objectives: list[str] | None = None  # default: all of --objectives
    attention: str = "hybrid"
    pooling: str | None = None  # default: mean for bidirectional (LLM2Vec), else last
    instruction: str = SENTENCE_INSTRUCTION
    stage1_steps: int = 1000
    stage2_steps: int = 1000
    max_steps: int | None = None  # stop early (the schedule still spans both stages)
    max_minutes: float | None = None
    batch_size: int = 8
    grad_accum: int = 1
    lr: float = 1e-4
    warmup_steps: int = 50
    weight_decay: float = 0.0
    max_grad_norm: float = 1.0
    w_mntp: float = 1.0
    w_msg: float = 1.0
    w_sscl: float = 1.0
    temperature: float = 0.05
    sscl_dropout: float = 0.3  # attention dropout during SSCL passes (SimCSE noise)
    mntp_prob: float = 0.2
    max_spans: int = 3
    span_min: int = 8  # MSG span lengths in tokens for 128+ token texts (paper: 8..32) ...
    span_max: int = 32  # ... scaled down for shorter texts (views.span_length_range)
    all_span_share: float = 0.15  # MSG: texts that are one whole span (causal LM, as generation)
    w_span_end: float = 1.0  # weight of the <span_end> target inside the MSG loss
    lora_r: int = 16
    lora_alpha: int = 32
    lora_dropout: float = 0.05
    lora_targets: str = LORA_TARGETS
    seed: int = 0
    save_every: int = 200
    keep_checkpoints: int = 2
    resume: str | None = None  # checkpoint dir, or "latest" in OUTPUT/checkpoints
    init_adapter: str | None = None  # start from this adapter's LoRA weights (fine-tuning)
    overwrite: bool = False
    gradient_checkpointing: bool = False
    bf16: bool = True  # autocast to bf16 on CUDA (ignored on CPU)
    progress: bool = True

    def __post_init__(self) -> None:
        if self.pooling is None:  # the LLM2Vec protocol pools bidirectional models by the mean
            self.pooling = "mean" if self.attention == "bidirectional" else "last"

    @property
    def total_steps(self) -> int:
        return self.stage1_steps + self.stage2_steps

    def stage_of(self, step: int) -> int:
        return 1 if step < self.stage1_steps else 2

    def objectives_of(self, stage: int) -> list[str]:
        if stage == 1:
            return [o for o in self.objectives if o in TOKEN_OBJECTIVES]
        return list(self.stage2_objectives or self.objectives)

    def sentence_mode(self) -> str:
        return "causal" if self.attention == "causal" else "bidirectional"


# ---------------------------------------------------------------- config checks


def _objective_list(value: str, flag: str) -> list[str]:
    items = [v.strip().lower() for v in value.split(",") if v.strip()]
    bad = [v for v in items if v not in OBJECTIVES]
    if bad or not items:
        raise ConfigError(f"{flag} takes a comma list of {', '.join(OBJECTIVES)}, not {value!r}.")
    return [o for o in OBJECTIVES if o in items]


def validate(cfg: TrainConfig) -> None:
    """Refuse flag combinations that would train nothing or train the wrong thing."""
    if cfg.attention not in MODES:
        raise ConfigError(f"--attention must be one of {', '.join(MODES)}.")
    if cfg.sscl_positives not in SSCL_POSITIVES:
        raise ConfigError(f"--sscl-positives must be one of {', '.join(SSCL_POSITIVES)}.")
    if cfg.sscl_positives != "dropout" and not cfg.vital_extracts:
        raise ConfigError("--sscl-positives description needs the vital-article extracts.")
    if cfg.corpus and cfg.sscl_positives != "dropout":
        raise ConfigError(
            "--sscl-positives description applies to the default corpus; a --corpus file gives "
            "its positives in the paraphrase column (`python -m magnet_model.data vital-pairs "
            "FILE` writes the vital-article pairs)."
        )
    if cfg.pooling not in POOLINGS:
        raise ConfigError(f"--pooling must be one of {', '.join(POOLINGS)}.")
    if "msg" in cfg.objectives and cfg.attention == "bidirectional":
        raise ConfigError(
            "MSG cannot be trained with bidirectional attention: each span token would see the "
            "token it must predict. Use --attention hybrid (or causal), or drop msg."
        )
    if cfg.stage2_objectives and not set(cfg.stage2_objectives) <= set(cfg.objectives):
        raise ConfigError("--stage2-objectives must be a subset of --objectives.")
    if min(cfg.stage1_steps, cfg.stage2_steps) < 0 or cfg.total_steps == 0:
        raise ConfigError("Nothing to train: give --stage1-steps and/or --stage2-steps > 0.")
    if cfg.stage1_steps > 0 and not cfg.objectives_of(1):
        raise ConfigError(
            "Stage 1 trains only mntp/msg, and none is selected; with --objectives sscl "
            "set --stage1-steps 0 and --stage2-steps > 0."
        )
    if cfg.stage2_steps > 0 and not cfg.objectives_of(2):
        raise ConfigError("Stage 2 has no objective; set --stage2-steps 0 or add objectives.")
    if "sscl" in cfg.objectives and (cfg.stage2_steps == 0 or "sscl" not in cfg.objectives_of(2)):
        raise ConfigError("sscl is selected but trains only in stage 2: give --stage2-steps > 0.")
    if "sscl" in cfg.objectives and cfg.batch_size < 2:
        raise ConfigError("SSCL needs in-batch negatives: --batch-size must be at least 2.")
    if cfg.max_length < 8 or (cfg.sscl_max_length is not None and cfg.sscl_max_length < 1):
        raise ConfigError("--max-length must be at least 8 tokens, --sscl-max-length 1.")
    if cfg.batch_size < 1 or cfg.grad_accum < 1 or cfg.save_every < 1:
        raise ConfigError("--batch-size, --grad-accum and --save-every must be positive.")
    if min(cfg.w_mntp, cfg.w_msg, cfg.w_sscl) < 0:
        raise ConfigError("Loss weights must not be negative.")
    if not 1 <= cfg.span_min <= cfg.span_max:
        raise ConfigError("--span-min and --span-max must satisfy 1 <= min <= max.")
    if not 0 <= cfg.all_span_share < 1 or cfg.w_span_end < 0:
        raise ConfigError("--all-span-share must be in [0, 1) and --w-span-end >= 0.")
    if not 0 <= cfg.sscl_dropout < 1 or not 0 < cfg.mntp_prob < 1:
        raise ConfigError("--sscl-dropout must be in [0, 1) and --mntp-prob in (0, 1).")
    if cfg.max_steps is not None and cfg.max_steps < 1:
        raise ConfigError("--max-steps must be at least 1.")


# ---------------------------------------------------------------- corpus


@dataclass(frozen=True)
class Example:
    ids: tuple[int, ...]
    positive: tuple[int, ...] | None = None  # a paraphrase's ids, if the data has one


def chunk(ids: list[int], size: int) -> list[list[int]]:
    """Cut a paragraph's tokens into training texts of at most `size` tokens."""
    return [ids[i : i + size] for i in range(0, len(ids), size) if len(ids[i : i + size])]


def _read_rows(path: Path, cfg: TrainConfig) -> list[tuple[str, str | None]]:
    if not path.is_file():
        raise ConfigError(f"Corpus file {path} does not exist.")
    lines = path.read_text(encoding="utf-8").splitlines()
    if path.suffix.lower() not in (".jsonl", ".json"):
        return [(line.strip(), None) for line in lines if line.strip()]
    rows = []
    for n, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except json.JSONDecodeError as e:
            raise ConfigError(f"{path}:{n} is not valid JSON ({e.msg}).") from None
        if not isinstance(obj, dict) or cfg.text_column not in obj:
            raise ConfigError(
                f"{path}:{n} has no {cfg.text_column!r} field; choose it with --text-column."
            )
        para = obj.get(cfg.paraphrase_column)
        rows.append((str(obj[cfg.text_column]).strip(), str(para).strip() if para else None))
    return rows


def default_rows(positives: str = "dropout", vital: bool = True) -> list[tuple[str, str | None]]:
    """The default corpus: the Wikipedia training split's paragraphs and the vital-article
    training extracts (data.py keeps both clear of held-out text). With positives
    'description' each extract is paired with "title: description", the asymmetric
    query -> document pair text-embedding models train on; MNTP and MSG still see the extract.
    vital False: the Wikipedia paragraphs alone (the default corpus of earlier adapters).
    """
    from .data import vital_articles, wikipedia_paragraphs

    pair = positives == "description"
    rows: list[tuple[str, str | None]] = [(p, None) for p in wikipedia_paragraphs("train")]
    for a in vital_articles("train") if vital else []:
        rows.append((a.extract, a.query if pair and a.description else None))
    return rows


def load_corpus(cfg: TrainConfig, tokenizer) -> list[Example]:
    """Files (text: one text per line; JSONL: text + optional paraphrase) or default_rows().

    Texts without a paraphrase are chunked to --max-length tokens; pairs are truncated (a
    chunk of a text is not a paraphrase of the matching chunk of the other).
    """
    if cfg.corpus:
        rows = [r for p in cfg.corpus for r in _read_rows(Path(p), cfg)]
    else:
        rows = default_rows(cfg.sscl_positives, cfg.vital_extracts)
    rows = [(t, p) for t, p in rows if t]

    def encode(texts: list[str]) -> list[list[int]]:
        return tokenizer(texts, add_special_tokens=False).input_ids if texts else []

    text_ids = encode([t for t, _ in rows])
    para_ids = iter(encode([p for _, p in rows if p]))
    examples = []
    for (_, para), ids in zip(rows, text_ids, strict=True):
        if para:
            positive = next(para_ids)[: cfg.max_length]
            examples.append(Example(tuple(ids[: cfg.max_length]), tuple(positive)))
        else:
            examples.extend(Example(tuple(c)) for c in chunk(ids, cfg.max_length))
    examples = [e for e in examples if len(e.ids) >= MIN_TOKENS]
    if not examples:
        where = ", ".join(cfg.corpus) or "the default corpus"
        raise ConfigError(f"The corpus ({where}) holds no text of {MIN_TOKENS}+ tokens.")
    return examples


class Sampler:
    """Batch b of the run is a fixed function of (seed, b): resuming draws the same texts."""

    def __init__(self, n: int, seed: int):
        self.n, self.seed = n, seed

    @lru_cache(maxsize=4)  # noqa: B019 (a few epochs' permutations, per sampler)
    def _epoch(self, epoch: int) -> list[int]:
        order = list(range(self.n))
        random.Random(f"{self.seed}-epoch-{epoch}").shuffle(order)
        return order

    def indices(self, draw: int, size: int) -> list[int]:
        start = draw * size
        return [self._epoch(g // self.n)[g % self.n] for g in range(start, start + size)]


# ---------------------------------------------------------------- model


def bos_of(tokenizer) -> int | None:
    """The BOS the tokenizer itself puts in front of text (None for SmolLM2, <s> for Llama)."""
    bos = tokenizer.bos_token_id
    probe = tokenizer("a").input_ids
    return bos if bos is not None and probe and probe[0] == bos else None


def wrap_lora(model, cfg: TrainConfig):
    from peft import LoraConfig, get_peft_model

    targets = [t.strip() for t in cfg.lora_targets.split(",") if t.strip()]
    lora = LoraConfig(
        r=cfg.lora_r,
        lora_alpha=cfg.lora_alpha,
        lora_dropout=cfg.lora_dropout,
        target_modules=targets,
        task_type="CAUSAL_LM",
    )
    try:
        model = get_peft_model(model, lora)
    except ValueError as e:
        raise ConfigError(
            f"--lora-targets {cfg.lora_targets!r} do not fit this model: {e}"
        ) from None
    if cfg.gradient_checkpointing:
        base = model.get_base_model()
        kwargs = {"use_reentrant": False}  # no need for inputs that require grad
        if hasattr(base, "activation_checkpointing_enable"):  # transformers >= 5.x
            base.activation_checkpointing_enable(activation_checkpointing_kwargs=kwargs)
        else:
            base.gradient_checkpointing_enable(gradient_checkpointing_kwargs=kwargs)
    model.train()
    return model


def init_from_adapter(model, folder: Path) -> None:
    """Load a trained adapter's LoRA weights into the fresh LoRA of this run (same shapes):
    a run that continues training an adapter with another recipe."""
    from peft import set_peft_model_state_dict
    from safetensors.torch import load_file

    path = folder / "adapter_model.safetensors"
    if not path.is_file():
        raise ConfigError(f"--init-adapter {folder}: no adapter_model.safetensors there.")
    state = load_file(str(path))
    try:
        result = set_peft_model_state_dict(model, state)
    except RuntimeError as e:  # shape mismatch: another rank or base model
        raise ConfigError(
            f"--init-adapter {folder} does not fit this run's LoRA (rank, targets or base model "
            f"differ): {str(e).splitlines()[0]}"
        ) from None
    lora_keys = [k for k in result.missing_keys if "lora_" in k]
    if lora_keys or result.unexpected_keys:
        raise ConfigError(
            f"--init-adapter {folder} does not fit this run's LoRA: {len(lora_keys)} LoRA "
            f"weights missing, {len(result.unexpected_keys)} unexpected; use the same "
            "--lora-r and --lora-targets."
        )


def lr_lambda(cfg: TrainConfig):
    """Linear warm-up, then linear decay to zero at the end of stage 2."""

    def f(step: int) -> float:
        if step < cfg.warmup_steps:
            return (step + 1) / cfg.warmup_steps
        rest = max(1, cfg.total_steps - cfg.warmup_steps)
        return max(0.0, 1.0 - (step - cfg.warmup_steps) / rest)

    return f


# ---------------------------------------------------------------- one step


@dataclass
class Run:
    """Everything a step needs, built once."""

    cfg: TrainConfig
    model: object
    roles: TokenRoles
    bos: int | None
    examples: list[Example]
    sampler: Sampler
    vocab: list[int]
    instruction_ids: list[int]
    view: ViewConfig
    device: torch.device
    autocast_dtype: torch.dtype | None  # bf16 on CUDA, else None
    word_starts: list[bool] | None = None  # tokens.word_start_table: where spans may begin

    def autocast(self):
        if self.autocast_dtype is None:
            return nullcontext()
        return torch.autocast(self.device.type, dtype=self.autocast_dtype)

    @property
    def mask_dtype(self) -> torch.dtype:
        if self.autocast_dtype is not None:
            return self.autocast_dtype
        return next(self.model.parameters()).dtype


def sentence_pairs(batch: list[Example], length: int) -> tuple[list[list[int]], list]:
    """(x, x+) token lists: x+ is the paraphrase if any, else x itself (SimCSE dropout)."""
    texts = [list(e.ids[:length]) for e in batch]
    positives = [list((e.positive or e.ids)[:length]) for e in batch]
    return texts, positives


def micro_step(run: Run, step: int, micro: int, objectives: list[str]) -> dict[str, float]:
    """Forward + backward of one micro-batch; returns its losses (unweighted)."""
    cfg = run.cfg
    draw = step * cfg.grad_accum + micro
    batch = [run.examples[i] for i in run.sampler.indices(draw, cfg.batch_size)]
    rng = random.Random(f"{cfg.seed}-views-{draw}")
    weights = {"mntp": cfg.w_mntp, "msg": cfg.w_msg, "sscl": cfg.w_sscl}
    out: dict[str, float] = {}
    token_objs = [o for o in objectives if o in TOKEN_OBJECTIVES]
    if token_objs:
        exs = [
            masked_example(
                list(e.ids),
                run.roles,
                run.vocab,
                run.view,
                rng,
                bos=run.bos,
                mntp="mntp" in token_objs,
                msg="msg" in token_objs,
                edges=word_edges(e.ids, run.word_starts),
            )
            for e in batch
        ]
        xm = collate_masked(exs, run.roles.pad).to(run.device)
        with run.autocast():
            losses = masked_view_losses(
                run.model,
                xm,
                cfg.attention,
                run.mask_dtype,
                end_token=run.roles.span_end,
                end_weight=cfg.w_span_end,
            )
        total = sum(weights[k] * v for k, v in losses.items() if k in weights)
        (total / cfg.grad_accum).backward()
        out.update({k: v.item() for k, v in losses.items()})
    if "sscl" in objectives:
        texts, positives = sentence_pairs(batch, cfg.sscl_max_length or cfg.max_length)
        sb = collate_sentences(texts, positives, run.instruction_ids, run.roles, run.bos)
        sb = sb.to(run.device)
        # dropout stays on through backward: gradient checkpointing re-runs the forward there
        with attention_dropout(run.model, cfg.sscl_dropout):
            with run.autocast():
                loss = sscl_loss(
                    run.model,
                    sb,
                    cfg.sentence_mode(),
                    cfg.pooling,
                    cfg.temperature,
                    run.mask_dtype,
                )
            (weights["sscl"] * loss / cfg.grad_accum).backward()
        out["sscl"] = loss.item()
    return out


def train_step(run: Run, step: int, optimizer, scheduler) -> dict:
    """One optimizer step over grad_accum micro-batches; returns the log record."""
    cfg = run.cfg
    stage = cfg.stage_of(step)
    objectives = cfg.objectives_of(stage)
    sums: dict[str, float] = {}
    for micro in range(cfg.grad_accum):
        for k, v in micro_step(run, step, micro, objectives).items():
            sums[k] = sums.get(k, 0.0) + v / cfg.grad_accum
    params = [p for p in run.model.parameters() if p.requires_grad]
    torch.nn.utils.clip_grad_norm_(params, cfg.max_grad_norm)
    lr = scheduler.get_last_lr()[0]
    optimizer.step()
    scheduler.step()
    optimizer.zero_grad(set_to_none=True)
    weights = {"mntp": cfg.w_mntp, "msg": cfg.w_msg, "sscl": cfg.w_sscl}
    loss = sum(weights[k] * v for k, v in sums.items() if k in weights)
    return {"step": step + 1, "stage": stage, "lr": lr, "loss": loss, **sums}


# ---------------------------------------------------------------- checkpoints


def checkpoint_dir(cfg: TrainConfig) -> Path:
    return Path(cfg.output) / "checkpoints"


def rng_state() -> dict:
    state = {"torch": torch.get_rng_state()}
    if torch.cuda.is_available():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def set_rng_state(state: dict) -> None:
    torch.set_rng_state(state["torch"])
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])


def save_checkpoint(run: Run, step: int, optimizer, scheduler) -> Path:
    """Adapter + optimizer + scheduler + RNG + step, written to a temp dir then renamed."""
    root = checkpoint_dir(run.cfg)
    target = root / f"step-{step:07d}"
    tmp = root / f".tmp-step-{step:07d}"
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    run.model.save_pretrained(tmp)
    state = {
        "step": step,
        "optimizer": optimizer.state_dict(),
        "scheduler": scheduler.state_dict(),
        "rng": rng_state(),
        "config": asdict(run.cfg),
    }
    torch.save(state, tmp / STATE_FILE)
    shutil.rmtree(target, ignore_errors=True)
    tmp.rename(target)
    if run.cfg.keep_checkpoints > 0:
        for old in sorted(root.glob("step-*"))[: -run.cfg.keep_checkpoints]:
            shutil.rmtree(old, ignore_errors=True)
    return target


def find_checkpoint(cfg: TrainConfig) -> Path:
    if cfg.resume not in (None, "latest"):
        path = Path(cfg.resume)
        if not (path / STATE_FILE).is_file():
            raise ConfigError(f"{path} is not a checkpoint (no {STATE_FILE}).")
        return path
    found = sorted(checkpoint_dir(cfg).glob("step-*"))
    found = [p for p in found if (p / STATE_FILE).is_file()]
    if not found:
        raise ConfigError(f"--resume: no checkpoint in {checkpoint_dir(cfg)}.")
    return found[-1]


def load_checkpoint(run: Run, path: Path, optimizer, scheduler) -> int:
    """Restore weights, optimizer, scheduler and RNG; returns the step to continue from."""
    from peft import set_peft_model_state_dict
    from peft.utils import load_peft_weights

    state = torch.load(path / STATE_FILE, map_location="cpu", weights_only=False)
    saved = state["config"]
    now = asdict(run.cfg)
    diff = [k for k in RESUME_KEYS if saved.get(k) != now.get(k)]
    if diff:
        raise ConfigError(
            f"Checkpoint {path} was trained with different {', '.join(diff)}; resume with the "
            "same flags (see its trainer_state) or start a new --output."
        )
    set_peft_model_state_dict(run.model, load_peft_weights(str(path), device=str(run.device)))
    optimizer.load_state_dict(state["optimizer"])
    scheduler.load_state_dict(state["scheduler"])
    set_rng_state(state["rng"])
    return int(state["step"])


def trim_log(path: Path, step: int) -> None:
    """Keep the log lines up to `step`, so a resumed run's log has each step once."""
    if not path.is_file():
        return
    lines = [ln for ln in path.read_text().splitlines() if ln.strip()]
    path.write_text("".join(ln + "\n" for ln in lines if json.loads(ln)["step"] <= step))


# ---------------------------------------------------------------- the run


def build_run(cfg: TrainConfig, spec: ModelSpec) -> Run:
    from .loading import load_base, resolve_device

    model, tokenizer, source = load_base(spec)
    device, _ = resolve_device(spec)
    roles = choose_token_roles(tokenizer)
    examples = load_corpus(cfg, tokenizer)
    torch.manual_seed(cfg.seed)  # LoRA init
    model = wrap_lora(model, cfg)
    if cfg.init_adapter:
        init_from_adapter(model, Path(cfg.init_adapter))
    print(f"base: {source}; {len(examples)} training texts; device {device}", file=sys.stderr)
    return Run(
        cfg=cfg,
        model=model,
        roles=roles,
        bos=bos_of(tokenizer),
        examples=examples,
        sampler=Sampler(len(examples), cfg.seed),
        vocab=replacement_vocab(len(tokenizer), roles, set(tokenizer.all_special_ids)),
        instruction_ids=tokenizer(cfg.instruction, add_special_tokens=False).input_ids,
        view=ViewConfig(
            mntp_prob=cfg.mntp_prob,
            max_spans=cfg.max_spans,
            span_min=cfg.span_min,
            span_max=cfg.span_max,
            all_span_share=cfg.all_span_share,
        ),
        word_starts=word_start_table(tokenizer),
        device=device,
        autocast_dtype=torch.bfloat16 if device.type == "cuda" and cfg.bf16 else None,
    )


def save_output(run: Run, steps_done: int, seconds: float) -> None:
    cfg = run.cfg
    run.model.save_pretrained(cfg.output)
    training = asdict(cfg)
    training.update(
        bos=run.bos,
        steps_done=steps_done,
        complete=steps_done >= cfg.total_steps,
        train_seconds=round(seconds, 1),
        n_texts=len(run.examples),
    )
    meta = AdapterMeta(
        token_roles=run.roles,
        attention=cfg.attention,
        objectives=list(cfg.objectives),
        instruction=cfg.instruction,
        pooling=cfg.pooling,
        training=training,
    )
    save_meta(cfg.output, meta)


def train(cfg: TrainConfig, spec: ModelSpec) -> Path:
    """Run (or resume) training; returns the output adapter directory."""
    validate(cfg)
    out = Path(cfg.output)
    if cfg.resume is None and checkpoint_dir(cfg).exists() and not cfg.overwrite:
        raise ConfigError(
            f"{out} already holds checkpoints; pass --resume to continue or --overwrite."
        )
    if cfg.resume is None and cfg.overwrite:
        shutil.rmtree(checkpoint_dir(cfg), ignore_errors=True)
        (out / LOG_FILE).unlink(missing_ok=True)
    ckpt = find_checkpoint(cfg) if cfg.resume is not None else None
    run = build_run(cfg, spec)
    params = [p for p in run.model.parameters() if p.requires_grad]
    optimizer = torch.optim.AdamW(params, lr=cfg.lr, weight_decay=cfg.weight_decay)
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lr_lambda(cfg))
    start = 0
    out.mkdir(parents=True, exist_ok=True)
    log_path = out / LOG_FILE
    if ckpt is not None:
        start = load_checkpoint(run, ckpt, optimizer, scheduler)
        trim_log(log_path, start)
    else:
        torch.manual_seed(cfg.seed)  # dropout from here on
    end = cfg.total_steps if cfg.max_steps is None else min(cfg.total_steps, cfg.max_steps)
    deadline = None if cfg.max_minutes is None else time.monotonic() + 60 * cfg.max_minutes
    t0 = time.perf_counter()
    step = start
    from tqdm.auto import tqdm

    bar = tqdm(total=end, initial=start, disable=not cfg.progress, desc="train", unit="step")
    with log_path.open("a") as log:
        while step < end:
            t = time.perf_counter()
            record = train_step(run, step, optimizer, scheduler)
            step += 1
            record["seconds"] = round(time.perf_counter() - t, 3)
            log.write(json.dumps(record) + "\n")
            log.flush()
            bar.update(1)
            bar.set_postfix({k: f"{record[k]:.3f}" for k in OBJECTIVES if k in record})
            if math.isnan(record["loss"]):
                raise MagnetError(f"The loss became NaN at step {step}; lower --lr.")
            if step % cfg.save_every == 0 and step < end:
                save_checkpoint(run, step, optimizer, scheduler)
            if deadline is not None and time.monotonic() > deadline:
                break
    bar.close()
    if step > start:
        save_checkpoint(run, step, optimizer, scheduler)
    save_output(run, step, time.perf_counter() - t0)
    return out


# ---------------------------------------------------------------- CLI


def build_parser() -> argparse.ArgumentParser:
    d = TrainConfig(output="")
    p = argparse.ArgumentParser(
        prog="python -m magnet_model.train",
        description="Adapt a decoder LLM with MAGNET (LoRA); also trains baselines/ablations.",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    p.add_argument("--output", required=True, help="adapter directory to write")
    g = p.add_argument_group("data")
    g.add_argument(
        "--corpus",
        nargs="*",
        default=[],
        help="text/JSONL files; none = the Wikipedia training split + the vital-article "
        "training extracts",
    )
    g.add_argument(
        "--no-vital-extracts",
        dest="vital_extracts",
        action="store_false",
        help="default corpus: the Wikipedia training split alone (as before the vital extracts)",
    )
    g.add_argument(
        "--sscl-positives",
        choices=SSCL_POSITIVES,
        default=d.sscl_positives,
        help="SSCL positive of the default corpus: dropout (x itself, SimCSE noise) or "
        "description (a vital extract's 'title: description'; such extracts are cut to "
        "--max-length instead of chunked)",
    )
    g.add_argument("--text-column", default=d.text_column, help="JSONL field of the text")
    g.add_argument(
        "--paraphrase-column",
        default=d.paraphrase_column,
        help="JSONL field of an optional positive",
    )
    g.add_argument("--max-length", type=int, default=d.max_length, help="tokens per text")
    g.add_argument(
        "--sscl-max-length",
        type=int,
        default=None,
        help="tokens per SSCL text; None = --max-length",
    )
    g = p.add_argument_group("method")
    g.add_argument("--objectives", default=",".join(d.objectives), help="subset of mntp,msg,sscl")
    g.add_argument("--stage2-objectives", default=None, help="None = all of --objectives")
    g.add_argument(
        "--attention",
        choices=MODES,
        default=d.attention,
        help="mask of the masked view (hybrid = MAGNET)",
    )
    g.add_argument(
        "--pooling",
        choices=POOLINGS,
        default=None,
        help="None = mean if --attention bidirectional (LLM2Vec protocol), else last",
    )
    g.add_argument("--instruction", default=d.instruction, help="sentence-embedding prefix")
    g.add_argument("--w-mntp", type=float, default=d.w_mntp, help="loss weight")
    g.add_argument("--w-msg", type=float, default=d.w_msg, help="loss weight")
    g.add_argument("--w-sscl", type=float, default=d.w_sscl, help="loss weight")
    g.add_argument("--temperature", type=float, default=d.temperature, help="InfoNCE temperature")
    g.add_argument(
        "--sscl-dropout",
        type=float,
        default=d.sscl_dropout,
        help="attention dropout in SSCL passes",
    )
    g.add_argument(
        "--mntp-prob", type=float, default=d.mntp_prob, help="share of context tokens masked"
    )
    g.add_argument("--max-spans", type=int, default=d.max_spans, help="MSG spans per text, at most")
    g.add_argument("--span-min", type=int, default=d.span_min, help="MSG span length, shortest")
    g.add_argument("--span-max", type=int, default=d.span_max, help="MSG span length, longest")
    g.add_argument(
        "--all-span-share",
        type=float,
        default=d.all_span_share,
        help="share of MSG texts that are one whole span: plain causal LM, as in continuation",
    )
    g.add_argument(
        "--w-span-end",
        type=float,
        default=d.w_span_end,
        help="weight of the <span_end> target in MSG (how strongly spans learn to stop)",
    )
    g = p.add_argument_group("schedule")
    g.add_argument("--stage1-steps", type=int, default=d.stage1_steps, help="MNTP+MSG steps")
    g.add_argument(
        "--stage2-steps", type=int, default=d.stage2_steps, help="steps with all objectives"
    )
    g.add_argument("--max-steps", type=int, default=None, help="stop early (LR schedule unchanged)")
    g.add_argument("--max-minutes", type=float, default=None, help="stop after this long")
    g.add_argument("--batch-size", type=int, default=d.batch_size, help="texts per micro-batch")
    g.add_argument("--grad-accum", type=int, default=d.grad_accum, help="micro-batches per step")
    g.add_argument("--lr", type=float, default=d.lr, help="peak learning rate")
    g.add_argument(
        "--warmup-steps", type=int, default=d.warmup_steps, help="linear warm-up, then linear decay"
    )
    g.add_argument("--weight-decay", type=float, default=d.weight_decay, help="AdamW")
    g.add_argument("--max-grad-norm", type=float, default=d.max_grad_norm, help="clipping")
    g.add_argument("--seed", type=int, default=d.seed, help="data order, views, LoRA init, dropout")
    g.add_argument("--gradient-checkpointing", action="store_true")
    g.add_argument(
        "--no-bf16",
        dest="bf16",
        action="store_false",
        help="turn off bf16 autocast on CUDA (on: %(default)s)",
    )
    g = p.add_argument_group("LoRA")
    g.add_argument("--lora-r", type=int, default=d.lora_r, help="rank")
    g.add_argument("--lora-alpha", type=int, default=d.lora_alpha, help="scale numerator")
    g.add_argument("--lora-dropout", type=float, default=d.lora_dropout, help="dropout inside LoRA")
    g.add_argument("--lora-targets", default=d.lora_targets, help="module names, comma separated")
    g = p.add_argument_group("checkpoints")
    g.add_argument(
        "--save-every", type=int, default=d.save_every, help="checkpoint period in steps"
    )
    g.add_argument(
        "--keep-checkpoints", type=int, default=d.keep_checkpoints, help="newest kept (0 = all)"
    )
    g.add_argument(
        "--resume",
        nargs="?",
        const="latest",
        default=None,
        help="continue from OUTPUT/checkpoints (latest) or a checkpoint dir",
    )
    g.add_argument("--overwrite", action="store_true", help="discard OUTPUT's checkpoints")
    g.add_argument(
        "--init-adapter",
        default=None,
        help="start from this trained adapter's LoRA weights (same --lora-r/--lora-targets)",
    )
    g.add_argument("--no-progress", dest="progress", action="store_false")
    add_model_args(p)
    return p


def config_from_args(args: argparse.Namespace) -> TrainConfig:
    objectives = _objective_list(args.objectives, "--objectives")
    stage2 = args.stage2_objectives
    fields = {k: v for k, v in vars(args).items() if k in TrainConfig.__dataclass_fields__}
    fields.update(
        objectives=objectives,
        stage2_objectives=_objective_list(stage2, "--stage2-objectives") if stage2 else None,
        corpus=[str(Path(c)) for c in args.corpus],
    )
    return TrainConfig(**fields)


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        cfg = config_from_args(args)
        validate(cfg)
        spec = ModelSpec.from_args(args)
        out = train(cfg, spec)
    except MagnetError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    print(f"adapter written to {out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
