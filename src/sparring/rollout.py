"""Batched, turn-synchronous multi-turn rollouts of an agent policy against a customer policy in the world.

Every round, ALL live episodes' customers speak in one batched ``act`` call, then all agents answer in one
call; agents whose message made a tool call see its result and act again (another batched call) until they
stop calling or reach ``max_calls_per_turn``. Episodes that end (``end_conversation``/``transfer_to_human``,
or ``max_turns`` rounds) leave the batches. Batching is what makes rollouts affordable: a ``generate`` step
over dozens of sequences costs a fraction of one step per sequence (benchmarks/rollout_throughput.py).

Each side's view is kept as a token-id list built message by message (role prefix + content ids + end token +
separator, as its tokenizer's :class:`~sparring.lm.chat.ChatFormat` writes them; generated messages keep the ids
actually generated), which is what ``apply_chat_template`` would produce for the same messages, without
re-rendering the conversation every turn.

The shortest rollout is one turn: :func:`route_utterances`, the agent's first reply to lone openings (what
``sparring route`` shows, intent accuracy, and the peer cohort's routings). Finished episodes are measured in
:mod:`sparring.metrics`.

Over 400 lines: the engine read top to bottom, its token views, its loop and the turn steps the loop calls.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import Any

import torch
from transformers import PreTrainedTokenizerBase

from sparring.agents.clarify import mark_restatement
from sparring.agents.customer_prompt import customer_goal
from sparring.agents.leaving import gives_up
from sparring.agents.slots import lexicalize, slot_values
from sparring.lm.chat import (
    AGENT_SYSTEM_PROMPT,
    ParsedMessage,
    agent_system_prompt,
    assistant_message,
    chat_format,
    parse_agent_message,
    render_agent_message,
)
from sparring.lm.policies import Policy, TurnOutput, TurnRequest
from sparring.world.bank import World
from sparring.world.events import EventLog
from sparring.world.outcome import Outcome, check_outcome
from sparring.world.scenarios import Scenario, build_world
from sparring.world.session import CUSTOMER_LEFT, Session
from sparring.world.taxonomy import load_taxonomy
from sparring.world.tools import ToolCall, execute
from sparring.world.vocab import CUSTOMER_MOVES


def agent_opening(text: str, system: str | None = AGENT_SYSTEM_PROMPT) -> list[dict[str, str]]:
    """What the agent reads when a customer opens with ``text``: ``system`` (none if empty), then the text."""
    head = [{"role": "system", "content": system}] if system else []
    return [*head, {"role": "user", "content": text.strip()}]


def route_utterances(
    agent_policy: Policy,
    texts: Sequence[str],
    *,
    batch_size: int = 64,
    system: str | None = None,
) -> list[dict[str, Any]]:
    """The agent's first reply to each text (as the customer's opening turn), generated in batches.

    Returns ``{"intent", "tool", "reply", "format_ok"}`` per text. ``tool`` is the call the reply made, or,
    when it made none (a first reply asks for identity before acting), the taxonomy's tool for the named
    intent: where the agent would route. ``intent``/``tool`` are None when the reply names no known intent.
    ``system``: the agent's system message ("" for none; None: the policy's own, as in episodes).
    """
    tokenizer = getattr(agent_policy, "tokenizer", None)
    if tokenizer is None:
        raise ValueError("route_utterances needs an LM policy (with a tokenizer)")
    tax = load_taxonomy()
    system = agent_system_prompt(agent_policy) if system is None else system
    routes: list[dict[str, Any]] = []
    for start in range(0, len(texts), batch_size):
        chunk = texts[start : start + batch_size]
        requests = []
        for text in chunk:
            messages = agent_opening(text, system)
            ids = tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=True, return_dict=False)
            requests.append(TurnRequest(role="agent", prompt_ids=list(ids), messages=messages, scenario=None))  # type: ignore[arg-type]
        for out in agent_policy.act(requests):
            parsed = parse_agent_message(out.text)
            tool = parsed.call.name if parsed.call is not None else None
            if tool is None and parsed.intent in tax.intents:
                tool = tax.intents[parsed.intent].tool
            routes.append({"intent": parsed.intent, "tool": tool, "reply": parsed.text, "format_ok": parsed.format_ok})
    return routes


@dataclass
class Episode:
    """One finished conversation, in both views, with what it did to the world.

    ``token_ids`` is the agent's view; ``agent_mask`` is 1 on the tokens the agent generated (its ``<|end|>``
    included), ``customer_mask`` 1 on the customer's content tokens; system, role markers and tool turns are
    0 in both. ``agent_logprobs`` is aligned with ``token_ids`` (0 off the agent's tokens, and for scripted
    agents). ``customer_*`` is the same for the customer's own view (``customer_messages``: what
    :func:`~sparring.lm.chat.swap_roles` gives, except where a text did not survive encode/decode, in which
    case the messages hold the decoded text the model saw). ``log`` is the session's event log (turns and tool
    calls with argument provenance); ``rewards`` is what the judge returned (empty without a judge).
    """

    scenario: Scenario
    messages: list[dict[str, Any]]
    token_ids: list[int]
    agent_mask: list[int]
    customer_mask: list[int]
    agent_logprobs: list[float]
    customer_messages: list[dict[str, Any]]
    customer_token_ids: list[int]
    customer_self_mask: list[int]
    customer_logprobs: list[float]
    log: EventLog
    outcome: Outcome
    world: World
    session: Session
    agent_turns: list[ParsedMessage] = field(default_factory=list)
    rounds: int = 0
    ended_by: str | None = None  # end_conversation | transfer_to_human | customer_left; None: max_turns cut it off
    rewards: Any = field(default_factory=dict)


@dataclass
class RolloutStats:
    """What a rollout did, for profiling and tests: per-call batch sizes and where the time went."""

    batch_sizes: list[tuple[str, int]] = field(default_factory=list)  # (role, episodes in the call)
    act_s: dict[str, float] = field(default_factory=lambda: {"agent": 0.0, "customer": 0.0})
    total_s: float = 0.0
    generated_tokens: dict[str, int] = field(default_factory=lambda: {"agent": 0, "customer": 0})
    prompts: list[tuple[str, list[list[int]]]] | None = None  # set to [] to record every batch's prompts

    @property
    def overhead_s(self) -> float:
        """Time outside the policies: views, parsing, tools, logging, outcome checks."""
        return self.total_s - sum(self.act_s.values())


class _View:
    """One side's conversation as token ids and masks, appended message by message."""

    __slots__ = ("tok", "ids", "own", "other", "logp", "marks", "end", "memo")

    def __init__(self, tok: PreTrainedTokenizerBase | None, marks: _Marks, memo: dict[str, Any]) -> None:
        self.tok, self.marks, self.memo = tok, marks, memo  # memo: encodings shared by views of one tokenizer
        self.end = marks.end  # the id that closes a turn (-1 without a tokenizer)
        self.ids: list[int] = []
        self.own: list[int] = []  # 1 on tokens this side generated
        self.other: list[int] = []  # 1 on the other side's content tokens
        self.logp: list[float] = []

    def encode(self, text: str, memo: bool = False) -> tuple[list[int], str]:
        """Ids of ``text`` and the text they decode to, which the view's messages record: they differ when a name
        follows whitespace (its added token swallows the space). ``memo``: texts that recur across episodes."""
        if self.tok is None:
            return [], text
        hit = self.memo.get(text) if memo else None
        if hit is None:
            ids = self.tok.encode(text, add_special_tokens=False)
            hit = (ids, self.tok.decode(ids, skip_special_tokens=False, clean_up_tokenization_spaces=False))
            if memo:
                self.memo[text] = hit
        return hit

    def add(
        self,
        role: str,
        content: list[int],
        kind: int = 0,
        logprobs: list[float] | None = None,
        prefix: Sequence[int] = (),
    ) -> None:
        """Append ``role prefix + prefix + content + end + separator``; kind 1 = own (generated), 2 = the other
        side's content; ``prefix``: ids of an own message it was given, not generated (0 in both masks)."""
        if self.tok is None:
            return
        end, head, after = self.end, self.marks.prefix[role], self.marks.after
        closed = bool(content) and content[-1] == end and kind == 1
        body = content[:-1] if closed else content
        n, k, h, a = len(body), len(prefix), len(head), len(after)
        self.ids += [*head, *prefix, *body, end, *after]
        own, other = (1 if kind == 1 else 0), (1 if kind == 2 else 0)
        self.own += [*([0] * (h + k)), *([own] * n), 1 if closed else 0, *([0] * a)]
        self.other += [*([0] * (h + k)), *([other] * n), 0, *([0] * a)]
        if logprobs is not None and kind == 1:
            self.logp += [*([0.0] * (h + k)), *logprobs[:n], logprobs[n] if closed else 0.0, *([0.0] * a)]
        else:
            self.logp += [0.0] * (h + k + n + 1 + a)

    def prompt(self) -> list[int] | None:
        return [*self.ids, *self.marks.prefix["assistant"]] if self.tok is not None else None


