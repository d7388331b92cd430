"""sparring's decode loop for batched LM policies: one forward of the whole batch per token over a preallocated
cache, the logits processors as ``generate`` applies them, no other per-token work.

``model.generate`` costs the tiny default models more per token than their arithmetic does (docs/results.md,
"Rollout rates on today's VM": 1,300-2,900 tokens/s batched for a 1.6M-parameter model): each step it re-prepares
its inputs, concatenates the attention mask and positions, and runs its stopping criteria. This loop writes the
step's token, mask and position into tensors allocated once, and stops when every row has ended. It follows
``generate``'s greedy decoding step for step (transformers 5.25, ``GenerationMixin._sample`` with
``do_sample=False``): positions from the attention mask's cumulative sum (padding at 0), the logits of the last
position only (``logits_to_keep=1``), processors over the ids so far, argmax of the processed scores, ended rows
padded. Sampling is a processor (``sampling.InverseCdfSampler``) as before, so its random draws are the same too.
"""

from __future__ import annotations

import functools
import inspect
from dataclasses import dataclass
from typing import Any

import torch
from transformers import LogitsProcessorList


@dataclass
class Decoded:
    """What a decode returns: the prompt's and generated ids, and the cache it wrote into."""

    sequences: torch.Tensor  # (batch, prompt + generated): a row that ended is padded to the longest row
    cache: Any


@functools.cache
def _keeps_logits(forward_owner: type) -> bool:
    """Whether a model class's forward takes ``logits_to_keep`` (then the pre-fill's logits are the last row's)."""
    return "logits_to_keep" in inspect.signature(forward_owner.forward).parameters


def _base(model: Any) -> Any:
    """The transformers model under a PEFT wrapper (whose forward passes keyword arguments on), else the model."""
    return model.get_base_model() if hasattr(model, "get_base_model") else model


# Over 40 lines: generate's greedy step, written out once in the order it runs.
def decode(
    model: Any,
    input_ids: torch.Tensor,
    attention_mask: torch.Tensor,
    cache: Any,
    processors: LogitsProcessorList,
    max_new_tokens: int,
    eos_id: int,
    pad_id: int,
) -> Decoded:
    """Up to ``max_new_tokens`` tokens per row after left-padded ``input_ids`` (mask ``attention_mask``), ``cache``
    holding the KV of the first ``cache.get_seq_length()`` positions; a row ends at ``eos_id`` (kept) and is padded
    with ``pad_id`` from there. Call under ``torch.inference_mode()``."""
    batch, total = input_ids.shape
    device = input_ids.device
    width = total - cache.get_seq_length()  # positions the pre-fill encodes
    seqs = input_ids.new_full((batch, total + max_new_tokens), pad_id)
    seqs[:, :total] = input_ids
    mask = attention_mask.new_ones((batch, total + max_new_tokens))
    mask[:, :total] = attention_mask
    positions = (attention_mask.long().cumsum(-1) - 1).masked_fill_(attention_mask == 0, 0)
    step_ids, step_positions = input_ids[:, total - width :], positions[:, total - width :]
    extra = {"logits_to_keep": 1} if _keeps_logits(type(_base(model))) else {}
    unfinished = torch.ones(batch, dtype=torch.bool, device=device)
    pad = torch.tensor(pad_id, device=device)
    length = total
    for _ in range(max_new_tokens):
        out = model(
            input_ids=step_ids,
            attention_mask=mask[:, :length],
            position_ids=step_positions,
            cache=cache,
            use_cache=True,
            **extra,
        )
        logits = out.logits[:, -1].to(dtype=torch.float32, copy=True)
        del out  # the pre-fill's hidden states go before the next step
        scores = processors(seqs[:, :length], logits)
        chosen = torch.where(unfinished, scores.argmax(dim=-1), pad)
        seqs[:, length] = chosen
        length += 1
        unfinished &= chosen != eos_id
        if not unfinished.any():
            break
        step_ids, step_positions = chosen[:, None], step_positions[:, -1:] + 1
    return Decoded(sequences=seqs[:, :length], cache=cache)
