"""The training run: the model with its LoRA (and role rows), one optimizer step over the
micro-batches of every rank, and the loop that logs, checkpoints and writes the adapter."""

from __future__ import annotations

import json
import math
import random
import shutil
import sys
import time
from contextlib import nullcontext
from dataclasses import replace
from pathlib import Path

import torch

from ..adapter_meta import save_meta
from ..errors import ConfigError, MagnetError
from ..role_rows import RoleRows
from ..settings import EMBEDDED, EMBEDDED_BASE_ID, ModelSpec
from ..tokens import bos_of, choose_token_roles, word_edges, word_start_table
from .checkpoints import (
    _load_role_rows,
    checkpoint_dir,
    find_checkpoint,
    load_checkpoint,
    save_checkpoint,
    trim_log,
)
from .config import LOG_FILE, OBJECTIVES, TOKEN_OBJECTIVES, TrainConfig, validate
from .corpus import Draws, Example, load_corpus
from .distributed import Ranks, setup, teardown
from .objectives import (
    anchor_loss,
    attention_dropout,
    masked_view_terms,
    sentence_vectors,
    sscl_loss,
    structure_loss,
)
from .run import TrainingRun, run_meta, trained_params
from .views import collate_masked, collate_sentences, masked_example, replacement_vocab
from .watch import sts_spearman, sts_watch


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


def make_scheduler(optimizer, cfg: TrainConfig) -> torch.optim.lr_scheduler.LambdaLR:
    """The learning-rate schedule of a run (lr_lambda), stepped once per optimizer step."""
    return torch.optim.lr_scheduler.LambdaLR(optimizer, lr_lambda(cfg))


# ---------------------------------------------------------------- one step


def sentence_pairs(batch: list[Example], length: int) -> tuple[list[list[int]], list]:
    """(x, x+) token lists: x+ is the paraphrase if any, else x itself (SimCSE dropout)."""
    texts = [list(e.ids[:length]) for e in batch]
    positives = [list((e.positive or e.ids)[:length]) for e in batch]
    return texts, positives


TERMS = ("mntp", "msg", "msg_end")  # the masked view's losses, as (sum, count) pairs


def micro_step(run: TrainingRun, step: int, micro: int, objectives: list[str]) -> dict[str, float]:
    """Forward + backward of this rank's share of one global micro-batch; returns the losses
    (unweighted) of the whole global micro-batch, the same on every rank.

    The global micro-batch is --batch-size x ranks texts, drawn and cut into views as one
    process with that batch would; rank r keeps texts r*B .. (r+1)*B. Backward leaves on each
    rank the gradient of its share of the global loss; train_step sums them over ranks."""
    cfg, ranks = run.cfg, run.ranks
    size = cfg.batch_size
    draw = step * cfg.grad_accum + micro
    batch = [run.examples[i] for i in run.draws.token_batch(draw, ranks.world)]
    mine = slice(ranks.rank * size, (ranks.rank + 1) * size)
    rng = random.Random(f"{cfg.seed}-views-{draw}")
    weights = cfg.loss_weights
    out: dict[str, float] = {}
    token_objs = [o for o in objectives if o in TOKEN_OBJECTIVES]
    if token_objs:
        exs = [  # every rank cuts the whole global micro-batch's views: the same rng draws
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
                units=e.units,
            )
            for e in batch
        ][mine]
        xm = collate_masked(exs, run.roles.pad).to(run.device)
        with run.autocast():
            terms = masked_view_terms(
                run.model,
                xm,
                cfg.attention,
                run.mask_dtype,
                end_token=run.roles.span_end,
                end_weight=cfg.w_span_end,
            )
        # each loss's sum and count over every rank's tokens, in one all-reduce
        stats = torch.zeros(2 * len(TERMS), dtype=torch.float64, device=run.device)
        for i, k in enumerate(TERMS):
            if k in terms:
                stats[2 * i] = terms[k][0].detach().double()
                stats[2 * i + 1] = terms[k][1].double()
        totals = ranks.all_sum(stats).tolist()
        total = 0.0
        for i, k in enumerate(TERMS):
            count = totals[2 * i + 1]
            if count <= 0:
                continue  # no rank had a label for it: the loss is absent, as on one process
            out[k] = totals[2 * i] / count
            if k in weights and k in terms:
                total = total + weights[k] * terms[k][0] / count
        if isinstance(total, torch.Tensor):
            (total / cfg.grad_accum).backward()
    if "sscl" in objectives:
        pairs = cfg.sscl_pairs
        own = [run.examples[i] for i in run.draws.sentence_batch(draw, ranks.world)]
        own = own[ranks.rank * pairs : (ranks.rank + 1) * pairs]
        texts, positives = sentence_pairs(own, cfg.sscl_max_length or cfg.max_length)
        keep: dict = {}
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
                    gather=ranks.gather_rows if ranks.distributed else None,
                    offset=ranks.rank * pairs,
                    negatives=run.queue,
                    keep=keep,
                )
            total = weights["sscl"] * loss
            if run.anchor is not None:  # --sscl-anchor: the same rows, read by the anchor
                with torch.no_grad(), run.autocast():
                    target = sentence_vectors(
                        run.anchor, sb, cfg.sentence_mode(), cfg.pooling, run.mask_dtype
                    )
                held = anchor_loss(keep["vectors"], target)
                total = total + cfg.w_anchor * held
                out["anchor"] = ranks.mean(held)
                # which texts sit nearer which, as the anchor has it (logged even at weight 0)
                shape = structure_loss(keep["vectors"], target, cfg.temperature)
                total = total + cfg.w_anchor_structure * shape
                out["anchor_structure"] = ranks.mean(shape)
            # the global loss is the mean of the ranks' (each a mean over as many texts)
            (total / (cfg.grad_accum * ranks.world)).backward()
        out["sscl"] = ranks.mean(loss)
        if cfg.sscl_queue:  # every rank queues the global batch's positives alike
            run.push_queue(keep["positives"])
    return out