class _Live:
    """Mutable state of one running episode."""

    def __init__(self, index: int, scenario: Scenario, seed: int, a: _View, c: _View) -> None:
        self.index, self.scenario, self.seed, self.a, self.c = index, scenario, seed, a, c
        self.start_world = build_world(scenario)
        # The chat runs in the customer's app: the scenario's customer is the logged-in caller.
        self.world, self.session = self.start_world.copy(), Session(caller_id=scenario.customer_id)
        self.messages: list[dict[str, Any]] = []  # the agent's view
        self.cmessages: list[dict[str, Any]] = []  # the customer's view
        self.heard: list[str] = []  # agent replies the customer has not seen yet
        self.values = slot_values(scenario)  # what an LM customer's [placeholders] stand for
        self.parses: list[ParsedMessage] = []
        self.turn = self.rounds = self.calls = 0
        self.done = False


@dataclass(frozen=True)
class _Marks:
    """A tokenizer's turn markers as ids: each role's prefix, the end token, the separator after it."""

    prefix: dict[str, list[int]] = field(default_factory=dict)
    end: int = -1
    after: list[int] = field(default_factory=list)


def _marker_ids(tok: PreTrainedTokenizerBase | None) -> _Marks:
    if tok is None:
        return _Marks()
    fmt = chat_format(tok)

    def ids(text: str) -> list[int]:
        return tok.encode(text, add_special_tokens=False) if text else []

    prefix = {role: ids(text) for role, text in fmt.prefix.items()}
    return _Marks(prefix, tok.convert_tokens_to_ids(fmt.end), ids(fmt.after))


