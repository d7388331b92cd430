"""The KV cache of :class:`~sparring.lm.policies.LMPolicy`'s batched decoding on CPU: a buffer written in place,
grouped K/V heads read as they are, and (optionally) kept in bfloat16, with the attention function that reads it."""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import torch
from transformers import DynamicCache
from transformers.cache_utils import DynamicLayer
from transformers.integrations.sdpa_attention import sdpa_attention_forward
from transformers.masking_utils import AttentionMaskInterface, sdpa_mask
from transformers.modeling_utils import AttentionInterface

from sparring.hf_door import sdpa_force_gqa_variable, set_attention_implementation


class BufferLayer(DynamicLayer):
    """A ``DynamicLayer`` that writes into a buffer allocated once per ``generate``.

    The stock layer ``torch.cat``s the whole cache at every decoding step; on CPU those copies took a third of
    rollout time. Keys/values are exposed as views of the buffer, so attention reads them without copying.
    """

    def __init__(self, capacity: int, dtype: torch.dtype | None = None) -> None:
        super().__init__()
        self.capacity, self.length, self.buffer_dtype = capacity, 0, dtype

    def allocate(self, like_k: torch.Tensor, like_v: torch.Tensor, batch: int) -> None:
        """Zeroed (batch, heads, capacity, dim) buffers on the device of ``like_*`` (H, L, D) slices, in the
        layer's dtype (None: theirs)."""
        self.device = like_k.device
        dtype = self.buffer_dtype or like_k.dtype
        self.kbuf = like_k.new_zeros((batch, like_k.shape[-3], self.capacity, like_k.shape[-1]), dtype=dtype)
        self.vbuf = like_v.new_zeros((batch, like_v.shape[-3], self.capacity, like_v.shape[-1]), dtype=dtype)
        self.keys, self.values = self.kbuf[:, :, :0], self.vbuf[:, :, :0]
        self.is_initialized = True

    def lazy_initialization(self, key_states: torch.Tensor, value_states: torch.Tensor) -> None:
        self.allocate(key_states[0], value_states[0], key_states.shape[0])

    def update(self, key_states: torch.Tensor, value_states: torch.Tensor, *args: Any, **kwargs: Any) -> Any:
        if not self.is_initialized:
            self.lazy_initialization(key_states, value_states)
        end = self.length + key_states.shape[-2]
        if end > self.capacity:  # never with a correct capacity; stay correct anyway
            self.kbuf = torch.cat([self.kbuf, torch.zeros_like(self.kbuf)], dim=2)
            self.vbuf = torch.cat([self.vbuf, torch.zeros_like(self.vbuf)], dim=2)
            self.capacity *= 2
        self.kbuf[:, :, self.length : end] = key_states
        self.vbuf[:, :, self.length : end] = value_states
        self.length = end
        self.keys, self.values = self.kbuf[:, :, :end], self.vbuf[:, :, :end]
        return self.keys, self.values


def buffered_cache(layers: list[BufferLayer]) -> DynamicCache:
    """A ``DynamicCache`` over ``layers`` (one :class:`BufferLayer` per decoder layer) that never makes its own."""
    cache = DynamicCache()
    cache.layers = layers
    cache.layer_class_to_replicate = None
    return cache


@contextmanager
def native_gqa(device: torch.device) -> Iterator[None]:
    """On CPU, let SDPA read grouped K/V heads directly instead of repeating them for every query head.

    transformers only does so without an attention mask (CUDA kernels need that), so left-padded batches
    copied the whole cache per layer and step: attention ran ~3x slower. Same numbers either way.
    """
    if device.type != "cpu":
        yield
        return
    switch = sdpa_force_gqa_variable()  # read by transformers' sdpa_attention at every call
    if os.environ.get(switch) is not None:
        yield
        return
    os.environ[switch] = "1"
    try:
        yield
    finally:
        os.environ.pop(switch, None)


_LOW_PRECISION_KV = "sparring_sdpa_low_precision_kv"


def _sdpa_low_precision_kv(
    module: torch.nn.Module,
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    attention_mask: torch.Tensor | None,
    **kwargs: Any,
) -> tuple[torch.Tensor, Any]:
    """transformers' SDPA over a KV cache kept in a lower precision than the model. Decoding (one query per row)
    reads the narrow cache as it is, the query cast to its dtype: that step is bound by reading the cache. A
    pre-fill widens the cache instead: it is bound by arithmetic, which CPUs do faster in float32."""
    if query.shape[-2] > 1:
        key, value = key.to(query.dtype), value.to(query.dtype)
    elif attention_mask is not None and attention_mask.is_floating_point():
        attention_mask = attention_mask.to(key.dtype)
    out, weights = sdpa_attention_forward(module, query.to(key.dtype), key, value, attention_mask, **kwargs)
    return out.to(query.dtype), weights


AttentionInterface.register(_LOW_PRECISION_KV, _sdpa_low_precision_kv)
AttentionMaskInterface.register(_LOW_PRECISION_KV, sdpa_mask)  # the masks SDPA gets


@contextmanager
def attention_over(config: Any, kv_dtype: torch.dtype | None) -> Iterator[None]:
    """While generating, let an SDPA model attend over a cache of ``kv_dtype`` (None: no change)."""
    if kv_dtype is None:
        yield
        return
    set_attention_implementation(config, _LOW_PRECISION_KV)
    try:
        yield
    finally:
        set_attention_implementation(config, "sdpa")
