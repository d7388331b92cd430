"""The policy protocol of the rollout engine, and :class:`LMPolicy`, a batched policy over a causal LM.

The engine (:mod:`sparring.rollout`) asks a policy for one message per live episode at once: ``act(requests)``
with one :class:`TurnRequest` per episode, answered by one :class:`TurnOutput` each, in order. A request holds the
conversation in the policy's own view, both as token ids (for LMs: the view plus the generation prompt) and as
HF-style messages (for scripted policies). An LM policy answers a whole batch with ONE batched decode
(:func:`sparring.lm.decode.decode`, or ``model.generate`` where the cache is not plain): on CPU and GPU alike,
per-step overhead, not arithmetic, dominates small-batch decoding.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Hashable, Iterable
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

import torch
from transformers import (
    DynamicCache,
    GenerationConfig,
    LogitsProcessorList,
    PreTrainedTokenizerBase,
    SuppressTokensLogitsProcessor,
    TemperatureLogitsWarper,
    TopPLogitsWarper,
)
from transformers.cache_utils import DynamicLayer

from sparring.hf_door import attention_implementation
from sparring.lm.chat import AGENT_SYSTEM_PROMPT
from sparring.lm.decode import decode
from sparring.lm.kv_cache import BufferLayer, attention_over, buffered_cache, native_gqa
from sparring.lm.sampling import CleanEdges, InverseCdfSampler, LogProbRecorder, whitespace_edges
from sparring.lm.tokenizer import customer_banned_ids, end_of_turn_id
from sparring.world.scenarios import Scenario

ROLES = ("agent", "customer")


@dataclass
class TurnRequest:
    """One episode's turn to speak.

    ``prompt_ids``: the policy's view of the conversation, ending in the ``<|assistant|>`` generation prompt
    (None when the rollout has no tokenizer for this side). ``messages``: the same view as HF messages
    (the agent's view for the agent; :func:`~sparring.lm.chat.swap_roles`'s view for the customer).
    ``key`` identifies the conversation across turns (KV-cache reuse); ``seed`` and ``turn`` let scripted
    policies draw randomness that does not depend on how episodes are batched. ``prefix_ids``: ids the message
    must start with, given to an LM rather than generated (:class:`~sparring.agents.openings.ContinuesUtterance`).
    """

    role: str
    prompt_ids: list[int] | None
    messages: list[dict[str, Any]]
    scenario: Scenario
    key: Hashable = None
    seed: int = 0
    turn: int = 0
    prefix_ids: list[int] | None = None


@dataclass
class TurnOutput:
    """A policy's message: its text, and for LMs the generated ids (stop token included) and their logprobs.

    ``prefix_ids``: ids the message starts with that the LM was given, not generated
    (:class:`~sparring.agents.openings.ContinuesUtterance`); ``text`` includes them, ``token_ids`` and ``logprobs``
    do not, and GRPO masks them as the environment's."""

    text: str
    token_ids: list[int] | None = None
    logprobs: list[float] | None = None
    prefix_ids: list[int] | None = None


@runtime_checkable
class Policy(Protocol):
    """What the rollout engine needs: a batched ``act``; ``tokenizer`` is None for scripted policies."""

    tokenizer: PreTrainedTokenizerBase | None

    def act(self, requests: list[TurnRequest]) -> list[TurnOutput]: ...


@dataclass
class _Cached:
    """KV of one conversation after its last turn: the ids it was computed on and per-layer (H, L, D) slices."""

    ids: list[int]
    kv: list[tuple[torch.Tensor, torch.Tensor]]


def episode_uniforms(requests: list[TurnRequest], prompts: list[list[int]], steps: int) -> torch.Tensor:
    """(rows, steps) uniforms in [0, 1), each row from a generator seeded by its request's episode seed, turn and
    prompt length (an agent speaks several times in a turn): the same for that episode in any batch."""
    rows = []
    for r, p in zip(requests, prompts, strict=True):
        key = hashlib.sha1(f"{r.seed}:{r.turn}:{len(p)}".encode()).digest()
        rows.append(torch.rand(steps, generator=torch.Generator().manual_seed(int.from_bytes(key[:8], "little"))))
    return torch.stack(rows)


def default_kv_cache_dtype(device: torch.device | str = "cpu") -> str:
    """The cache dtype batched decoding is fastest with: bfloat16 on a GPU, the model's own on a CPU. On CPUs
    without bfloat16 arithmetic every cached value read is converted; on this AMD EPYC with avx512_bf16 the
    bfloat16 attention itself ran ~2.5x slower than float32's (docs/results.md, "The decode loop and the cache")."""
    return "bfloat16" if torch.device(device).type == "cuda" else "auto"


