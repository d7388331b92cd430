"""Chat format shared by the agent and the customer: turn markers, the agent's call syntax, its parser and the
Jinja chat template.

A conversation is one flat string of turns, each ``ROLE_MARKER + content + END_OF_TURN``, with no separators
(line breaks below are for reading only)::

    <|system|>You are a support agent for a bank.<|end|>
    <|user|>My new card still hasn't arrived.<|end|>
    <|assistant|><intent>card_arrival Let me check.<call>lookup_account {}</call><|end|>
    <|tool|>{"cards": [{"card_id": "card-0007", "status": "shipped"}]}<|end|>
    <|assistant|><intent>card_arrival It is on its way.<call>card_services {"action": "track_delivery", ...

An agent (assistant) message is ``[<intent>INTENT][ TEXT][<call>TOOL {JSON}</call>]``:

- ``<intent>`` + the Banking77 intent the agent believes in (optional: it may not know yet); at most one,
  first. Intent names are single tokens, so the name needs no closing marker; one space separates it from
  the text.
- the visible reply, which is all the customer ever sees of the message.
- at most one tool call, last: ``<call>``, the tool name, one space, a JSON object of arguments, ``</call>``.
  Arguments are written by ``json.dumps(..., ensure_ascii=False)``, which is exactly transformers' ``tojson``.

In HF-style messages the same thing is ``{"role": "assistant", "content": TEXT, "intent": INTENT,
"tool_calls": [{"type": "function", "function": {"name": TOOL, "arguments": {...}}}]}`` (see
:func:`assistant_message`); the template renders both to the string above.

A pretrained model that speaks ChatML (SmolLM2, Qwen2.x, ...) keeps its own turn markers instead:
``<|im_start|>ROLE\\n`` + content + ``<|im_end|>\\n`` (:data:`CHATML_FORMAT`), the same agent syntax inside. Which
format a tokenizer's chat uses is read off its eos, the turn's end (:func:`chat_format`).

Role markers, ``<|end|>``, ``<|endoftext|>`` and ``<|pad|>`` are special tokens. ``<intent>``, ``<call>``,
``</call>`` and every intent and tool name are ordinary added tokens: TRL decodes completions with
``skip_special_tokens=True`` and the reward functions must still see the call.
"""

from __future__ import annotations

import json
import re
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cache
from typing import Any

from sparring.world.taxonomy import load_taxonomy
from sparring.world.vocab import DOMAIN

AGENT_SYSTEM_PROMPT = DOMAIN.system_prompt  # the domain file's: what the agent reads first when it reads one


def agent_system_prompt(agent: Any) -> str:
    """The system message ``agent`` reads first ("" for none): its ``system_prompt`` if it has one (an LM policy
    reads it from its model's config, where the agent's checkpoint keeps it), else ``AGENT_SYSTEM_PROMPT``."""
    return getattr(agent, "system_prompt", AGENT_SYSTEM_PROMPT)


PAD = "<|pad|>"
END_OF_TEXT = "<|endoftext|>"  # bos / document separator
SYSTEM = "<|system|>"
USER = "<|user|>"
ASSISTANT = "<|assistant|>"
TOOL = "<|tool|>"
END_OF_TURN = "<|end|>"  # closes every turn; the stop token for generation (and the tokenizer's eos)
INTENT = "<intent>"
CALL_OPEN = "<call>"
CALL_CLOSE = "</call>"

ROLE_MARKERS: dict[str, str] = {"system": SYSTEM, "user": USER, "assistant": ASSISTANT, "tool": TOOL}
SPECIAL_TOKENS: tuple[str, ...] = (PAD, END_OF_TEXT, SYSTEM, USER, ASSISTANT, TOOL, END_OF_TURN)
CALL_MARKERS: tuple[str, ...] = (INTENT, CALL_OPEN, CALL_CLOSE)
# Tools outside the taxonomy (no intent's resolving tool): the two that end a conversation, the clarifying moves and
# reads such as banking's payment_details, retail's list_all_product_types: the domain's tools with no summary.
CONTROL_TOOLS: tuple[str, ...] = tuple(name for name in DOMAIN.tools if name not in DOMAIN.summaries)
# Intent and tool names; "?" because Banking77 really has an intent named "reverted_card_payment?".
NAME_PATTERN = r"[A-Za-z0-9_?]+"