def episode_seed(seed: int, scenario: Scenario, repeat: int = 0) -> int:
    """Per-episode seed for scripted randomness: independent of batch composition and episode order; ``repeat``
    (the scenario's earlier occurrences in the list) keeps copies of one scenario (a GRPO group) apart."""
    return int(hashlib.sha1(f"{seed}:{scenario.scenario_id}:{repeat}".encode()).hexdigest()[:12], 16)


def _agent_dict(text: str, parsed: ParsedMessage) -> dict[str, Any]:
    """HF message for an agent turn: structured when canonical, else the raw text (so it renders as generated)."""
    if parsed.format_ok and render_agent_message(parsed.text, parsed.call, parsed.intent) == text:
        return assistant_message(parsed.text, parsed.call, parsed.intent)
    return {"role": "assistant", "content": text}


def _compact(value: Any) -> Any:
    if isinstance(value, dict):
        kept = {k: _compact(v) for k, v in value.items()}
        # `is` for None/False: `0 == False`, and a zero balance or amount must stay visible.
        return {k: v for k, v in kept.items() if v is not None and v is not False and v not in ("", [], {})}
    if isinstance(value, list):
        return [_compact(v) for v in value]
    return value


def render_tool_result(result: dict[str, Any]) -> str:
    """A tool result as the agent reads it: JSON without null/false/empty fields or spaces, and each list of
    two or more objects as a table: a header row of field names, then one row of values per object (null
    where an object lacks the field).

    The world's account view spells out every flag of every object; a tiny model reading thousands of tokens
    of `"disputed": false` learns slower and attends worse, and nothing is lost (absent means false/none).
    Tables name each field once instead of once per object: the account view shrinks ~40%. Each row ends with
    the object's own id (its first field): a causal model then reads the id after the facts a customer
    describes the object by, so the id's position can carry them (docs/results.md, "Figures moved out of the
    code")."""
    return json.dumps(_tabulate(_compact(result)), ensure_ascii=False, separators=(",", ":"))


