"""What every gym that trains through TRL's ``GRPOTrainer`` shares: the agent's, adversary's and simulator's
(:mod:`sparring.train.grpo`) and the peer cohort's (:mod:`sparring.train.peer_reward`).

Each gym plays episodes as completions in its ``rollout_func``; here are the pieces they had as near-copies:
the prompt keys a rollout receives (:func:`prompt_indices`), the pool tiled to a step's worth
(:func:`tile_to_step`), the trainer's model without the accelerator's wrapper (:func:`unwrapped`,
:func:`trained_model`), the completions in TRL's format (:func:`rollout_output`) and freezing a trainer as a
``TrainerCallback`` (:class:`FreezeWhen`). TRL's private names are touched in :mod:`sparring.hf_door` only.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from transformers import TrainerCallback

from sparring.hf_door import TOKEN_CREDIT, drop_fused_lm_head, drop_reference_adapter, zero_learning_rates


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