# ChatML's markers, as SmolLM2, Qwen2.x and many other pretrained chat models write turns.
CHATML_START = "<|im_start|>"
CHATML_END = "<|im_end|>"


@dataclass(frozen=True)
class ChatFormat:
    """How one tokenizer's chat marks its turns: each message is ``prefix[role] + content + end + after``. ``end``
    is one token, the generation stop (the tokenizer's eos); ``prefix["assistant"]`` is the generation prompt;
    ``after`` (untrained) separates a turn from the next."""

    name: str
    prefix: Mapping[str, str]
    end: str
    after: str = ""

    @property
    def template(self) -> str:
        return _chat_template(self)


def _lit(s: str) -> str:
    """Template text that renders as ``s``: written out, or as a Jinja string where whitespace control would eat it."""
    return s if s.strip() == s else "{{ " + json.dumps(s) + " }}"


def _chat_template(fmt: ChatFormat) -> str:
    """The Jinja chat template of ``fmt``. The assistant's content and its end token sit inside the generation block
    (what the model must produce: TRL's assistant_only_loss checks the stop token is trained), except in a message
    with ``train: false``, which is context only; role prefixes and ``after`` are prompt."""
    plain = "".join(
        f"{{%- {'if' if i == 0 else 'elif'} message.role == '{role}' -%}}"
        f"{_lit(fmt.prefix[role])}{{{{ text(message.content) }}}}{_lit(fmt.end + fmt.after)}"
        for i, role in enumerate(("system", "user", "tool"))
    )
    return (
        "{%- macro text(content) -%}"
        "{%- if content is none -%}"
        "{%- elif content is string -%}{{ content }}"
        "{%- elif content is mapping -%}{{ content | tojson }}"
        "{%- else -%}{%- for part in content -%}{{ part.text if part.text is defined else '' }}{%- endfor -%}"
        "{%- endif -%}"
        "{%- endmacro -%}"
        "{%- macro agent(message) -%}"
        "{%- set intent = message.intent if message.intent is defined and message.intent else '' -%}"
        "{%- set body = text(message.content) | trim -%}"
        "{%- set calls = message.tool_calls if message.tool_calls is defined and message.tool_calls else [] -%}"
        "{%- if intent -%}<intent>{{ intent }}{%- if body %} {% endif -%}{%- endif -%}"
        "{{- body -}}"
        "{%- for call in calls -%}"
        "{%- set fn = call.function if call.function is defined else call -%}"
        "<call>{{ fn.name }} "
        "{{ fn.arguments if fn.arguments is string else (fn.arguments or {}) | tojson }}</call>"
        "{%- endfor -%}"
        "{%- endmacro -%}"
        "{%- for message in messages -%}"
        + plain
        + "{%- elif message.role == 'assistant' -%}"
        + _lit(fmt.prefix["assistant"])
        # `train: false` (a recovery demo's wrong turn) renders the same text outside the trained block
        + "{%- if message.train is defined and message.train is false -%}"
        "{{- agent(message) -}}" + _lit(fmt.end) + "{%- else -%}"
        "{%- generation -%}{{- agent(message) -}}" + _lit(fmt.end) + "{%- endgeneration -%}"
        "{%- endif -%}"
        + (_lit(fmt.after) if fmt.after else "")
        + "{%- else -%}{{ raise_exception('unknown chat role: ' ~ message.role) }}"
        "{%- endif -%}"
        "{%- endfor -%}"
        "{%- if add_generation_prompt -%}" + _lit(fmt.prefix["assistant"]) + "{%- endif -%}"
    )


# sparring's own markers (the trained BPE's special tokens), and ChatML for a pretrained model that speaks it.
SPARRING_FORMAT = ChatFormat("sparring", ROLE_MARKERS, END_OF_TURN)
CHATML_FORMAT = ChatFormat("chatml", {r: f"{CHATML_START}{r}\n" for r in ROLE_MARKERS}, CHATML_END, "\n")
FORMATS: tuple[ChatFormat, ...] = (SPARRING_FORMAT, CHATML_FORMAT)
# The template writes the markers literally; test_chat_tokenizer checks they match the constants above.
CHAT_TEMPLATE = SPARRING_FORMAT.template


