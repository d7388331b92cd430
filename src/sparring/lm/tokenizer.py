"""Train the byte-level BPE tokenizer shared by the agent and the customer.

Vocabulary, in id order: the special tokens of :mod:`sparring.lm.chat` (``<|pad|>`` is 0), the 256 byte
symbols, the learned merges, then the added tokens: ``<intent>``, ``<call>``, ``</call>`` and one token per
intent label and per tool name. Those last are added with ``lstrip=True`` and *not* special, so
``decode(skip_special_tokens=True)`` (as TRL does) keeps them and a name costs the model one prediction.
The price of ``lstrip``: a name written after whitespace in free text ("use lookup_account") swallows that
whitespace and decodes as "uselookup_account". The chat format never puts a name after whitespace (it
follows ``<intent>``, ``<call>`` or a JSON quote), so rendered conversations decode back exactly.

Pre-tokenization is GPT-2's regex with digits in runs of at most three, so an object id such as ``tx_042``
ends in one token that the agent copies from a tool result into its call (both JSON, so the id tokenizes
alike in both), and numbers never become a zoo of rare long-digit tokens. Giving whitespace tokens of its
own would make prose values tokenize as they do in JSON too, but it wrecked generation (a tiny model's context
filled with space tokens and it looped; docs/results.md, "Figures moved out of the code").

The tokenizer's ``eos_token`` is the end-of-turn token ``<|end|>`` (``bos_token`` is ``<|endoftext|>``):
TRL stops generation and cuts completions at ``eos_token_id``, and every turn, the agent's and the
customer's, ends with ``<|end|>``. A pretrained ChatML model's tokenizer (:func:`extend_pretrained_tokenizer`)
ends turns with its own ``<|im_end|>`` instead.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator, Sequence

from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, pre_tokenizers, trainers
from transformers import PreTrainedTokenizerBase, PreTrainedTokenizerFast

from sparring.lm.chat import (
    ASSISTANT,
    CALL_MARKERS,
    CHATML_END,
    CHATML_FORMAT,
    CHATML_START,
    END_OF_TEXT,
    NAME_PATTERN,
    PAD,
    SPARRING_FORMAT,
    SPECIAL_TOKENS,
    SYSTEM,
    TOOL,
    USER,
    ChatFormat,
    chat_format,
    known_tools,
)
from sparring.world.taxonomy import load_taxonomy
from sparring.world.vocab import TOOLS

# GPT-2's split, except \p{N}{1,3} instead of \p{N}+: digits in runs of at most three.
_SPLIT = r"""'(?i:[sdmt]|ll|ve|re)| ?\p{L}+| ?\p{N}{1,3}| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"""
_NAME = re.compile(NAME_PATTERN)  # what chat.parse_agent_message reads back as an intent or tool name
SOURCE_KEY = "sparring_tokenizer"  # which tokenizer: {"source": "trained_bpe"} or {"source": "pretrained", "base"}


def _without(texts: Iterable[str], tokens: Sequence[str]) -> Iterator[str]:
    """The texts cut around the added tokens, so BPE spends no merges on strings that are already tokens."""
    cut = re.compile("|".join(re.escape(t) for t in sorted(tokens, key=len, reverse=True)))
    for text in texts:
        for piece in cut.split(text):
            if piece:
                yield piece


def train_tokenizer(
    texts: Iterable[str],
    vocab_size: int,
    intents: Sequence[str],
    *,
    tools: Sequence[str] | None = None,
    min_frequency: int = 2,
) -> PreTrainedTokenizerFast:
    """Train a byte-level BPE on ``texts`` and wrap it with the chat template, left padding and all markers.

    ``vocab_size`` bounds the whole vocabulary, added tokens included (a small corpus may give fewer).
    ``tools`` defaults to every tool of the taxonomy plus ``end_conversation`` and ``transfer_to_human``.
    """
    names = _names(intents, tools)
    added = [*CALL_MARKERS, *names]
    merges_budget = vocab_size - len(added)
    alphabet = pre_tokenizers.ByteLevel.alphabet()
    if merges_budget < len(SPECIAL_TOKENS) + len(alphabet):
        raise ValueError(
            f"vocab_size={vocab_size} leaves no room for merges: {len(SPECIAL_TOKENS)} special tokens, "
            f"{len(alphabet)} bytes and {len(added)} added tokens need more"
        )

    tok = Tokenizer(models.BPE())  # no unk token: every byte is in the alphabet
    tok.pre_tokenizer = pre_tokenizers.Sequence(
        [
            pre_tokenizers.Split(Regex(_SPLIT), behavior="isolated"),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
        ]
    )
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=merges_budget,
        min_frequency=min_frequency,
        special_tokens=list(SPECIAL_TOKENS),
        initial_alphabet=alphabet,
        show_progress=False,
    )
    tok.train_from_iterator(_without(texts, [*SPECIAL_TOKENS, *added]), trainer=trainer)
    return _with_sparring_tokens(tok, names)


