"""The TRL door: the ``GRPOTrainer`` every gym trains with, and the pieces of a gym's ``rollout_func``. The agent's,
adversary's and simulator's gyms (:mod:`sparring.train.grpo`) and the peer cohort's
(:mod:`sparring.train.peer_reward`) build their trainer with :func:`build_trainer`.

The trainer is TRL's ``GRPOTrainer`` (``grpo_config``: CPU settings as DESIGN.md measured, ``use_cpu=True,
bf16=False, activation_checkpointing=False, report_to=[]``) with three layers, each over the last:

- with ``rollout_ahead``, π_old read from the sampler's log-probabilities
  (:func:`~sparring.hf_door.behaviour_logprobs_trainer`);
- per-token advantages when the rollout returns ``token_credit`` (:func:`~sparring.train.iapo.make_credit_trainer`),
  TRL's one Â per completion otherwise;
- the update (:func:`make_update_trainer`): TRL's loss on the step's episodes sorted by length into micro-batches
  without their all-padding columns, and on CPU the LM head on the loss's tokens only: the same loss and gradients
  (tests/test_grpo_update.py), at more tokens/s than TRL's one padded batch (benchmarks/grpo_throughput.py;
  docs/results.md, "GRPO updates at SFT's throughput").

A gym plays episodes as completions in its ``rollout_func``; the pieces every gym shares are below the trainer: the
prompt keys a rollout receives (:func:`prompt_indices`), the pool tiled to a step's worth (:func:`tile_to_step`),
the trainer's model without the accelerator's wrapper (:func:`unwrapped`, :func:`trained_model`), the completions
in TRL's format (:func:`rollout_output`) and freezing a trainer as a ``TrainerCallback`` (:class:`FreezeWhen`).
TRL's private names are touched in :mod:`sparring.hf_door` only.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from transformers import TrainerCallback

from sparring.hf_door import (
    TOKEN_CREDIT,
    behaviour_logprobs_trainer,
    drop_fused_lm_head,
    drop_reference_adapter,
    model_folder,
    point_reference_at,
    zero_learning_rates,
)
from sparring.lm.models import is_peft
from sparring.settings import GRPOSettings
from sparring.train.iapo import make_credit_trainer
from sparring.train.lm_head import LossTokensHead, plain_head

SCRATCH_PREFIX = "sparring-grpo-"  # train_side's temporary trainer folder


def tile_to_step(items: Sequence[Any], per_step: int) -> list[Any]:
    """``items`` repeated whole until there are at least ``per_step``: TRL drops an incomplete last batch of
    prompts, so a pool smaller than a step would train on nothing."""
    if not items:
        raise ValueError("nothing to tile")
    return list(items) * -(-per_step // len(items))


def prompt_indices(prompts: Sequence[Any], group: int) -> list[int]:
    """The pool indices of a rollout's ``"<index>|..."`` prompt keys, which TRL sends in groups of ``group``."""
    keys = [int(str(p).split("|", 1)[0]) for p in prompts]
    if len(keys) % group:
        raise ValueError(f"{len(keys)} prompts do not form groups of {group}")
    return keys


def first_rollout_call(trainer: Any, num_iterations: int) -> int:
    """The index of a trainer's next rollout call: 0 on a fresh trainer, the step it resumed at over
    ``num_iterations`` (TRL reuses one rollout for that many steps) on a resumed one."""
    return getattr(getattr(trainer, "state", None), "global_step", 0) // num_iterations


def unwrapped(trainer: Any) -> Any:
    """The trainer's model without the accelerator's wrapper (peft's stays)."""
    return trainer.accelerator.unwrap_model(trainer.model) if hasattr(trainer, "accelerator") else trainer.model


def trained_model(trainer: Any) -> Any:
    """The model a finished trainer trained, in eval mode, without TRL's frozen KL-reference adapter: a LoRA model
    keeps its own adapter only, still an adapter."""
    model = unwrapped(trainer)
    drop_reference_adapter(model)
    drop_fused_lm_head(model)  # else a deep copy of it would run this object's weights (hf_door)
    model.eval()
    return model


