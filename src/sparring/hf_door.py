"""The one door to TRL's and transformers' private names: every place sparring reads or writes something the
libraries do not promise to keep, each beside a check of the version it was written for.

An upgrade of TRL or transformers fails here, loudly and naming the version, instead of somewhere inside a run:
read the touch below the failing check against the new library's source, adapt it, then move the series.
``pyproject.toml`` pins the same series, so an install cannot pick a version this module refuses.

What is touched, and why:

- TRL's ``_use_triton`` (``trl.trainer.utils``), swapped while SFT trains: its fused LM head then scores only the
  positions that carry a label, as it does on Triton devices (:func:`score_labelled_positions_only`), and the
  SFT trainer's private count of the tokens it trained on (:func:`sft_trained_tokens`);
- transformers' ``config._name_or_path``, which TRL reads to build a KL reference model from the model's folder
  (:func:`model_folder`, :func:`point_reference_at`), and TRL's frozen ``"ref"`` adapter, its KL reference of a
  peft model (:func:`drop_reference_adapter`);
- the ``forward`` TRL's trainers set on the model instance (``trl.trainer.utils.add_fused_lm_head``), removed from a
  trained model: it closes over the bound forward of the object it patched, so a ``copy.deepcopy`` of the model
  ran the original's weights and trained nothing (:func:`drop_fused_lm_head`);
- transformers' ``config._attn_implementation``, flipped while a policy decodes over a narrower KV cache
  (:func:`attention_implementation`, :func:`set_attention_implementation`), its SDPA's internal switch for
  grouped K/V heads (:func:`sdpa_force_gqa_variable`), and the private keys of a config's ``to_dict`` that loading
  sets (:func:`config_keys_set_by_loading`);
- the schedulers' ``base_lrs``, zeroed to freeze a trainer (:func:`zero_learning_rates`);
- TRL's ``_generate_and_score_completions``, whose (B,) advantages :func:`token_advantage_trainer` replaces by
  per-token ones built from what the rollout returned (TRL's loss reads a (B, T) tensor as it is), and whose
  ``old_per_token_logps`` :func:`behaviour_logprobs_trainer` sets to the sampler's log-probabilities.

Imports no sparring code, so that ``agents`` and ``train`` can both use it.
"""

from __future__ import annotations

import functools
import warnings
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from importlib import metadata
from typing import Any

TRL_SERIES = "1.16"  # the TRL minor version every TRL touch below was written for
TRANSFORMERS_SERIES = "5.25"  # the transformers minor version every transformers touch below was written for
TOKEN_CREDIT = "token_credit"  # the rollout's per-completion field read by token_advantage_trainer


class LibraryVersionError(RuntimeError):
    """A private touch of TRL or transformers met a version it was not written for."""


@functools.cache
def installed_version(package: str) -> str:
    return metadata.version(package)


def written_for(package: str, series: str, what: str) -> None:
    """Raise :class:`LibraryVersionError` unless ``package``'s installed version is in ``series`` (its minor)."""
    found = installed_version(package)
    if found != series and not found.startswith(series + "."):
        raise LibraryVersionError(
            f"{what} was written for {package} {series}.*, but {package} {found} is installed: read that touch in "
            f"src/sparring/hf_door.py against {package} {found}'s source, adapt it, and update the series there "
            "and in pyproject.toml"
        )


def _trl(what: str) -> None:
    written_for("trl", TRL_SERIES, what)


def _transformers(what: str) -> None:
    written_for("transformers", TRANSFORMERS_SERIES, what)


# TRL: the SFT LM head --------------------------------------------------------------------------------------------

TRL_SWITCH = "_use_triton"  # trl.trainer.utils' private "is this a Triton device" test


