"""The embedding rows of the tokens sparring adds to a pretrained vocabulary train under LoRA; the base's rows do not.

A pretrained base + LoRA reads sparring's special, marker, intent and tool tokens through rows that the base never
had (transformers initializes them near the mean of the others). Frozen, as peft freezes every base weight, they
stay that guess forever: the agent's ``<intent>NAME`` tokens would all start from the same blur and could only be told
apart by what LoRA does around them. peft's own answer (``trainable_token_indices``) wraps the LM head, which TRL
1.16's SFT and GRPO trainers refuse (their fused loss reads ``lm_head.weight`` directly). So the plain embedding
weight is made trainable, and a gradient hook zeroes the gradient of every row below ``base_rows``: Adam's moments
for those rows stay 0, so their update is exactly 0. Decoupled weight decay would still shrink them, so
:class:`KeepBaseRows` puts them back after each optimizer step of a trainer with ``weight_decay > 0``.

Only the added rows then differ from the base, and :func:`~sparring.lm.adapters.save_adapter` saves exactly
those, so a reloaded adapter reproduces the trained model.
"""

from __future__ import annotations

import re
from typing import Any

import torch
from transformers import TrainerCallback

from sparring.lm.chat import NAME_PATTERN

BASE_ROWS_ATTR = "sparring_base_rows"  # set on an embedding weight whose rows from this index on train


def base_weight(layer: Any) -> torch.nn.Parameter:
    """The weight under any peft wrapper (LoRA layer, modules_to_save, trainable tokens) of an embedding/head."""
    while True:
        if hasattr(layer, "base_layer"):
            layer = layer.base_layer
        elif hasattr(layer, "original_module"):
            layer = layer.original_module
        else:
            return layer.weight


def _weights(model: Any) -> list[torch.nn.Parameter]:
    """The input embedding weight, and the LM head's when it is not tied to it."""
    found: dict[int, torch.nn.Parameter] = {}
    for layer in (model.get_input_embeddings(), model.get_output_embeddings()):
        if layer is not None:
            weight = base_weight(layer)
            found.setdefault(id(weight), weight)
    return list(found.values())


def train_added_rows(model: Any, base_rows: int) -> int:
    """Make the rows from ``base_rows`` on of ``model``'s embedding (and untied LM head) trainable, the rows before
    them frozen by a gradient mask; returns how many rows train (0: the vocabulary has no added tokens)."""
    added = 0
    for weight in _weights(model):
        if weight.shape[0] <= base_rows:
            continue
        added = max(added, weight.shape[0] - base_rows)
        if getattr(weight, BASE_ROWS_ATTR, None) == base_rows:  # masked already: a second hook would do nothing new
            continue

        def mask(grad: torch.Tensor, n: int = base_rows) -> torch.Tensor:
            grad = grad.clone()
            grad[:n] = 0
            return grad

        weight.requires_grad_(True)
        weight.register_hook(mask)
        setattr(weight, BASE_ROWS_ATTR, base_rows)
    return added


def rows_from_name_words(model: Any, tokenizer: Any, base_tokenizer: Any) -> int:
    """Set the row of every token ``tokenizer`` adds to ``base_tokenizer``'s vocabulary that is a name
    (``card_arrival``: an intent, tool or call word) to the mean of the base rows of its words (`` card arrival``),
    in the input embedding and an untied head; markers keep their resize init. A name's row then starts where the
    pretrained model reads and writes what it says, instead of at the common mean. Returns the rows set."""
    name = re.compile(NAME_PATTERN)
    base_size = len(base_tokenizer)
    added = {t: i for t, i in tokenizer.get_added_vocab().items() if i >= base_size and name.fullmatch(t)}
    with torch.no_grad():
        for token, row in added.items():
            words = base_tokenizer.encode(" " + token.replace("_", " "), add_special_tokens=False)
            for weight in _weights(model):
                weight[row] = weight[words].mean(dim=0)
    return len(added)


def trained_row_weights(model: Any) -> list[torch.nn.Parameter]:
    """The embedding weights :func:`train_added_rows` made trainable (still requiring grad)."""
    return [w for w in _weights(model) if w.requires_grad and getattr(w, BASE_ROWS_ATTR, None) is not None]


class KeepBaseRows(TrainerCallback):
    """Puts the base's embedding rows back after every optimizer step: AdamW's decoupled weight decay shrinks every
    row of a decayed weight, the masked ones included. Holds one copy of those rows."""

    def __init__(self, model: Any) -> None:
        self.saved = [(w, w.detach()[: getattr(w, BASE_ROWS_ATTR)].clone()) for w in trained_row_weights(model)]

    def on_optimizer_step(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        with torch.no_grad():
            for weight, rows in self.saved:
                weight[: rows.shape[0]].copy_(rows)


def base_rows_callbacks(model: Any, weight_decay: float) -> list[TrainerCallback]:
    """``[KeepBaseRows(model)]`` when ``model`` trains added rows under weight decay, else ``[]``."""
    return [KeepBaseRows(model)] if weight_decay > 0 and trained_row_weights(model) else []