def rollout_output(
    prompt_ids: Sequence[list[int]],
    completion_ids: Sequence[list[int]],
    logprobs: Sequence[list[float]],
    env_mask: Sequence[list[int]],
    rewards: Sequence[float],
    credit: Sequence[Any] | None = None,
) -> dict[str, list]:
    """A ``rollout_func``'s answer: one completion per prompt, ``env_mask`` 1 on the trained side's own tokens,
    its reward as ``side_reward`` (each gym's reward function reads it), and with ``credit`` the per-completion
    ``token_credit`` a :func:`~sparring.hf_door.token_advantage_trainer` turns into token advantages."""
    out = {
        "prompt_ids": list(prompt_ids),
        "completion_ids": list(completion_ids),
        "logprobs": list(logprobs),
        "env_mask": list(env_mask),
        "side_reward": list(rewards),
    }
    if credit is not None:
        out[TOKEN_CREDIT] = list(credit)
    return out


class FreezeWhen(TrainerCallback):
    """Learning rate 0 from the first step at whose start ``frozen()`` holds (the optimizer's and the scheduler's
    base rates: AdamW's step and decay both scale with it), so the model's weights stay put from there on."""

    def __init__(self, frozen: Callable[[], bool]) -> None:
        self.frozen = frozen

    def on_step_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        if self.frozen():
            zero_learning_rates(kwargs["optimizer"], kwargs["lr_scheduler"])


# The trainer: TRL's GRPOTrainer, its config and its reward ----------------------------------------------------


def build_trainer(
    model: Any,
    tokenizer: Any,
    rollout_func: Callable[[list[Any], Any], dict[str, list]],
    n_prompts: int,
    settings: GRPOSettings,
    output_dir: Path,
    *,
    reward_name: str = "reward",
    report_to: Sequence[str] = (),
    callbacks: Sequence[Any] = (),
    seed: int = 0,
    save_every: int = 0,
) -> Any:
    """A ``GRPOTrainer`` over ``n_prompts`` prompt keys ``"<i>|"``-prefixed; rewards reach it as ``side_reward``."""
    from datasets import Dataset
    from trl import GRPOTrainer

    from sparring.lm.added_rows import base_rows_callbacks
    from sparring.progress import trainer_progress

    os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")  # rollout_func is "experimental" in TRL 1.16
    if settings.beta and not is_peft(model) and not _loadable(model):
        # TRL builds the KL reference from the model's folder: give a from-config model one (its start weights).
        # A peft model needs none: TRL keeps its start adapter as a frozen "ref" adapter (dropped after training).
        ref = Path(output_dir) / "reference"
        model.save_pretrained(ref, safe_serialization=True)
        point_reference_at(model, str(ref))
    dataset = Dataset.from_list([{"prompt": f"{i}|"} for i in range(n_prompts)])
    # One trainer class: per-token advantages when the rollout returns token_credit, TRL's Â otherwise.
    base = behaviour_logprobs_trainer(GRPOTrainer) if settings.rollout_ahead else GRPOTrainer
    trainer_class = make_update_trainer(make_credit_trainer(base))
    args = grpo_config(settings, output_dir, report_to, seed, save_every)
    return trainer_class(
        model=model,
        reward_funcs=[_reward_func(reward_name)],
        args=args,
        train_dataset=dataset,
        processing_class=tokenizer,
        rollout_func=rollout_func,
        callbacks=[
            *callbacks,
            *base_rows_callbacks(model, args.weight_decay),
            trainer_progress(_label(reward_name, output_dir)),
        ],
    )


def _label(reward_name: str, output_dir: Path) -> str:
    """What a GRPO trainer's progress lines are called: its reward, and its folder unless that is train_side's
    temporary scratch (a peer member's folder is its name)."""
    folder = Path(output_dir).name
    return f"GRPO {reward_name}" if folder.startswith(SCRATCH_PREFIX) else f"GRPO {reward_name} {folder}"


def on_cuda() -> bool:
    """Whether training runs on a CUDA device (else on CPU)."""
    import torch

    return torch.cuda.is_available()


def _loadable(model: Any) -> bool:
    """Whether ``model`` was loaded from a folder TRL can load its KL reference from."""
    name = model_folder(model)
    return bool(name) and Path(name).is_dir()


def _reward_func(name: str) -> Callable[..., list[float]]:
    """TRL's reward function ``name``: the ``side_reward`` each gym's rollout returned."""

    def reward(prompts: list[Any], completions: list[Any], side_reward: list[float], **_: Any) -> list[float]:
        return [float(r) for r in side_reward]

    reward.__name__ = name  # TRL logs rewards/<name>/mean
    return reward