def extend_pretrained_tokenizer(
    name_or_path: str, intents: Sequence[str], *, tools: Sequence[str] | None = None
) -> PreTrainedTokenizerFast:
    """A pretrained model's own tokenizer with sparring's tokens appended: every token it had keeps its id, so the
    checkpoint's embeddings are read as they were trained, and only the added tokens (markers, names; the ones it
    lacks) get new ids and new embedding rows.

    The chat keeps the model's own turn markers where it speaks ChatML (``<|im_start|>role\\n ... <|im_end|>``:
    SmolLM2, Qwen2.x, ...), so the roles and the stop token are ones its weights were trained on; sparring's
    template adds only the agent's syntax (intent, calls) inside the turns. Any other model gets sparring's own
    role markers and ``<|end|>``, added as new tokens."""
    from transformers import AutoTokenizer  # the pretrained one's own files, offline aliases resolved

    from sparring.lm.pretrained import resolve_model_path

    base = AutoTokenizer.from_pretrained(resolve_model_path(name_or_path))
    if not base.is_fast:
        raise ValueError(f"{name_or_path}: sparring needs a fast (tokenizers) tokenizer, got {type(base).__name__}")
    tok = Tokenizer.from_str(base.backend_tokenizer.to_str())
    tok.no_padding()
    tok.no_truncation()
    chatml = CHATML_START in (base.chat_template or "") and {CHATML_START, CHATML_END} <= base.get_vocab().keys()
    return _with_sparring_tokens(tok, _names(intents, tools), CHATML_FORMAT if chatml else SPARRING_FORMAT)


def _names(intents: Sequence[str], tools: Sequence[str] | None) -> list[str]:
    """Intent and tool names and call words, each one added token; refuses a name the parser cannot read back."""
    names = list(dict.fromkeys([*intents, *(sorted(known_tools()) if tools is None else tools)]))
    bad = [n for n in names if not _NAME.fullmatch(n)]
    if bad:
        raise ValueError(f"intent/tool names must match {NAME_PATTERN} to be parsed back: {bad[:5]}")
    return names + [w for w in call_words() if w not in names]


def _with_sparring_tokens(
    tok: Tokenizer, names: Sequence[str], fmt: ChatFormat = SPARRING_FORMAT
) -> PreTrainedTokenizerFast:
    """``tok`` with sparring's special tokens (the role markers only for its own format), call markers and names
    added, wrapped with ``fmt``'s chat template."""
    specials = SPECIAL_TOKENS if fmt is SPARRING_FORMAT else (PAD, END_OF_TEXT)
    tok.add_special_tokens([AddedToken(t, special=True, normalized=False) for t in specials])
    # Markers need no lstrip: canonical messages never put a space before <intent>, <call> or </call>.
    tok.add_tokens([AddedToken(t, special=False, normalized=False) for t in CALL_MARKERS])
    tok.add_tokens([AddedToken(n, lstrip=True, special=False, normalized=False) for n in names])

    return PreTrainedTokenizerFast(
        tokenizer_object=tok,
        bos_token=END_OF_TEXT,
        eos_token=fmt.end,
        pad_token=PAD,
        extra_special_tokens=[SYSTEM, USER, ASSISTANT, TOOL] if fmt is SPARRING_FORMAT else [CHATML_START],
        # Must be given here: set as an attribute afterwards it is not saved, and batched generate right-pads.
        padding_side="left",
        clean_up_tokenization_spaces=False,  # " ." must decode as " .", or decode(encode(x)) != x
        chat_template=fmt.template,
    )


