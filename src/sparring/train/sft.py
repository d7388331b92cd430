"""Supervised fine-tuning on chat conversations with TRL's `SFTTrainer`.

One entry point for every SFT in sparring (agent warm start DA0, simulator stage 1, the scale path): a settings
dataclass of plain values and `train_sft`. Conversations are lists of `{"role", "content"}` strings; agent
turns arrive already rendered in the project's call format, so the dataset has one flat schema (Arrow would
otherwise merge every tool's argument dict into one struct and fill the gaps with nulls).

Settings that matter on CPU (DESIGN.md's probe): `use_cpu=True, bf16=False`; `adam_beta2=0.98` and a warmup
of ~100 steps (TRL's defaults trained a tiny model from scratch ~20 points worse); length-grouped batches
(`train_sampling_strategy="group_by_length"`: without it every batch pads to its longest row, 5.6x slower).
TRL's fused LM head scores only the labelled positions on Triton devices but every position elsewhere; on CPU,
with the loss on the agent's ~10% of a conversation's tokens, that made it ~25% slower than a plain loop
(benchmarks/sft_vs_plain_loop.py): `train_sft` has it score the labelled positions only, on every device. On CPU
TRL's fused head itself is slow where most tokens carry the loss (its torch fallback makes a dozen elementwise
passes over every tile of logits), so `SFTSettings.fused_head: false` has `train_sft`'s trainer take the same loss
on the labelled positions' dense logits there (:func:`dense_head_trainer`). It is not the default: the one DA0
retrained with it lost strict PASS on paired episodes (docs/results.md, "Short-example SFT phases").
"""

from __future__ import annotations

import functools
import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sparring.hf_door import drop_fused_lm_head, score_labelled_positions_only, sft_trained_tokens
from sparring.lm.chat import message_text
from sparring.settings import SFTSettings


@dataclass
class SFTResult:
    model: Any
    curves: list[dict[str, float]] = field(default_factory=list)  # trainer log history (loss, lr, epoch, step)
    train_tokens: int = 0
    seconds: float = 0.0  # trainer.train() alone
    phases: dict[str, SFTResult] = field(default_factory=dict)  # a multi-phase warm start's results, in order
    prepare_seconds: float = 0.0  # building the dataset and the trainer (TRL tokenizes the dataset there)
    dataset_tokens: int = 0  # tokens in the tokenized dataset (one pass)

    @property
    def tokens_per_s(self) -> float:
        return self.train_tokens / self.seconds if self.seconds else 0.0

    @property
    def final_loss(self) -> float:
        # The last logged step's loss; a run shorter than `logging_steps` logs only its mean `train_loss`.
        losses = [c["loss"] for c in self.curves if "loss" in c]
        losses = losses or [c["train_loss"] for c in self.curves if "train_loss" in c]
        return float(losses[-1]) if losses else math.nan


def combine(phases: dict[str, SFTResult], numbers: dict[str, int]) -> SFTResult:
    """Phases run one after another as one result: the last model, every curve tagged with its phase's number,
    tokens and seconds summed."""
    curves = [{**c, "phase": numbers[name]} for name, r in phases.items() for c in r.curves]
    last = list(phases.values())[-1]
    return SFTResult(
        model=last.model,
        curves=curves,
        train_tokens=sum(r.train_tokens for r in phases.values()),
        seconds=sum(r.seconds for r in phases.values()),
        phases=dict(phases),
        prepare_seconds=sum(r.prepare_seconds for r in phases.values()),
        dataset_tokens=sum(r.dataset_tokens for r in phases.values()),
    )