def _tabulate(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _tabulate(v) for k, v in value.items()}
    if isinstance(value, list) and len(value) > 1 and all(isinstance(v, dict) for v in value):
        header = list(dict.fromkeys(k for row in value for k in row))
        header = header[1:] + header[:1]  # the id (each object's first field) last, after its row's facts
        return [header, *([_tabulate(row.get(k)) for k in header] for row in value)]
    if isinstance(value, list):
        return [_tabulate(v) for v in value]
    return value


def run_episodes(
    scenarios: Sequence[Scenario],
    agent: Policy,
    customer: Policy,
    *,
    max_turns: int = 6,
    max_calls_per_turn: int = 3,
    judge: Callable[[Episode], Any] | None = None,
    seed: int = 0,
    tokenizer: PreTrainedTokenizerBase | None = None,
    agent_system: str | None = None,
    stats: RolloutStats | None = None,
) -> list[Episode]:
    """Play every scenario to the end, all episodes in lock-step; deterministic in ``seed``.

    ``max_turns`` bounds the rounds (customer message + agent reply); ``max_calls_per_turn`` the tool calls an
    agent makes before the customer speaks again. ``tokenizer`` builds the views of scripted sides (an LM side
    uses its own); with no tokenizer at all the token fields are empty. ``stats`` is filled in when given.
    ``agent_system``: the agent's system message ("" for none; None: :func:`agent_system_prompt` of ``agent``).

    Over 60 lines: the turn-synchronous engine's one loop; split, its batching state would cross functions.
    """
    if max_turns < 1 or max_calls_per_turn < 1:
        raise ValueError("max_turns and max_calls_per_turn must be >= 1")
    stats = stats if stats is not None else RolloutStats()
    agent_system = agent_system_prompt(agent) if agent_system is None else agent_system
    t0 = time.perf_counter()
    a_tok = getattr(agent, "tokenizer", None) or tokenizer or getattr(customer, "tokenizer", None)
    c_tok = getattr(customer, "tokenizer", None) or tokenizer or a_tok
    a_mark, c_mark = _marker_ids(a_tok), _marker_ids(c_tok)
    shared = a_tok is c_tok  # the customer's generated ids can then be reused verbatim in the agent's view
    run = object()  # conversation keys are unique to this call
    memos: dict[int, dict[str, Any]] = {id(a_tok): {}, id(c_tok): {}}
    a_view, c_view = partial(_View, a_tok, a_mark, memos[id(a_tok)]), partial(_View, c_tok, c_mark, memos[id(c_tok)])
    live = _start_episodes(scenarios, seed, agent_system, a_view, c_view)

    def release(eps: list[_Live] | None) -> None:  # free the KV kept for these conversations (None: all)
        for policy, role in ((agent, "agent"), (customer, "customer")):
            if hasattr(policy, "release"):
                policy.release(None if eps is None else [(run, e.index, role) for e in eps])

    try:
        cuda = list(range(torch.cuda.device_count())) if torch.cuda.is_initialized() else []
        with torch.random.fork_rng(devices=cuda):  # seeded sampling that leaves the caller's RNG state alone
            torch.manual_seed(seed)
            for round_no in range(1, max_turns + 1):
                active = [e for e in live if not e.done]
                if not active:
                    break
                for e in active:
                    _flush_heard(e)
                for e, out in zip(active, _act(customer, "customer", active, run, stats), strict=True):
                    _customer_says(e, out, c_mark.end, shared)
                    _maybe_leave(e)
                pending = [e for e in active if not e.done]
                for e in active:
                    e.calls = 0
                    e.rounds = round_no
                while pending:
                    again = []
                    for e, out in zip(pending, _act(agent, "agent", pending, run, stats), strict=True):
                        if _agent_says(e, out) and not e.done:
                            e.calls += 1
                            if e.calls < max_calls_per_turn:
                                again.append(e)
                    pending = again
                ended = [e for e in active if e.done or round_no == max_turns]
                for e in ended:
                    e.done = True
                release(ended)
    finally:
        release(None)  # nothing kept outlives the run (the next one may follow a weight update)

    episodes = [_finish(e) for e in live]
    if judge is not None:
        for ep in episodes:
            ep.rewards = judge(ep)
    stats.total_s += time.perf_counter() - t0
    return episodes