def stage_tokenizer(
    name_or_path: str | None, texts: Iterable[str], vocab_size: int, intents: Sequence[str]
) -> PreTrainedTokenizerFast:
    """The one place that decides which tokenizer every stage uses, and what the checkpoint records of it: a
    pretrained model (``name_or_path``) keeps its own vocabulary with sparring's tokens added
    (:func:`extend_pretrained_tokenizer`); a model from config gets a BPE trained on ``texts``. The tokenizer
    carries the answer (``init_kwargs[SOURCE_KEY]``, saved in its tokenizer_config.json)."""
    if name_or_path is not None:
        tok, source = extend_pretrained_tokenizer(name_or_path, intents), {"source": "pretrained", "base": name_or_path}
    else:
        tok, source = train_tokenizer(texts, vocab_size, intents), {"source": "trained_bpe"}
    tok.init_kwargs[SOURCE_KEY] = source  # saved in tokenizer_config.json; build_model copies it into the config
    return tok


def check_pretrained_vocabulary(tokenizer: PreTrainedTokenizerBase, name_or_path: str, base_size: int) -> None:
    """Refuse to read a pretrained checkpoint's ``base_size`` embedding rows through ids that mean other tokens:
    each of the checkpoint tokenizer's ids must name the same token in ``tokenizer``."""
    from transformers import AutoTokenizer

    from sparring.lm.pretrained import resolve_model_path

    try:
        own = AutoTokenizer.from_pretrained(resolve_model_path(name_or_path))
    except (OSError, ValueError) as exc:
        raise ValueError(f"{name_or_path}: no tokenizer of its own to check the ids against ({exc})") from None
    ids = list(range(min(base_size, len(own))))
    if len(tokenizer) < len(ids) or tokenizer.convert_ids_to_tokens(ids) != own.convert_ids_to_tokens(ids):
        raise ValueError(
            f"the tokenizer is not {name_or_path}'s own (with sparring's tokens added): its ids would read the "
            "pretrained embeddings as other tokens; rerun the tokenizer stage with this model.name_or_path"
        )


def call_words() -> list[str]:
    """Argument names and closed-vocabulary values of the tools that contain an underscore (``transaction_id``,
    ``age_policy_info``): one token each, so a call's arguments cost the model one decision per word, as intent
    and tool names do (byte-level BPE split ``age_policy_info`` into 7 tokens). Plain words (``trace``,
    ``cancel``) stay BPE's: as added tokens they would cut prose apart."""
    words = {k for spec in TOOLS.values() for k in spec.params}
    words |= {v for spec in TOOLS.values() for p in spec.params.values() for v in p.choices or ()}
    return sorted(w for w in words if "_" in w and _NAME.fullmatch(w))


def end_of_turn_id(tokenizer: PreTrainedTokenizerBase) -> int:
    """The id of the token that closes every turn (``<|end|>``, or ChatML's ``<|im_end|>``), on which generation
    stops (for either policy)."""
    end = chat_format(tokenizer).end
    token_id = tokenizer.convert_tokens_to_ids(end)
    if not isinstance(token_id, int) or token_id == tokenizer.unk_token_id:
        raise ValueError(f"tokenizer has no {end} token; was it made by the tokenizer stage?")
    return token_id


def customer_banned_ids(tokenizer: PreTrainedTokenizerBase) -> list[int]:
    """Ids a customer never writes: the agent's markers (``<intent>``, ``<call>``, ``</call>``) and the intent
    names, where the tokenizer has them as tokens of their own. The customer's goal ends with its intent as
    ``<intent>NAME`` (:func:`~sparring.agents.customer_prompt.intent_code`); barring these keeps that code, and the
    agent's call syntax, out of every customer turn. A pretrained tokenizer without them bars nothing."""
    added = tokenizer.get_added_vocab()
    return sorted({added[t] for t in (*CALL_MARKERS, *load_taxonomy().intents) if t in added})