def chat_format(tokenizer: Any) -> ChatFormat:
    """The chat format of ``tokenizer``, read off its eos token (every format's turn end)."""
    for fmt in FORMATS:
        if tokenizer.eos_token == fmt.end:
            return fmt
    ends = ", ".join(f.end for f in FORMATS)
    raise ValueError(
        f"tokenizer's eos {tokenizer.eos_token!r} ends no sparring chat format ({ends}); "
        "was it made by the tokenizer stage?"
    )


@dataclass
class ParsedCall:
    """A tool call as the agent wrote it (adapted to the world's ``ToolCall`` by the caller)."""

    name: str
    arguments: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class ParsedMessage:
    """An agent message split into its parts; ``format_ok`` is False (with ``error``) on any format fault.

    ``text`` is always the best-effort visible reply. ``intent`` and ``call`` are filled whenever they could
    be read, each on its own (a broken call does not lose a good intent, text after ``</call>`` does not lose
    the call), so metrics can use them; whether to *execute* a call on a bad message is the caller's choice.
    """

    text: str
    call: ParsedCall | None
    intent: str | None
    format_ok: bool
    error: str | None = None


@cache
def known_tools() -> frozenset[str]:
    """Every tool the agent may call: the taxonomy's tools plus ending and escalating."""
    return frozenset(load_taxonomy().tools) | frozenset(CONTROL_TOOLS)


@cache
def known_intents() -> frozenset[str]:
    """Every intent label the agent may name."""
    return frozenset(load_taxonomy().intents)


def render_call(call: ParsedCall) -> str:
    """``<call>NAME {JSON}</call>``: the inverse of the call part of :func:`parse_agent_message`."""
    return f"{CALL_OPEN}{call.name} {json.dumps(call.arguments, ensure_ascii=False)}{CALL_CLOSE}"


def render_agent_message(text: str = "", call: ParsedCall | None = None, intent: str | None = None) -> str:
    """An agent message as the model writes it (same string as the chat template's assistant content)."""
    out = f"{INTENT}{intent}" if intent else ""
    body = text.strip()
    if body:
        out += (" " if out else "") + body
    if call is not None:
        out += render_call(call)
    return out


def tool_call_dict(call: ParsedCall) -> dict[str, Any]:
    """The HF ``tool_calls`` entry for a call."""
    return {"type": "function", "function": {"name": call.name, "arguments": dict(call.arguments)}}


def assistant_message(text: str = "", call: ParsedCall | None = None, intent: str | None = None) -> dict[str, Any]:
    """An HF-style assistant message that the chat template renders as :func:`render_agent_message`."""
    message: dict[str, Any] = {"role": "assistant", "content": text.strip()}
    if intent:
        message["intent"] = intent
    if call is not None:
        message["tool_calls"] = [tool_call_dict(call)]
    return message