class LMPolicy:
    """A policy over a causal LM: one batched, left-padded, KV-cached decode per ``act``.

    Logprobs follow TRL's convention: ``log_softmax(logits / temperature)`` at the sampled token, from the raw
    logits (before top-p and the edge rule); sampling is exact (inverse CDF) over the processed scores.
    ``reuse_kv`` keeps each conversation's KV cache between its turns, so a turn pre-fills only the tokens added
    since the last one (re-encoding whole conversations every turn dominated rollout time), and a prompt prefix
    of >= ``share_prefix`` tokens shared by new conversations (a system prompt) is encoded once. Models whose
    cache is not all plain full-attention ``DynamicLayer``s (sliding-window, hybrid) get the stock cache and
    full pre-fill. The engine calls :meth:`release` when conversations end.

    ``kv_cache_dtype`` (as vLLM's option of that name): "bfloat16" keeps a float32 SDPA model's buffered cache in
    bfloat16, which halves the bytes batched decoding reads but has paid off only on a GPU; "auto": the model's
    dtype; None (default): :func:`default_kv_cache_dtype` picks for the device. GRPO recomputes its logprobs in the
    model's precision anyway (TRL uses a rollout's logprobs only for vLLM importance sampling).

    ``decoder``: "loop" (default) decodes with :func:`~sparring.lm.decode.decode`, one forward per token over
    the buffered cache, the same tokens as ``generate`` without its per-token bookkeeping; "generate" calls
    ``model.generate`` (as models without a plain cache always do), for comparison.

    ``episode_draws``: each row samples from its own stream, seeded by its episode's seed, turn and prompt length
    (:func:`episode_uniforms`), so an episode's draws do not depend on which other episodes share its batch or end
    first: two agents played against this customer with the same rollout seed meet the same random numbers,
    episode by episode (common random numbers; `evaluate` turns it on). Off, the batch shares torch's stream.
    """

    def __init__(
        self,
        model: Any,
        tokenizer: PreTrainedTokenizerBase,
        role: str,
        max_new_tokens: int = 64,
        temperature: float = 1.0,
        top_p: float = 1.0,
        greedy: bool = False,
        *,
        reuse_kv: bool = True,
        share_prefix: int = 16,
        clean_edges: bool = True,
        max_prompt_tokens: int | None = None,
        kv_cache_dtype: str | None = None,
        decoder: str = "loop",
        episode_draws: bool = False,
    ) -> None:
        """Check every option and set up what :meth:`act` reads: the cache plan, the processors, the config.

        Over 60 lines: one check and one setting per option, each check with the message a caller needs."""
        if role not in ROLES:
            raise ValueError(f"role must be one of {ROLES}, got {role!r}")
        if max_new_tokens < 1 or temperature <= 0 or not 0 < top_p <= 1:
            raise ValueError("need max_new_tokens >= 1, temperature > 0 and 0 < top_p <= 1")
        self.model, self.tokenizer, self.role = model, tokenizer, role
        self.max_new_tokens, self.temperature, self.top_p, self.greedy = max_new_tokens, temperature, top_p, greedy
        self.end_id = end_of_turn_id(tokenizer)
        # What it reads first when it plays the agent, as its checkpoint keeps it ("" = no system message).
        self.system_prompt: str = getattr(model.config, "agent_system_prompt", AGENT_SYSTEM_PROMPT)
        self.pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else self.end_id
        config = model.config.get_text_config() if hasattr(model.config, "get_text_config") else model.config
        self.n_layers = config.num_hidden_layers
        try:  # buffered layers (and KV reuse) only where every layer is a plain full-attention DynamicLayer
            self.buffered = all(type(layer) is DynamicLayer for layer in DynamicCache(config=config).layers)
        except Exception:
            self.buffered = False
        self.reuse_kv = reuse_kv and self.buffered
        kv_cache_dtype = kv_cache_dtype or default_kv_cache_dtype(model.device)
        if kv_cache_dtype not in ("auto", "bfloat16"):
            raise ValueError(f"kv_cache_dtype must be 'auto' or 'bfloat16', got {kv_cache_dtype!r}")
        if decoder not in ("loop", "generate"):
            raise ValueError(f"decoder must be 'loop' or 'generate', got {decoder!r}")
        self.decoder = decoder if self.buffered else "generate"  # the loop writes into buffered layers only
        narrow = kv_cache_dtype == "bfloat16" and self.buffered and model.dtype == torch.float32
        self._narrow_kv: torch.dtype | None = torch.bfloat16 if narrow else None  # None: the model's own
        limit = getattr(config, "max_position_embeddings", None)
        self.max_prompt_tokens = max_prompt_tokens or (limit - max_new_tokens if limit else None)
        self.batch_sizes: list[int] = []  # one entry per act(): how many episodes were generated together
        self.prefill_tokens: list[int] = []  # rows x pre-filled width, per act()
        self._kv: dict[Hashable, _Cached] = {}
        self.share_prefix = share_prefix  # shortest common prompt prefix worth encoding once (0: never)
        self._prefixes: dict[tuple[int, ...], list[tuple[torch.Tensor, torch.Tensor]]] = {}
        self._last_fresh: list[int] = []
        self._edges = CleanEdges(*whitespace_edges(tokenizer, self.end_id), self.end_id) if clean_edges else None
        self._logprobs = LogProbRecorder(temperature)
        self._processors = LogitsProcessorList([self._logprobs])
        banned = customer_banned_ids(tokenizer) if role == "customer" else []
        if banned:  # its goal's intent code and the agent's markers: never part of a customer's turn
            self._processors.append(SuppressTokensLogitsProcessor(banned, device=str(self.device)))
        if not greedy:  # sampling = a draw from the temperature-scaled, top-p-filtered scores, picked greedily
            self._processors.append(TemperatureLogitsWarper(temperature))
            if top_p < 1:
                self._processors.append(TopPLogitsWarper(top_p))
        if self._edges is not None:
            self._processors.append(self._edges)
        self._sample = InverseCdfSampler() if not greedy else None
        if self._sample is not None:
            self._processors.append(self._sample)
        self.episode_draws = episode_draws
        self.generation_config = GenerationConfig(
            max_new_tokens=max_new_tokens,
            do_sample=False,
            eos_token_id=self.end_id,
            pad_token_id=self.pad_id,
            bos_token_id=tokenizer.bos_token_id,
            return_dict_in_generate=True,
            use_cache=True,
        )

    def release(self, keys: Iterable[Hashable] | None = None) -> None:
        """Drop the KV kept for these finished conversations; with None, every KV kept, shared prefixes too
        (the engine does so after each run: the next one may follow a weight update that makes them stale)."""
        if keys is None:
            self._kv, self._prefixes, self._last_fresh = {}, {}, []
        for key in keys or ():
            self._kv.pop(key, None)

    @property
    def kv_dtype(self) -> torch.dtype | None:
        """The dtype the next ``generate`` keeps its cache in (None: the model's): narrowed only under SDPA."""
        return self._narrow_kv if attention_implementation(self.model.config) == "sdpa" else None

    @property
    def device(self) -> torch.device:
        return next(self.model.parameters()).device

    def act(self, requests: list[TurnRequest]) -> list[TurnOutput]:
        """Generate one message per request in a single batched decode."""
        if not requests:
            return []
        prompts = []
        for r in requests:
            if not r.prompt_ids:
                raise ValueError("LMPolicy needs prompt_ids: give run_episodes a tokenizer for this side")
            p = [*r.prompt_ids, *(r.prefix_ids or ())]  # a given prefix is read, then generation goes on
            if self.max_prompt_tokens and len(p) > self.max_prompt_tokens:
                p = p[-self.max_prompt_tokens :]  # keep the recent context; the cache prefix check then misses
            prompts.append(p)
        self.batch_sizes.append(len(requests))
        if self._edges is not None:
            self._edges.opens = torch.tensor([not r.prefix_ids for r in requests])
        if self._sample is not None and self.episode_draws:
            self._sample.uniforms, self._sample.step = episode_uniforms(requests, prompts, self.max_new_tokens), 0
        try:
            out, total, pads = self._generate(requests, prompts)
        finally:
            if self._sample is not None:
                self._sample.uniforms = None
        seqs = out.sequences[:, total:]
        logp = self._logprobs.collect(seqs[:, -1])
        results: list[TurnOutput] = []
        lengths: list[int] = []
        for r, row, lps in zip(requests, seqs.tolist(), logp.tolist(), strict=True):
            n = row.index(self.end_id) + 1 if self.end_id in row else len(row)
            lengths.append(n)
            content = [*(r.prefix_ids or ()), *(row[: n - 1] if row[n - 1] == self.end_id else row[:n])]
            text = self.tokenizer.decode(content, skip_special_tokens=False, clean_up_tokenization_spaces=False)
            results.append(TurnOutput(text=text, token_ids=row[:n], logprobs=lps[:n], prefix_ids=r.prefix_ids))
        for i, r in enumerate(requests if self.reuse_kv else ()):  # KV of prompt + generated ids but the last
            if r.key is not None:
                end = total + lengths[i] - 1
                kv = [(lay.keys[i, :, pads[i] : end], lay.values[i, :, pads[i] : end]) for lay in out.cache.layers]
                self._kv[r.key] = _Cached(ids=prompts[i] + results[i].token_ids[:-1], kv=kv)  # type: ignore[operator]
        return results

    # --------------------------------------------------------------------------------------------- generate

    def _generate(self, requests: list[TurnRequest], prompts: list[list[int]]) -> tuple[Any, int, list[int]]:
        total = max(len(p) for p in prompts)
        pads = [total - len(p) for p in prompts]
        cached = [0] * len(prompts)  # per row: leading prompt tokens whose KV is kept from its last turn
        for i, (r, p) in enumerate(zip(requests, prompts, strict=True)):
            entry = self._kv.get(r.key) if self.reuse_kv and r.key is not None else None
            if entry is not None and 0 < len(entry.ids) < len(p) and p[: len(entry.ids)] == entry.ids:
                cached[i] = len(entry.ids)
        if self.reuse_kv and self.share_prefix:
            self._seed_shared_prefix(requests, prompts, cached)
        # Every row pre-fills the same number of trailing positions (``width``); a row whose new part is
        # shorter recomputes the tail of its cache, which is cheap next to re-encoding whole conversations.
        width = max(len(p) - c for p, c in zip(prompts, cached, strict=True))
        ids = torch.full((len(prompts), total), self.pad_id, dtype=torch.long)
        mask = torch.zeros((len(prompts), total), dtype=torch.long)
        for i, p in enumerate(prompts):
            ids[i, pads[i] :] = torch.tensor(p, dtype=torch.long)
            mask[i, pads[i] :] = 1
        device = self.device
        self.prefill_tokens.append(len(prompts) * width)
        if self._edges is not None:
            self._edges.prompt_len, self._edges.max_new_tokens = total, self.max_new_tokens
        kv_dtype = self.kv_dtype
        with torch.inference_mode(), native_gqa(device), attention_over(self.model.config, kv_dtype):
            kwargs: dict[str, Any] = {}
            if self.buffered:
                capacity = total + self.max_new_tokens
                kwargs["cache"] = self._new_cache(requests, pads, total - width, capacity, kv_dtype)
            if self.decoder == "loop":
                out = decode(
                    self.model, ids.to(device), mask.to(device), kwargs["cache"], self._processors,
                    self.max_new_tokens, self.end_id, self.pad_id,
                )  # fmt: skip
                return out, total, pads
            out = self.model.generate(
                input_ids=ids.to(device),
                attention_mask=mask.to(device),
                generation_config=self.generation_config,
                logits_processor=self._processors,
                **kwargs,
            )
        return out, total, pads

    def _seed_shared_prefix(self, requests: list[TurnRequest], prompts: list[list[int]], cached: list[int]) -> None:
        """Start new conversations from the KV of the prefix they share with each other (or with the previous
        new conversation), encoded once and kept until :meth:`release` of everything."""
        fresh = [i for i, c in enumerate(cached) if c == 0 and requests[i].key is not None]
        if not fresh:
            return
        group = [prompts[i] for i in fresh] + ([self._last_fresh] if self._last_fresh else [])
        self._last_fresh = prompts[fresh[0]]
        n = min(len(os.path.commonprefix(group)), min(len(prompts[i]) for i in fresh) - 1)
        if len(group) < 2 or n < self.share_prefix:
            return
        prefix = tuple(prompts[fresh[0]][:n])
        kv = self._prefixes.get(prefix)
        if kv is None:
            cache = DynamicCache()
            with torch.inference_mode():
                self.model(input_ids=torch.tensor([prefix], device=self.device), cache=cache, use_cache=True)
            kv = [(layer.keys[0], layer.values[0]) for layer in cache.layers]
            self._prefixes = {**dict(list(self._prefixes.items())[-3:]), prefix: kv}  # a few, most recent
        for i in fresh:
            self._kv[requests[i].key] = _Cached(ids=list(prefix), kv=kv)
            cached[i] = n

    def _new_cache(
        self, requests: list[TurnRequest], pads: list[int], start: int, capacity: int, dtype: torch.dtype | None
    ) -> DynamicCache:
        """A cache of ``dtype`` buffered layers whose first ``start`` padded positions hold each row's kept KV."""
        layers = [BufferLayer(capacity, dtype) for _ in range(self.n_layers)]
        if start > 0:
            for i, r in enumerate(requests):
                keep = start - pads[i]  # this row's cached tokens left of the pre-filled window
                if keep <= 0:
                    continue
                for layer, (k, v) in zip(layers, self._kv[r.key].kv, strict=True):
                    if not layer.is_initialized:
                        layer.allocate(k, v, len(requests))
                    layer.kbuf[i, :, start - keep : start] = k[:, :keep]
                    layer.vbuf[i, :, start - keep : start] = v[:, :keep]
            for layer in layers:
                layer.length = start
                layer.keys, layer.values = layer.kbuf[:, :, :start], layer.vbuf[:, :, :start]
        return buffered_cache(layers)