def grpo_config(
    settings: GRPOSettings, output_dir: Path, report_to: Sequence[str] = (), seed: int = 0, save_every: int = 0
) -> Any:
    """The ``GRPOConfig`` of ``settings``: one generation batch (= G x scenarios_per_step episodes) per step;
    ``save_every`` > 0 checkpoints the trainer (weights, optimizer, scheduler, RNG) every that many steps."""
    from trl import GRPOConfig

    cuda = on_cuda()
    batch = settings.num_generations * settings.scenarios_per_step
    return GRPOConfig(
        output_dir=str(output_dir),
        per_device_train_batch_size=batch // settings.gradient_accumulation_steps,
        gradient_accumulation_steps=settings.gradient_accumulation_steps,
        num_generations=settings.num_generations,
        max_steps=settings.max_steps,
        learning_rate=settings.learning_rate,
        warmup_steps=settings.warmup_steps,
        lr_scheduler_type=settings.lr_scheduler,
        max_grad_norm=settings.max_grad_norm,
        adam_beta2=settings.adam_beta2,
        beta=settings.beta,
        epsilon=settings.epsilon,
        epsilon_high=settings.epsilon_high,
        num_iterations=settings.num_iterations,
        loss_type=settings.loss_type,
        scale_rewards=settings.scale_rewards,
        temperature=settings.temperature,
        # dr_grpo's normaliser: the most tokens a side can generate in one episode.
        max_completion_length=settings.max_turns * settings.max_calls_per_turn * settings.max_new_tokens,
        logging_steps=settings.logging_steps,
        seed=seed,
        data_seed=seed,
        use_cpu=not cuda,
        bf16=cuda,
        activation_checkpointing=False,
        save_strategy="steps" if save_every else "no",
        save_steps=save_every or 500,
        save_total_limit=2 if save_every else None,  # the last two: a kill mid-save leaves the one before whole
        report_to=list(report_to),
        dataloader_num_workers=0,
        disable_tqdm=True,
        log_completions=False,
    )


# The update: TRL's loss on length-bucketed micro-batches, the LM head on the loss's tokens only -------------------

BUCKET_OVERHEAD = 64  # positions one more micro-batch costs (its fixed per-call work), in length_buckets' sum
MOST_BUCKETS = 8
ROW_MEAN_LOSSES = ("grpo", "sapo", "luspo", "dr_grpo")  # TRL averages these over the batch's rows
TOKEN_MEAN_LOSSES = ("bnpo",)  # over the batch's loss tokens
GLOBAL_LOSSES = ("dapo", "cispo", "vespo")  # over num_items_in_batch (the generation batch's): a part adds as it is
PROMPT_KEYS = ("prompt_ids", "prompt_mask")  # left-padded; every other (B, T) tensor is the right-padded completion
UPDATE_KEYS = frozenset(
    (*PROMPT_KEYS, "completion_ids", "completion_mask", "tool_mask", "advantages", "num_items_in_batch")
    + ("old_per_token_logps", "sampling_per_token_logps", "ref_per_token_logps", "importance_sampling_ratio")
)


