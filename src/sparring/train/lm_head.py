"""The LM head on the loss's tokens only, for TRL trainers on devices without Triton.

TRL 1.16's SFT and GRPO trainers call the model as ``model(..., labels=, fused_lm_head=True)`` and read per-token
log-probabilities and metrics off what it returns. Without Triton, that fused head projects every position and folds
each ``[tokens, vocabulary]`` tile through a dozen separate elementwise torch ops. :class:`LossTokensHead` stands in
for the model in that call (a trainer's ``compute_loss`` hands it to TRL's own), so TRL's loss, normalisation and
metrics stay its own while the head runs as one matmul and one log-softmax over the labelled positions alone.
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from sparring.lm.models import is_peft

# Config attributes by which a model scales or caps its logits: TRL's fused head applies them, this one does not.
LOGIT_TRANSFORMS = (
    "final_logit_softcapping",
    "logit_scale",
    "output_multiplier",
    "lm_head_multiplier",
    "logits_scaling",
)


def plain_head(config: Any) -> bool:
    """True when the model's logits are the head's projection alone (no softcap or scale for TRL to apply)."""
    text = config.get_text_config()
    return all(getattr(text, name, None) is None for name in LOGIT_TRANSFORMS)


class LossTokensHead:
    """A trainer's model as TRL's fused LM head calls it, ``model(input_ids=, labels=, fused_lm_head=True, ...)`` ->
    per-token ``log_probs``, ``entropy`` and ``is_top1`` of the next-token labels at ``temperature`` (0 where the
    label is -100 or ``keep`` is 0) and ``label_mask``, with the head run only on those positions. ``keep``: a mask
    over the input positions (None: every labelled one). Entropy and ``is_top1`` only feed TRL's metrics, so they
    carry no gradient. A peft model runs through its adapted base model."""

    def __init__(self, model: Any, keep: Any = None, temperature: float = 1.0) -> None:
        self.model, self.temperature = model, temperature
        self.keep = None if keep is None else keep.bool()

    def __call__(self, *, input_ids: Any, labels: Any, fused_lm_head: bool = True, **features: Any) -> Any:
        import torch

        model = self.model.get_base_model() if is_peft(self.model) else self.model
        features.pop("use_cache", None)
        hidden = model.base_model(input_ids=input_ids, use_cache=False, **features).last_hidden_state[:, :-1]
        labels = labels[:, 1:]
        keep = labels != -100
        if self.keep is not None:
            keep &= self.keep[:, 1:]
        head = model.get_output_embeddings()
        logits = torch.nn.functional.linear(hidden[keep], head.weight, head.bias).float() / self.temperature
        logp = logits.log_softmax(-1)
        picked = logp.gather(-1, labels[keep][:, None])[:, 0]
        with torch.no_grad():
            entropy = -(logp.exp() * logp).sum(-1)
            top1 = picked >= logp.amax(-1)  # TRL's is_top1 up to exact ties

        def scatter(values: Any) -> Any:
            return torch.zeros(keep.shape, dtype=values.dtype, device=values.device).masked_scatter(keep, values)

        return SimpleNamespace(
            log_probs=scatter(picked), entropy=scatter(entropy), is_top1=scatter(top1), label_mask=keep, aux_loss=None
        )