def flatten(conversation: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """`{"role", "content"}` strings only: structured agent turns (intent, tool_calls) rendered to their text
    through the chat format, tool results kept as their JSON text; a turn's `train: false` (kept out of the
    loss by the chat template) goes with it."""
    from sparring.lm.chat import ParsedCall, render_agent_message

    flat = []
    for m in conversation:
        content = message_text(m.get("content"))
        if m["role"] == "assistant" and (m.get("tool_calls") or m.get("intent")):
            call = None
            if m.get("tool_calls"):
                fn = m["tool_calls"][0]["function"]
                call = ParsedCall(fn["name"], dict(fn.get("arguments") or {}))
            content = render_agent_message(content, call, m.get("intent"))
        flat.append({"role": m["role"], "content": content, **({"train": False} if m.get("train") is False else {})})
    return flat


def sft_config(settings: SFTSettings, output_dir: Path, seed: int = 0, report_to: Sequence[str] = ()) -> Any:
    """TRL's ``SFTConfig`` for ``settings``: the fields sparring sets, CPU-safe defaults for the rest."""
    from trl import SFTConfig

    return SFTConfig(
        output_dir=str(output_dir),
        num_train_epochs=settings.epochs,
        max_steps=settings.max_steps,
        learning_rate=settings.learning_rate,
        per_device_train_batch_size=settings.batch_size,
        warmup_steps=settings.warmup_steps,
        adam_beta2=settings.adam_beta2,
        weight_decay=settings.weight_decay,
        lr_scheduler_type=settings.lr_scheduler,
        max_length=settings.max_length,
        assistant_only_loss=settings.assistant_only_loss,
        train_sampling_strategy="group_by_length" if settings.group_by_length else "random",
        logging_steps=settings.logging_steps,
        seed=seed,
        data_seed=seed,
        use_cpu=not _cuda(),
        bf16=_cuda(),
        activation_checkpointing=False,
        save_strategy="no",
        report_to=list(report_to),
        dataloader_num_workers=0,
        disable_tqdm=False,
    )


def train_sft(
    model: Any,
    tokenizer: Any,
    conversations: Sequence[Sequence[dict[str, Any]]],
    settings: SFTSettings,
    output_dir: Path,
    seed: int = 0,
    report_to: Sequence[str] = (),
    callbacks: Sequence[Any] = (),
    trainer_class: Callable[..., Any] | None = None,
    progress_label: str | None = None,
) -> SFTResult:
    """Train `model` on `conversations` with TRL's SFTTrainer, data order and init seeded by `seed`; returns the
    trained model and its curves. `trainer_class`: an SFTTrainer subclass with its own loss (built like SFTTrainer);
    `progress_label`: what its progress lines are called (default: SFT and the scratch folder's name).

    `output_dir` holds the trainer's scratch (no checkpoints are saved: the caller saves the final model)."""
    from datasets import Dataset
    from trl import SFTTrainer

    from sparring.lm.added_rows import base_rows_callbacks
    from sparring.progress import trainer_progress

    if not conversations:
        raise ValueError("train_sft: no conversations to train on")
    prepared = time.perf_counter()
    dataset = Dataset.from_list([{"messages": flatten(c)} for c in conversations])
    args = sft_config(settings, output_dir, seed, report_to)
    trainer_class = trainer_class or (SFTTrainer if settings.fused_head else dense_head_trainer())
    # progress lines name the phase by its scratch folder (copy, openings, intent, demos, the stage's own)
    progress = progress_label or f"SFT {Path(output_dir).name}"
    trainer = trainer_class(
        model=model,
        args=args,
        train_dataset=dataset,
        processing_class=tokenizer,
        callbacks=[*callbacks, *base_rows_callbacks(model, args.weight_decay), trainer_progress(progress)],
    )
    tokens = sum(len(ids) for ids in trainer.train_dataset["input_ids"])
    start = time.perf_counter()
    prepare_seconds = start - prepared
    with score_labelled_positions_only():  # TRL's LM head on the labelled positions (hf_door)
        trainer.train()
    seconds = time.perf_counter() - start
    curves = list(trainer.state.log_history)
    # Non-pad tokens trained on, as TRL counts them for its `num_tokens` metric (its last log may be a few steps old).
    counted = [c["num_tokens"] for c in curves if "num_tokens" in c]
    trained_tokens = sft_trained_tokens(trainer) or int(max(counted, default=0))
    trained_tokens = trained_tokens or int(tokens * settings.epochs)
    drop_fused_lm_head(trainer.model)  # else a deep copy of it would run this object's weights (hf_door)
    return SFTResult(
        model=trainer.model,
        curves=curves,
        train_tokens=trained_tokens,
        seconds=seconds,
        prepare_seconds=prepare_seconds,
        dataset_tokens=tokens,
    )


@functools.cache
def dense_head_trainer() -> type:
    """TRL's ``SFTTrainer`` whose loss, on CPU, has the LM head project only the labelled positions, densely
    (:class:`~sparring.train.lm_head.LossTokensHead`); built on first use (importing TRL is slow)."""
    from trl import SFTTrainer

    from sparring.train.lm_head import LossTokensHead, plain_head

    class DenseHeadSFTTrainer(SFTTrainer):
        """``SFTTrainer`` whose ``compute_loss`` (Trainer's public hook) hands TRL's own a :class:`LossTokensHead`
        for the model on CPU, where TRL's fused head runs its torch fallback: TRL's loss, normalisation and logged
        metrics unchanged, the head one matmul and one log-softmax over the labelled positions. Whatever reads the
        full logits (``compute_loss_func``, label smoothing), the MoE aux loss, and models that scale or cap their
        logits keep TRL's path."""

        def compute_loss(self, model, inputs, return_outputs=False, num_items_in_batch=None):
            if (
                return_outputs
                or inputs["input_ids"].device.type != "cpu"
                or self.compute_loss_func is not None
                or self.label_smoother is not None
                or self.aux_loss_enabled
                or not plain_head(model.config)
            ):
                return super().compute_loss(model, inputs, return_outputs, num_items_in_batch)
            return super().compute_loss(LossTokensHead(model), inputs, num_items_in_batch=num_items_in_batch)

    return DenseHeadSFTTrainer


def _cuda() -> bool:
    import torch

    return torch.cuda.is_available()