def length_buckets(
    prompt_lengths: Sequence[int],
    completion_lengths: Sequence[int],
    most: int = MOST_BUCKETS,
    overhead: int = BUCKET_OVERHEAD,
) -> list[list[int]]:
    """The batch's rows sorted by length and cut into the number (1..``most``) of contiguous, near-equal groups
    that runs the fewest positions: a group pads to its longest prompt plus its longest completion (TRL's
    layout), and each group costs ``overhead`` positions more."""
    n = len(prompt_lengths)
    order = sorted(range(n), key=lambda i: (prompt_lengths[i] + completion_lengths[i], prompt_lengths[i]))
    best: tuple[int, list[list[int]]] | None = None
    for k in range(1, min(most, n) + 1):
        groups = [order[j * n // k : (j + 1) * n // k] for j in range(k)]
        cost = overhead * k + sum(
            len(g) * (max(prompt_lengths[i] for i in g) + max(completion_lengths[i] for i in g)) for g in groups
        )
        if best is None or cost < best[0]:
            best = (cost, groups)
    return best[1] if best else []


def bucket_inputs(inputs: dict[str, Any], rows: Sequence[int]) -> dict[str, Any]:
    """``rows`` of a GRPO batch (as TRL's trainer scored it for its loss), without the columns that are
    padding in every one of them: the prompt's left and the completion's right."""
    import torch

    batch, width = inputs["prompt_ids"].size(0), inputs["completion_ids"].size(1)
    index = torch.tensor(list(rows), device=inputs["prompt_ids"].device)
    prompt = int(inputs["prompt_mask"][index].sum(1).max())
    completion = int(inputs["completion_mask"][index].sum(1).max())
    out: dict[str, Any] = {}
    for key, value in inputs.items():
        if torch.is_tensor(value) and value.dim() >= 1 and value.size(0) == batch:
            value = value[index]
            if key in PROMPT_KEYS:
                value = value[:, value.size(1) - prompt :]
            elif value.dim() == 2 and value.size(1) == width:
                value = value[:, :completion]
        out[key] = value
    return out


def bucket_weight(loss_type: str, inputs: dict[str, Any], rows: Sequence[int]) -> Any:
    """What a part's loss is worth in the whole batch's: TRL's row means weigh it by its rows, its token mean by
    its loss tokens; the losses over the generation batch's token count add as they are."""
    if loss_type in ROW_MEAN_LOSSES:
        return len(rows) / inputs["prompt_ids"].size(0)
    if loss_type in TOKEN_MEAN_LOSSES:
        mask = inputs["completion_mask"] * inputs.get("tool_mask", 1)
        return mask[list(rows)].sum() / mask.sum().clamp(min=1.0)
    return 1.0


def make_update_trainer(base: type) -> type:
    """``base`` (TRL's ``GRPOTrainer`` or a subclass) whose update runs TRL's loss, clipping and normalisation
    unchanged on less padding and fewer LM-head positions, through ``compute_loss`` (Trainer's public hook):

    - the batch's episodes sorted by length into micro-batches (:func:`length_buckets`), each trimmed of the
      columns that are padding in all of its rows, their losses weighted back into the batch's
      (:func:`bucket_weight`; one backward, so gradients are the batch's too). TRL pads a step's episodes to the
      longest prompt plus the longest completion, so short episodes paid for the longest one's positions;
    - on CPU (TRL then scores every position of the LM head), the head only on the loss's tokens
      (:class:`LossTokensHead`), for a plain model (a peft one keeps TRL's head).

    Whatever it does not cover (several processes; an entropy bonus or quantile mask, which read the whole batch;
    MoE aux loss; multimodal inputs; loss types it does not know) goes to TRL's path as before."""

    class UpdateTrainer(base):  # type: ignore[misc, valid-type]
        def compute_loss(self, model, inputs, return_outputs=False, num_items_in_batch=None):
            import torch

            if return_outputs or not self._buckets_exact(inputs):
                return super().compute_loss(model, inputs, return_outputs, num_items_in_batch)
            groups = length_buckets(inputs["prompt_mask"].sum(1).tolist(), inputs["completion_mask"].sum(1).tolist())
            total = None
            for rows in groups:
                part = bucket_inputs(inputs, rows)
                runner = model
                if self._head_on_loss_tokens(model):
                    mask = part["completion_mask"] * part.get("tool_mask", 1)
                    keep = torch.cat([torch.zeros_like(part["prompt_mask"]), mask.to(part["prompt_mask"].dtype)], 1)
                    runner = LossTokensHead(model, keep, self.args.temperature)
                loss = super().compute_loss(runner, part, num_items_in_batch=num_items_in_batch)
                loss = loss * bucket_weight(self.args.loss_type, inputs, rows)
                total = loss if total is None else total + loss
            return total

        def _buckets_exact(self, inputs: dict[str, Any]) -> bool:
            args = self.args
            return (
                self.accelerator.num_processes == 1  # DDP and DeepSpeed expect one forward per backward
                and set(inputs) <= UPDATE_KEYS
                and args.loss_type in (*ROW_MEAN_LOSSES, *TOKEN_MEAN_LOSSES, *GLOBAL_LOSSES)
                and args.top_entropy_quantile >= 1.0
                and not args.entropy_coef
                and not args.use_adaptive_entropy
                and not getattr(self, "aux_loss_enabled", False)
            )

        def _head_on_loss_tokens(self, model: Any) -> bool:
            device = next(model.parameters()).device
            return (
                device.type == "cpu"
                and not is_peft(model)
                and not self.args.cast_lm_head_to_fp32
                and plain_head(model.config)
            )

    return UpdateTrainer