@contextmanager
def score_labelled_positions_only() -> Iterator[None]:
    """Let TRL's fused LM head project only the positions that carry a label, as it does on Triton devices.

    Elsewhere TRL scores every position to keep tile shapes static (for compiled backends such as Neuron), which
    on CPU spent a third of each step on the head. The switch is TRL's private `_use_triton` as seen by
    `trl.trainer.utils` (the kernels keep their own, so the torch tiles still run); without it, nothing changes.
    """
    _trl(f"trl.trainer.utils.{TRL_SWITCH} swapped during SFT")
    from trl.trainer import utils as trl_utils

    original = getattr(trl_utils, TRL_SWITCH, None)
    if original is None:
        warnings.warn(
            f"trl.trainer.utils.{TRL_SWITCH} is gone from this TRL version: SFT scores every position of the LM "
            "head (correct, ~25% slower on CPU); update sparring/hf_door.py's switch",
            RuntimeWarning,
            stacklevel=3,
        )
        yield
        return
    setattr(trl_utils, TRL_SWITCH, lambda device: True)
    try:
        yield
    finally:
        setattr(trl_utils, TRL_SWITCH, original)


def sft_trained_tokens(trainer: Any) -> int:
    """The non-pad tokens a TRL ``SFTTrainer`` has trained on (its private running count; 0 if it has none)."""
    _trl("SFTTrainer._total_train_tokens read")
    return int(getattr(trainer, "_total_train_tokens", 0) or 0)


# TRL: the KL reference --------------------------------------------------------------------------------------------

TRL_REFERENCE_ADAPTER = "ref"  # the KL reference TRL keeps of a peft model: a frozen copy of its start adapter


def model_folder(model: Any) -> str:
    """The folder (or hub id) ``model`` was loaded from, as TRL reads it to build a KL reference; "" if none."""
    _transformers("config._name_or_path read")
    return getattr(model.config, "_name_or_path", "") or ""


def point_reference_at(model: Any, folder: str) -> None:
    """Make TRL build ``model``'s KL reference from ``folder`` (TRL loads its reference from the config's name)."""
    _trl("the KL reference read from config._name_or_path")
    _transformers("config._name_or_path written")
    model.config._name_or_path = str(folder)


def drop_reference_adapter(model: Any) -> None:
    """Remove the frozen copy of the start adapter TRL adds to a peft model as its KL reference ("ref"): the
    trained model keeps only its own adapter, which stays a trainable adapter (never merged)."""
    _trl(f'TRL\'s "{TRL_REFERENCE_ADAPTER}" adapter')
    config = getattr(model, "peft_config", None)
    if config is not None and hasattr(model, "active_adapter") and TRL_REFERENCE_ADAPTER in config:
        model.delete_adapter(TRL_REFERENCE_ADAPTER)


TRL_FUSED_FORWARD = "_fused_forward"  # the function add_fused_lm_head binds as the instance's forward


def drop_fused_lm_head(model: Any) -> None:
    """Give ``model`` (and a peft model's base) back its class's ``forward``, removing the fused-head wrapper TRL's
    trainers bind on the instance. The wrapper's plain call is the original forward, but of the object it patched:
    a deep copy kept calling that object's weights (gradients went to them, the copy never trained)."""
    _trl("the instance forward of trl.trainer.utils.add_fused_lm_head")
    base = model.get_base_model() if hasattr(model, "get_base_model") else model
    for target in {id(model): model, id(base): base}.values():
        code = getattr(getattr(target.__dict__.get("forward"), "__func__", None), "__code__", None)
        if code is not None and code.co_name == TRL_FUSED_FORWARD:  # functools.wraps renamed it "forward"
            del target.__dict__["forward"]


# transformers: attention and config keys -------------------------------------------------------------------------


def attention_implementation(config: Any) -> str | None:
    """The attention function a model's forward uses (``"sdpa"``, ``"eager"``, a registered name)."""
    _transformers("config._attn_implementation read")
    return config._attn_implementation


def set_attention_implementation(config: Any, name: str) -> None:
    """Switch the attention function of the next forward, without reloading (transformers reads it per call)."""
    _transformers("config._attn_implementation written")
    config._attn_implementation = name


