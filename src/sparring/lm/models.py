"""Causal LMs for the agent and the customer: a tiny model built from a config, or a pretrained one (+ LoRA).

Both paths go through ``AutoConfig`` / ``AutoModelForCausalLM`` so that nothing here assumes one architecture:
the same :class:`ModelSpec` fields (``hidden_size``, ``num_hidden_layers``, ...) are the standard config
names shared by llama, qwen2, qwen3, mistral, gemma and friends, which is what a cohort of model families needs.
"""

from __future__ import annotations

from typing import Any

import torch
from transformers import AutoConfig, AutoModelForCausalLM, PreTrainedModel, PreTrainedTokenizerBase

from sparring.lm.added_rows import BASE_ROWS_ATTR, train_added_rows
from sparring.lm.tokenizer import SOURCE_KEY, check_pretrained_vocabulary, end_of_turn_id
from sparring.settings import ModelSpec

DTYPES: dict[str, torch.dtype] = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}


def torch_dtype(name: str) -> torch.dtype:
    """``"bfloat16"`` -> ``torch.bfloat16``; refuses unknown names instead of silently using float32."""
    try:
        return DTYPES[name]
    except KeyError:
        raise ValueError(f"unknown dtype {name!r}; expected one of {sorted(DTYPES)}") from None


def _token_ids(tokenizer: PreTrainedTokenizerBase) -> dict[str, int]:
    """pad / bos / eos ids the model and its generation config must agree on with the tokenizer."""
    eos = end_of_turn_id(tokenizer)  # <|end|> closes every turn: it is the stop token of both policies
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else eos
    bos = tokenizer.bos_token_id if tokenizer.bos_token_id is not None else eos
    return {"pad_token_id": pad, "bos_token_id": bos, "eos_token_id": eos}


# Families without grouped-query attention: their config takes no num_key_value_heads (one K/V head per head).
NO_GQA = frozenset({"gpt_neox"})


def model_config(spec: ModelSpec, tokenizer: PreTrainedTokenizerBase) -> Any:
    """The config of a from-scratch model: vocabulary = the whole tokenizer (added tokens included).

    ``gpt_neox`` (GPT-NeoX / Pythia: parallel attention + MLP, partial rotary, LayerNorm, untied by default) is the
    cohort's third family beside llama and qwen2; it has no grouped-query attention, so ``num_kv_heads`` is unused.
    """
    gqa = {} if spec.arch in NO_GQA else {"num_key_value_heads": spec.num_kv_heads}
    return AutoConfig.for_model(
        spec.arch,
        vocab_size=len(tokenizer),
        hidden_size=spec.hidden_size,
        num_hidden_layers=spec.num_layers,
        num_attention_heads=spec.num_heads,
        intermediate_size=spec.intermediate_size,
        max_position_embeddings=spec.max_position_embeddings,
        tie_word_embeddings=spec.tie_word_embeddings,
        **gqa,
        **_token_ids(tokenizer),
    )


def build_model(spec: ModelSpec, tokenizer: PreTrainedTokenizerBase, seed: int = 0) -> PreTrainedModel:
    """A causal LM for ``spec`` whose ids agree with ``tokenizer``, in eval mode.

    From config: random init under ``seed`` (the global torch RNG is left untouched, so building a
    model never changes what a later rollout samples). Pretrained: ``tokenizer`` must be the checkpoint's own with
    sparring's tokens added (:func:`~sparring.lm.tokenizer.stage_tokenizer`), else it is refused; embeddings
    grow by the added tokens' rows, which train under LoRA (:mod:`~sparring.lm.added_rows`). Either way the
    generation config stops on ``<|end|>`` and the config records which tokenizer its ids are
    (``sparring_tokenizer``).
    """
    dtype = torch_dtype(spec.dtype)
    ids = _token_ids(tokenizer)
    if spec.name_or_path is None:
        config = model_config(spec, tokenizer)
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(seed)
            model = AutoModelForCausalLM.from_config(config, dtype=dtype)
    else:
        from sparring.lm.pretrained import resolve_model_path  # offline aliases such as smollm2-135m-instruct

        path = resolve_model_path(spec.name_or_path)
        model = AutoModelForCausalLM.from_pretrained(path, dtype=dtype, **(spec.load_kwargs or {}))
        rows = model.get_input_embeddings().num_embeddings
        check_pretrained_vocabulary(tokenizer, spec.name_or_path, rows)
        if rows < len(tokenizer):  # new rows for sparring's added tokens only (transformers: mean-initialized)
            model.resize_token_embeddings(len(tokenizer))
        for key, value in ids.items():
            setattr(model.config, key, value)
    # What the checkpoint's ids mean (the tokenizer stage's record; else what the spec implies): the project's
    # trained BPE, or a pretrained vocabulary + sparring's tokens (a from-config peer member may read one too).
    base = spec.name_or_path
    implied = {"source": "trained_bpe"} if base is None else {"source": "pretrained", "base": base}
    model.config.sparring_tokenizer = tokenizer.init_kwargs.get(SOURCE_KEY) or implied
    gen = model.generation_config
    for key, value in ids.items():
        setattr(gen, key, value)
    if spec.lora:
        from peft import LoraConfig, get_peft_model  # deferred: peft is only needed for adapters

        kwargs = {"task_type": "CAUSAL_LM", **spec.lora}
        model = get_peft_model(model, LoraConfig(**kwargs))
        if spec.name_or_path is not None:  # the rows of sparring's added tokens train beside the adapter
            train_added_rows(model, rows)
    model.eval()
    return model


def is_peft(model: Any) -> bool:
    """True for a peft model (adapters attached)."""
    return hasattr(model, "peft_config") and hasattr(model, "active_adapter")


def count_parameters(model: torch.nn.Module, trainable_only: bool = False) -> int:
    """Number of (trainable) parameters, for logging model sizes; of an embedding whose base rows a gradient mask
    holds (:func:`~sparring.lm.added_rows.train_added_rows`), only the added rows count as trainable."""
    if not trainable_only:
        return sum(p.numel() for p in model.parameters())
    held = sum(getattr(p, BASE_ROWS_ATTR, 0) * p.shape[-1] for p in model.parameters() if p.requires_grad)
    return sum(p.numel() for p in model.parameters() if p.requires_grad) - held