def message_text(content: Any) -> str:
    """Plain text of a message's content (a string, None, or HF content parts)."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, Mapping):
        return json.dumps(content, ensure_ascii=False)
    return "".join(str(p.get("text", "")) for p in content if isinstance(p, Mapping))


# ----------------------------------------------------------------------------------------------- parsing

_NAME = re.compile(r"\s*(" + NAME_PATTERN + ")")
_INTENT_ANY = re.compile(re.escape(INTENT) + r"\s*(?:" + NAME_PATTERN + ")?")
_STOP_TAIL = (END_OF_TURN, END_OF_TEXT, PAD, CHATML_END)
_STRAY = (END_OF_TEXT, PAD, SYSTEM, USER, ASSISTANT, TOOL, END_OF_TURN, CHATML_START, CHATML_END)
_MAX_ERROR = 200


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not valid JSON")


def _parse_call_body(body: str, tools: Collection[str]) -> tuple[ParsedCall | None, str | None]:
    m = _NAME.match(body)
    if m is None:
        return None, "call without a tool name"
    name = m.group(1)
    if name not in tools:
        return None, f"unknown tool {name!r}"
    raw = body[m.end() :].strip()
    if not raw:
        return None, f"{name}: missing JSON arguments"
    try:
        args = json.loads(raw, parse_constant=_reject_constant)
    except (ValueError, RecursionError) as e:
        return None, f"{name}: arguments are not valid JSON ({e})"
    if not isinstance(args, dict):
        return None, f"{name}: arguments must be a JSON object, got {type(args).__name__}"
    return ParsedCall(name=name, arguments=args), None


def _parse(s: str, tools: Collection[str], intents: Collection[str]) -> ParsedMessage:
    errors: list[str] = []
    s = s.strip()
    # A completion decoded without skip_special_tokens still ends in its stop token (and maybe padding).
    while s.endswith(_STOP_TAIL):
        s = s[: s.rfind("<|")].rstrip()
    for marker in _STRAY:
        if marker in s:
            errors.append(f"{marker} inside the message")
            s = s.replace(marker, "")

    intent = None
    found = list(_INTENT_ANY.finditer(s))
    if found:
        first = found[0]
        if len(found) > 1:
            errors.append(f"{len(found)} {INTENT} markers")
        if s[: first.start()].strip():
            errors.append(f"{INTENT} must open the message")
        name = first.group()[len(INTENT) :].strip()
        rest = s[first.end() :]
        if not name:
            errors.append(f"{INTENT} without an intent name")
        elif name in intents:
            intent = name
        else:
            # "<intent>card_arrivalSorry": the intent token is right, only the space is missing; keep both.
            intent = max((i for i in intents if name.startswith(i)), key=len, default=None)
            if intent is None:
                errors.append(f"unknown intent {name!r}")
            else:
                errors.append(f"no space after intent {intent!r}")
                rest = name[len(intent) :] + rest
        s = s[: first.start()] + " " + _INTENT_ANY.sub(" ", rest)

    call = None
    n_open, n_close = s.count(CALL_OPEN), s.count(CALL_CLOSE)
    if n_open == 0 and n_close == 0:
        text = s
    else:
        opened, closed = s.find(CALL_OPEN), s.find(CALL_CLOSE)
        text = s[: min(p for p in (opened, closed) if p >= 0)]
        if n_open != 1 or n_close != 1:
            errors.append(f"expected one {CALL_OPEN}...{CALL_CLOSE}, got {n_open} opening and {n_close} closing")
        elif closed < opened:
            errors.append(f"{CALL_CLOSE} before {CALL_OPEN}")
        else:
            if s[closed + len(CALL_CLOSE) :].strip():
                errors.append(f"text after {CALL_CLOSE}")
            call, err = _parse_call_body(s[opened + len(CALL_OPEN) : closed], tools)
            if err:
                errors.append(err)

    text = text.strip()
    if not text and call is None and not errors:
        errors.append("empty message")
    error = "; ".join(errors)[:_MAX_ERROR] if errors else None
    return ParsedMessage(text=text, call=call, intent=intent, format_ok=not errors, error=error)


def parse_agent_message(
    text: str,
    *,
    tools: Collection[str] | None = None,
    intents: Collection[str] | None = None,
) -> ParsedMessage:
    """Split an agent message into visible text, intent and call; never raises (faults: ``format_ok=False``).

    ``tools`` and ``intents`` default to the taxonomy's (plus ``end_conversation`` and ``transfer_to_human``).
    """
    if not isinstance(text, str):
        return ParsedMessage("", None, None, False, f"message is {type(text).__name__}, not str")
    try:
        return _parse(text, known_tools() if tools is None else tools, known_intents() if intents is None else intents)
    except Exception as e:  # the judge must get a verdict, never a crash
        return ParsedMessage("", None, None, False, f"unparseable message ({type(e).__name__})")


def agent_visible_text(message: Mapping[str, Any]) -> str:
    """What the customer sees of an agent message: its text, without intent or call."""
    return parse_agent_message(message_text(message.get("content"))).text


def swap_roles(messages: Sequence[Mapping[str, Any]], goal: str) -> list[dict[str, str]]:
    """The customer's view of a conversation, for the customer policy (which plays ``assistant``).

    Its hidden goal becomes the system message, the agent's visible replies become ``user`` turns (replies
    between two customer turns are merged, e.g. the text before and after a tool call), the customer's own
    turns become ``assistant`` turns; the agent's system prompt, intents, calls and tool results are dropped.
    """
    view: list[dict[str, str]] = [{"role": "system", "content": goal}]
    for message in messages:
        role = message.get("role")
        if role == "user":
            view.append({"role": "assistant", "content": message_text(message.get("content")).strip()})
        elif role == "assistant":
            visible = agent_visible_text(message)
            if not visible:
                continue
            if view[-1]["role"] == "user":
                view[-1]["content"] += "\n" + visible
            else:
                view.append({"role": "user", "content": visible})
    return view