def train_step(run: TrainingRun, step: int, optimizer, scheduler) -> dict:
    """One optimizer step over grad_accum micro-batches (on every rank, the gradients then
    summed over ranks); returns the log record."""
    cfg = run.cfg
    stage = cfg.stage_of(step)
    objectives = cfg.objectives_of(stage)
    sums: dict[str, float] = {}
    for micro in range(cfg.grad_accum):
        for k, v in micro_step(run, step, micro, objectives).items():
            sums[k] = sums.get(k, 0.0) + v / cfg.grad_accum
    run.ranks.sum_grads(run.params)
    torch.nn.utils.clip_grad_norm_(run.params, cfg.max_grad_norm)
    lr = scheduler.get_last_lr()[0]
    optimizer.step()
    scheduler.step()
    optimizer.zero_grad(set_to_none=True)
    weights = cfg.loss_weights
    loss = sum(weights[k] * v for k, v in sums.items() if k in weights)
    return {"step": step + 1, "stage": stage, "lr": lr, "loss": loss, **sums}


# ---------------------------------------------------------------- the run


def autocast_dtype(cfg: TrainConfig, device: torch.device) -> torch.dtype | None:
    """bf16 autocast on CUDA (--bf16), or on a CPU whose hardware multiplies bfloat16
    (--cpu-bf16: AMX or AVX-512 BF16; refused elsewhere, where it is emulated and slower)."""
    from ..hardware import has_fast_bf16

    if device.type == "cuda":
        return torch.bfloat16 if cfg.bf16 else None
    if device.type == "cpu" and cfg.cpu_bf16:
        if not has_fast_bf16():
            raise ConfigError(
                "--cpu-bf16 needs a CPU with AMX or AVX-512 BF16 (this one has neither: "
                "bfloat16 would be emulated and slower than float32); drop the flag."
            )
        return torch.bfloat16
    return None


def _lora_shape(folder: Path) -> dict:
    """An adapter folder's LoRA rank and scale numerator (its adapter_config.json), as
    TrainConfig fields; {} when the file is not there or cannot be read."""
    import json

    try:
        config = json.loads((folder / "adapter_config.json").read_text())
        return {"lora_r": int(config["r"]), "lora_alpha": int(config["lora_alpha"])}
    except (OSError, ValueError, KeyError, TypeError):
        return {}