def _start_episodes(
    scenarios: Sequence[Scenario],
    seed: int,
    agent_system: str,
    agent_view: Callable[[], _View],
    customer_view: Callable[[], _View],
) -> list[_Live]:
    """A live episode per scenario, each side's view opened with its system message (the agent's ``agent_system``,
    none if empty; the customer's goal)."""
    live: list[_Live] = []
    seen: dict[str, int] = {}
    for i, sc in enumerate(scenarios):
        seen[sc.scenario_id] = seen.get(sc.scenario_id, -1) + 1
        ep = _Live(i, sc, episode_seed(seed, sc, seen[sc.scenario_id]), agent_view(), customer_view())
        if agent_system:  # "" = no system message, as agent_opening
            ids, text = ep.a.encode(agent_system, memo=True)
            ep.a.add("system", ids)
            ep.messages.append({"role": "system", "content": text})
        ids, text = ep.c.encode(customer_goal(sc))
        ep.c.add("system", ids)
        ep.cmessages.append({"role": "system", "content": text})
        live.append(ep)
    return live


def _act(policy: Policy, role: str, eps: list[_Live], run: object, stats: RolloutStats) -> list[TurnOutput]:
    """One batched ``act`` of ``policy`` playing ``role`` in every episode of ``eps``, counted in ``stats``."""
    a = role == "agent"
    requests = [
        TurnRequest(
            role=role,
            prompt_ids=(e.a if a else e.c).prompt() if getattr(policy, "tokenizer", None) is not None else None,
            messages=e.messages if a else e.cmessages,
            scenario=e.scenario,
            key=(run, e.index, role),
            seed=e.seed,
            turn=e.turn,
        )
        for e in eps
    ]
    if stats.prompts is not None:
        stats.prompts.append((role, [r.prompt_ids or [] for r in requests]))
    t = time.perf_counter()
    outs = policy.act(requests)
    stats.act_s[role] += time.perf_counter() - t
    stats.batch_sizes.append((role, len(eps)))
    if len(outs) != len(eps):
        raise RuntimeError(f"{role} policy returned {len(outs)} messages for {len(eps)} requests")
    stats.generated_tokens[role] += sum(len(o.token_ids or ()) for o in outs)
    return outs


def _flush_heard(e: _Live) -> None:
    """Give the customer the agent's replies since its last message, merged into one turn as ``swap_roles`` does,
    a restated request marked as the customer's own or not (:func:`~sparring.agents.clarify.mark_restatement`)."""
    if e.heard:
        ids, text = e.c.encode(mark_restatement("\n".join(e.heard), e.scenario.intent), memo=True)
        e.c.add("user", ids)
        e.cmessages.append({"role": "user", "content": text})
        e.heard = []