def sdpa_force_gqa_variable() -> str:
    """The environment variable transformers' SDPA reads at every call to pass grouped K/V heads to torch as they
    are (``enable_gqa``) even under an attention mask; an internal switch, not a documented setting."""
    _transformers("sdpa_attention's TRANSFORMERS_SDPA_FORCE_GQA")
    return "TRANSFORMERS_SDPA_FORCE_GQA"


def config_keys_set_by_loading() -> frozenset[str]:
    """The private keys of ``config.to_dict()`` that loading sets, never carried over from a saved config."""
    _transformers("config.to_dict()'s private keys")
    return frozenset({"_name_or_path", "_attn_implementation_autoset"})


# A trainer's learning rate ---------------------------------------------------------------------------------------


def zero_learning_rates(optimizer: Any, lr_scheduler: Any) -> None:
    """lr 0 from now on (AdamW's step and decay both scale with it): the scheduler's base rates too, or its next
    step would set them back."""
    _transformers("the Trainer's scheduler's base_lrs")
    for group in optimizer.param_groups:
        group["lr"] = 0.0
    scheduler = getattr(lr_scheduler, "scheduler", lr_scheduler)  # accelerate's wrapper, or the scheduler
    scheduler.base_lrs = [0.0] * len(scheduler.base_lrs)


# TRL: per-token advantages ---------------------------------------------------------------------------------------


def token_advantage_trainer(base: type, per_token: Callable[[float, Any], list[float]]) -> type:
    """``base`` (TRL's ``GRPOTrainer``) with per-token advantages taken from what the rollout returned.

    The rollout may return a :data:`TOKEN_CREDIT` field: per completion, what ``per_token(Â, credit)`` turns into
    that completion's token advantages from TRL's group-normalised Â. TRL merges a rollout's extra fields into the
    batch's rows; after TRL has scored them this replaces its (B,) ``advantages`` by the (B, T) tensor (a row
    shorter than the completion continues with Â), which TRL's loss, clipping and normalisation read as they are.
    A batch without the field keeps TRL's advantages."""
    _trl("the (B, T) advantages of _generate_and_score_completions")

    class TokenAdvantageTrainer(base):  # type: ignore[misc, valid-type]
        def _generate_and_score_completions(self, inputs: list[dict[str, Any]]) -> dict[str, Any]:
            import torch

            output = super()._generate_and_score_completions(inputs)
            credit = [row.get(TOKEN_CREDIT) for row in inputs]
            if not credit or any(c is None for c in credit):
                return output
            advantages = output["advantages"]
            width = output["completion_ids"].shape[1]
            rows = []
            for a, c in zip(advantages.tolist(), credit, strict=True):
                row = per_token(a, c)
                rows.append(row[:width] + [a] * (width - len(row)))
            output["advantages"] = torch.tensor(rows, dtype=advantages.dtype, device=advantages.device)
            return output

    return TokenAdvantageTrainer


def behaviour_logprobs_trainer(base: type) -> type:
    """``base`` (TRL's ``GRPOTrainer``) whose ratio's π_old is the policy that sampled the batch: the rollout's
    ``logprobs`` (TRL's ``sampling_per_token_logps``) become ``old_per_token_logps``. Without vLLM, TRL computes
    π_old only for several updates per batch and otherwise takes it to be π_θ (ρ = 1), right only when the batch
    was played by the weights being updated; a batch played a step earlier (``GRPOSettings.rollout_ahead``) needs
    ρ = π_θ / π_sampler, clipped at 1 ± ε as PPO clips it."""
    _trl("old_per_token_logps and sampling_per_token_logps of _generate_and_score_completions")

    class BehaviourLogprobsTrainer(base):  # type: ignore[misc, valid-type]
        def _generate_and_score_completions(self, inputs: list[dict[str, Any]]) -> dict[str, Any]:
            output = super()._generate_and_score_completions(inputs)
            if output.get("sampling_per_token_logps") is not None:
                output["old_per_token_logps"] = output["sampling_per_token_logps"]
            return output

    return BehaviourLogprobsTrainer