def anchor_model(cfg: TrainConfig, spec: ModelSpec, device):
    """--sscl-anchor's frozen model: the base again, with the anchor adapter's LoRA weights and
    role rows, in eval mode (no dropout), no parameter trained. Built without touching the
    random state the run's own LoRA initialisation and draws use."""
    from ..loading import load_base

    folder = Path(cfg.sscl_anchor)
    cuda = [device] if getattr(device, "type", str(device)) == "cuda" else []
    with torch.random.fork_rng(devices=cuda):
        model, tokenizer, _ = load_base(spec)
        if cfg.train_role_rows:
            roles = choose_token_roles(tokenizer, model)
            rows = RoleRows.from_weight(
                sorted(roles.special_ids()), model.get_input_embeddings().weight
            )
            _load_role_rows(rows, folder, strict=False)
            rows.to(device)
            rows.hook(model.get_input_embeddings(), model.get_output_embeddings())
            model._anchor_role_rows = rows  # kept alive with the model its hooks read
        # the anchor's own rank and scale (a soup has the ranks of its parts added), so a run
        # of another rank can hold a trained adapter's vectors
        shape = {"lora_r": cfg.lora_r, "lora_alpha": cfg.lora_alpha}
        shape.update(_lora_shape(folder))
        model = wrap_lora(model, replace(cfg, gradient_checkpointing=False, **shape))
        try:
            init_from_adapter(model, folder)
        except ConfigError as e:
            raise ConfigError(str(e).replace("--init-adapter", "--sscl-anchor")) from None
    model.eval()
    model.requires_grad_(False)
    return model


def build_run(cfg: TrainConfig, spec: ModelSpec, ranks: Ranks | None = None) -> TrainingRun:
    """The model (on this rank's device), its LoRA and role rows, the corpus and the sampler;
    every rank starts from rank 0's weights."""
    from ..loading import load_base, resolve_device

    ranks = ranks or Ranks()
    if ranks.distributed:  # each rank on the device its launcher gave it
        # --fsdp: the whole base in CPU memory first; each rank then keeps its shard
        spec = replace(spec, device="cpu" if cfg.fsdp else str(ranks.device))
    model, tokenizer, source = load_base(spec)
    device, _ = resolve_device(spec)
    roles = choose_token_roles(tokenizer, model)  # rows of their own (tokens.py)
    examples = load_corpus(cfg, tokenizer)
    role_rows = None
    if cfg.train_role_rows:
        role_ids = sorted(roles.special_ids())
        role_rows = RoleRows.from_weight(role_ids, model.get_input_embeddings().weight)
        role_rows.to(device)
        role_rows.hook(model.get_input_embeddings(), model.get_output_embeddings())
    torch.manual_seed(cfg.seed)  # LoRA init
    model = wrap_lora(model, cfg)
    if spec.base == EMBEDDED:  # its Hub id, not the cache folder it was de-quantized into
        model.peft_config["default"].base_model_name_or_path = EMBEDDED_BASE_ID
    if cfg.init_adapter:
        init_from_adapter(model, Path(cfg.init_adapter))
        if role_rows is not None:
            _load_role_rows(role_rows, Path(cfg.init_adapter), strict=False)
    ranks.broadcast_params(trained_params(model, role_rows))
    anchor = anchor_model(cfg, spec, device) if cfg.sscl_anchor else None
    sharded = ""
    if cfg.fsdp:
        device = ranks.device
        if role_rows is not None:
            role_rows.to(device)
        done, total = ranks.shard(model, model.get_base_model().get_decoder().layers)
        sharded = f"; FSDP: {done:,} of {total:,} parameters sharded over {ranks.world} ranks"
    if ranks.main:
        where = f"device {device}" if not ranks.distributed else f"{ranks.world} ranks on {device}"
        where += sharded
        print(
            f"base: {source}; {len(examples)} training texts; {where}; roles "
            f"{roles.to_dict()}; role rows {'trained' if role_rows else 'frozen'}",
            file=sys.stderr,
        )
    return TrainingRun(
        cfg=cfg,
        model=model,
        roles=roles,
        bos=bos_of(tokenizer),
        examples=examples,
        draws=Draws(len(examples), cfg),
        vocab=replacement_vocab(len(tokenizer), roles, set(tokenizer.all_special_ids)),
        instruction_ids=tokenizer(cfg.instruction, add_special_tokens=False).input_ids,
        view=cfg.view,
        word_starts=word_start_table(tokenizer),
        device=device,
        autocast_dtype=autocast_dtype(cfg, device),
        role_rows=role_rows,
        ranks=ranks,
        anchor=anchor,
        watch=sts_watch(tokenizer, cfg.watch_sts, cfg.seed, cfg.sscl_max_length or cfg.max_length)
        if cfg.watch_sts
        else None,
    )