def _customer_says(e: _Live, out: TurnOutput, c_end: int | None, shared: bool) -> None:
    """Append the customer's message to both views (generated ids verbatim; scripted text encoded)."""
    if out.token_ids is None:
        ids, own_text = e.c.encode(out.text.strip(), memo=True)
        e.c.add("assistant", [*ids, e.c.end], 1)
        ids, text = e.a.encode(out.text, memo=True)
    else:
        prefix = out.prefix_ids or []  # given, not generated (ContinuesUtterance)
        e.c.add("assistant", out.token_ids, 1, out.logprobs, prefix)
        own_text, text = out.text, lexicalize(out.text, e.values)  # its placeholders, filled (agents.slots)
        if shared and text == own_text:  # the agent reads exactly the ids the customer's view holds
            body = out.token_ids[:-1] if out.token_ids and out.token_ids[-1] == c_end else out.token_ids
            ids = [*prefix, *body]
        else:  # different tokenizers, or filled placeholders: the agent reads the text in its own tokens
            ids, text = e.a.encode(text)
    e.cmessages.append({"role": "assistant", "content": own_text.strip()})
    e.a.add("user", ids, 2)
    e.messages.append({"role": "user", "content": text})
    e.session.log.add_turn("customer", text)
    e.turn += 1


def _maybe_leave(e: _Live) -> None:
    """End the session when the customer gives up before their request was carried out (agents.leaving)."""
    if gives_up(str(e.messages[-1]["content"])) and not any(
        c.name == e.scenario.tool and c.ok for c in e.session.log.tool_calls()
    ):
        e.session.ended_by = CUSTOMER_LEFT
        e.done = True


def _agent_says(e: _Live, out: TurnOutput) -> bool:
    """Append the agent's message (and its tool call's result); True when the agent acts again: a call was
    executed that was not a question to the customer."""
    text = out.text
    if out.token_ids is None:
        ids, text = e.a.encode(text, memo=True)
        e.a.add("assistant", [*ids, e.a.end], 1)
    else:
        e.a.add("assistant", out.token_ids, 1, out.logprobs)
    parsed = parse_agent_message(text)
    e.parses.append(parsed)
    e.messages.append(_agent_dict(text, parsed))
    e.session.log.add_turn("agent", text)
    e.turn += 1
    if parsed.text:
        e.heard.append(parsed.text)
    if parsed.call is None:
        return False
    result = execute(e.world, e.session, ToolCall(parsed.call.name, dict(parsed.call.arguments)))
    ids, content = e.a.encode(render_tool_result(result))
    e.a.add("tool", ids)
    e.messages.append({"role": "tool", "content": content})
    if e.session.ended:
        e.done = True
    # A question to the customer (world.vocab.CUSTOMER_MOVES) ends the agent's turn: the customer answers next.
    return not (result["ok"] and parsed.call.name in CUSTOMER_MOVES)


def _finish(e: _Live) -> Episode:
    _flush_heard(e)  # the customer's view ends with what the agent said after the customer's last message
    outcome = check_outcome(e.scenario, e.world, e.session, e.start_world)
    return Episode(
        scenario=e.scenario,
        messages=e.messages,
        token_ids=e.a.ids,
        agent_mask=e.a.own,
        customer_mask=e.a.other,
        agent_logprobs=e.a.logp,
        customer_messages=e.cmessages,
        customer_token_ids=e.c.ids,
        customer_self_mask=e.c.own,
        customer_logprobs=e.c.logp,
        log=e.session.log,
        outcome=outcome,
        world=e.world,
        session=e.session,
        agent_turns=e.parses,
        rounds=e.rounds,
        ended_by=e.session.ended_by,
    )
