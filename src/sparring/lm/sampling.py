"""The logits processors of :class:`~sparring.lm.policies.LMPolicy`'s decode, in the order it runs them: the
logprobs of the raw logits, messages kept free of edge whitespace, and exact sampling by inverse CDF (temperature,
top-p and the customer's banned tokens are transformers' own processors, placed between them).
"""

from __future__ import annotations

import weakref

import torch
from transformers import LogitsProcessor, PreTrainedTokenizerBase


class LogProbRecorder(LogitsProcessor):
    """First in the list, so it sees the raw logits: keeps log_softmax(logits / T) of one step until the next
    step shows which token was picked. Unlike ``output_logits``, memory stays one (batch, vocab) array."""

    def __init__(self, temperature: float) -> None:
        self.temperature, self.steps, self.prev = temperature, [], None

    def __call__(self, input_ids: torch.LongTensor, scores: torch.FloatTensor) -> torch.FloatTensor:
        if self.prev is not None:
            self.steps.append(self.prev.gather(-1, input_ids[:, -1:]).squeeze(-1))
        self.prev = torch.log_softmax(scores.float() / self.temperature, dim=-1)
        return scores

    def collect(self, last: torch.Tensor) -> torch.Tensor:
        """(batch, steps) logprobs, given the tokens picked at the last step; resets for the next call."""
        steps = [*self.steps, self.prev.gather(-1, last[:, None]).squeeze(-1)] if self.prev is not None else []
        self.steps, self.prev = [], None
        return torch.stack(steps, dim=1)


class CleanEdges(LogitsProcessor):
    """Keeps generated messages free of leading/trailing whitespace.

    The chat template trims assistant messages, so a message generated with a leading space (or ending in one)
    would render differently from the ids that were actually generated. Banning whitespace-led tokens first,
    ``<|end|>`` right after a whitespace-ending token and whitespace-ending tokens at the last step keeps
    ``decode(view ids) == apply_chat_template(messages)`` exact. It only touches those edge positions.
    """

    def __init__(self, ws_start: torch.Tensor, ws_end: torch.Tensor, end_id: int) -> None:
        self.ws_start, self.ws_end, self.end_id = ws_start, ws_end, end_id
        self.prompt_len = 0
        self.max_new_tokens = 1
        self.opens: torch.Tensor | None = None  # rows whose first generated token starts the message (None: all)

    def __call__(self, input_ids: torch.LongTensor, scores: torch.FloatTensor) -> torch.FloatTensor:
        step = input_ids.shape[1] - self.prompt_len
        if step == 0:  # a row going on from a given prefix may start with a space
            banned = self.ws_start.to(scores.device)[None, :]
            if self.opens is not None:
                banned = banned & self.opens.to(scores.device)[:, None]
            scores.masked_fill_(banned, float("-inf"))
        else:
            after_ws = self.ws_end.to(input_ids.device)[input_ids[:, -1]]
            scores[after_ws, self.end_id] = float("-inf")
        if step == self.max_new_tokens - 1:
            scores[:, self.ws_end.to(scores.device)] = float("-inf")
        return scores


_EDGES: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # tokenizer -> masks: decoding a big vocab costs


def whitespace_edges(tokenizer: PreTrainedTokenizerBase, end_id: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Boolean masks over the vocabulary: tokens whose text starts / ends with whitespace."""
    if tokenizer in _EDGES:
        return _EDGES[tokenizer]
    n = len(tokenizer)
    texts = tokenizer.batch_decode([[i] for i in range(n)], skip_special_tokens=False)
    raw = tokenizer.convert_ids_to_tokens(list(range(n)))
    start = torch.zeros(n, dtype=torch.bool)
    end = torch.zeros(n, dtype=torch.bool)
    for i, (text, tok) in enumerate(zip(texts, raw, strict=True)):
        if i == end_id or not text:
            continue
        # SentencePiece drops the "▁" of a lone token when decoding it: read it off the raw token too.
        start[i] = text[0].isspace() or (isinstance(tok, str) and tok.startswith("▁"))
        end[i] = text[-1].isspace()
    _EDGES[tokenizer] = start, end
    return start, end


class InverseCdfSampler(LogitsProcessor):
    """Exact sampling by inverse CDF, as a processor: the scores come back -inf except at the drawn token.

    ``generate`` then runs greedy; temperature and top-p are applied by processors placed before this one. One
    uniform per row instead of Gumbel noise over the whole vocabulary: the cheaper draw per step on a CPU
    (docs/results.md, "Figures moved out of the code"). ``uniforms`` (rows x steps), when set for a call, are the
    rows' own draws (:meth:`~sparring.lm.policies.LMPolicy.act` with ``episode_draws``); else torch's global
    stream, shared by the batch.
    """

    def __init__(self) -> None:
        self.uniforms: torch.Tensor | None = None
        self.step = 0

    def __call__(self, input_ids: torch.LongTensor, scores: torch.FloatTensor) -> torch.FloatTensor:
        cdf = torch.softmax(scores.float(), dim=-1).cumsum_(dim=-1)
        if self.uniforms is not None:
            u = self.uniforms[:, self.step : self.step + 1].to(scores.device)
            self.step += 1
        else:
            u = torch.rand((scores.shape[0], 1), device=scores.device)
        u = u * cdf[:, -1:]  # u < the row's total, so the first cdf entry above u is a token of non-zero probability
        drawn = torch.searchsorted(cdf, u, right=True).clamp_(max=scores.shape[-1] - 1)
        return torch.full_like(scores, float("-inf")).scatter_(1, drawn, 0.0)