def save_output(run: TrainingRun, steps_done: int, seconds: float) -> None:
    """The adapter, its role rows and magnet_config.json, written by rank 0 (the others wait)."""
    if run.ranks.main:
        _write_output(run, steps_done, seconds)
    run.ranks.barrier()


def _write_output(run: TrainingRun, steps_done: int, seconds: float) -> None:
    cfg = run.cfg
    # peft's save_pretrained writes a template card ("[More Information Needed]") where there is
    # none; `python -m magnet_model.training.card` writes the real one, and publish refuses an
    # adapter without it, so the template is removed (a card already there is kept).
    card = Path(cfg.output) / "README.md"
    had_card = card.exists()
    # the vocabulary is never resized (role rows are saved apart): no Hub lookup of the base
    run.model.save_pretrained(cfg.output, save_embedding_layers=False)
    if not had_card:
        card.unlink(missing_ok=True)
    if run.role_rows is not None:
        run.role_rows.save(cfg.output)
    save_meta(cfg.output, run_meta(run, steps_done, seconds))


def train(cfg: TrainConfig, spec: ModelSpec) -> Path:
    """Run (or resume) training; returns the output adapter directory. Under torchrun or
    accelerate launch every rank runs this; rank 0 alone writes (distributed.py)."""
    ranks = setup(spec.device)
    out = _train(cfg, spec, ranks)
    teardown(ranks)
    return out


def _train(cfg: TrainConfig, spec: ModelSpec, ranks: Ranks) -> Path:
    validate(cfg, ranks.world)
    out = Path(cfg.output)
    if cfg.resume is None and checkpoint_dir(cfg).exists() and not cfg.overwrite:
        raise ConfigError(
            f"{out} already holds checkpoints; pass --resume to continue or --overwrite."
        )
    ranks.barrier()  # every rank has looked before rank 0 clears anything
    if cfg.resume is None and cfg.overwrite and ranks.main:
        shutil.rmtree(checkpoint_dir(cfg), ignore_errors=True)
        (out / LOG_FILE).unlink(missing_ok=True)
    ranks.barrier()
    ckpt = find_checkpoint(cfg) if cfg.resume is not None else None
    run = build_run(cfg, spec, ranks)
    optimizer = torch.optim.AdamW(run.params, lr=cfg.lr, weight_decay=cfg.weight_decay)
    scheduler = make_scheduler(optimizer, cfg)
    start = 0
    if ranks.main:
        out.mkdir(parents=True, exist_ok=True)
    log_path = out / LOG_FILE
    if ckpt is not None:
        start = load_checkpoint(run, ckpt, optimizer, scheduler)
        if ranks.main:
            trim_log(log_path, start)
    else:  # dropout from here on; rank 0 draws as one process would, the others their own
        torch.manual_seed(cfg.seed + 1_000_003 * ranks.rank)
    end = cfg.total_steps if cfg.max_steps is None else min(cfg.total_steps, cfg.max_steps)
    deadline = None if cfg.max_minutes is None else time.monotonic() + 60 * cfg.max_minutes
    t0 = time.perf_counter()
    step = start
    from tqdm.auto import tqdm

    show = cfg.progress and ranks.main
    bar = tqdm(total=end, initial=start, disable=not show, desc="train", unit="step")
    with log_path.open("a") if ranks.main else nullcontext() as log:
        while step < end:
            t = time.perf_counter()
            record = train_step(run, step, optimizer, scheduler)
            step += 1
            record["seconds"] = round(time.perf_counter() - t, 3)
            # every rank agrees whether the time is up (each then watches and saves alike)
            timed_out = ranks.agree(deadline is not None and time.monotonic() > deadline)
            if run.watch is not None and (step % cfg.save_every == 0 or step == end or timed_out):
                record["sts_dev"] = round(sts_spearman(run, run.watch), 2)
            if log is not None:
                log.write(json.dumps(record) + "\n")
                log.flush()
            bar.update(1)
            bar.set_postfix({k: f"{record[k]:.3f}" for k in OBJECTIVES if k in record})
            if math.isnan(record["loss"]):  # the losses are the global ones: every rank stops
                raise MagnetError(f"The loss became NaN at step {step}; lower --lr.")
            if step % cfg.save_every == 0 and step < end:
                save_checkpoint(run, step, optimizer, scheduler)
            if timed_out:
                break
    bar.close()
    if step > start:
        save_checkpoint(run, step, optimizer, scheduler)
    save_output(run, step, time.perf_counter() - t0)
    return out
