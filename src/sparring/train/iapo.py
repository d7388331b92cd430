"""IAPO, influence-aware policy optimization (arXiv 2608.24588; ../shared/SEEDS.md), and MT-GRPO's turn-level
baseline: per-action credit inside one multi-turn GRPO completion, in the paper's order.

GRPO gives every generated token of an episode the same advantage Â = (R − mean_group) / (std_group + ε). IAPO
routes Â along a typed influence graph over the trained side's actions a_i (its messages, L_i tokens each,
L = Σ L_i):

1. The graph (:func:`influence_graph`), read exactly from the world's event log (``world/events.py``: every tool
   argument's ``ArgProvenance``) instead of the paper's LLM annotator:
   E⁺ (support use)  a_i -> a_j when a_j's argument came from a_i's tool result, or from a customer message that
                     a_i elicited (the message right after a_i); when a_i's lookup identified the customer an
                     account-level a_j needs (refused without it); when a_j acts on the intent a_i's
                     ``confirm_request`` had the customer confirm;
   E⁻ (failed use)   a_i -> a_j when a_i erred and a_j retried its tool or used its (invalid) result, or acted on
                     the intent the customer refused at a_i;
   e_i               1 when a_i's message was malformed, its call failed or was refused, the customer answered
                     its confirmation with a no (the paper's explicit rejection), or, in an episode whose world
                     state never matched the goal, it acted (a call of a tool some intent resolves with that the
                     world accepted: a misroute, the wrong object, an act no intent asks for) or reported the
                     request done ("All done": a rule failure), or, where nothing else erred, it closed the case;
                     a report after such an act is a failed use of it (E⁻);
   direct inputs     arguments a_j took from a customer message no action elicited (the opening).
2. Features: φ⁺_i = log(1 + d⁺_i + d^in_i), φ⁻_i = log(1 + e_i (1 + d⁻_i + d^in_i)), d⁺/d⁻ out-degrees on
   E⁺/E⁻, d^in_i = direct inputs + in-degree on E⁺.
3. Length-weighted standardization z_i = (φ_i − φ̄)/(σ_φ + ε) (φ̄, σ_φ weighted by L_i) and clipped exponential
   weights m_i = exp(clip(z_i, −c, c)) / [(1/L) Σ_j L_j exp(clip(z_j, −c, c))] (:func:`influence_weights`).
4. Sign-conditioned routing (:func:`routing_weights`): Â > 0: w_i = L·m⁺_i·exp(−β₊ψ⁻_i) / Σ_j L_j m⁺_j
   exp(−β₊ψ⁻_j), ψ⁻ = φ⁻ − mean φ⁻ (the mean cancels in the ratio); Â < 0: w_i = m⁻_i.
5. Token advantages A_{i,ℓ} = Â·w_i into TRL's unchanged GRPO loss (:func:`make_credit_trainer`). Σ over tokens
   is L·Â (mass conserved), the sign is Â's, and constant features give w = 1 (plain GRPO).

The adversary's actions are its messages too; no message of its feeds another of its own, so its graph has no
E⁺/E⁻ edges, and its direct inputs are the agent arguments its words supplied (what of it the agent acted on).

MT-GRPO (``credit: mt_grpo``, the agent only): the first agent turn (the routing decision) also gets its
group-normalized turn reward (the judge's ``agent_first_turn_reward``) on top of the outcome advantage. Every
episode has a first agent turn, so normalizing that turn in its group compares all G episodes; normalizing later
turn indices would compare only the episodes that were still going, which the policy chose (verl #7244's bias),
so later turns keep the outcome advantage alone.

Over 400 lines: IAPO's five steps in the paper's order (the graph read from the world's event log), MT-GRPO's turn
credit beside them, and the figures of what a graph held.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from sparring.hf_door import token_advantage_trainer
from sparring.judge.rewards import DONE_REPORT
from sparring.world.answers import answer_kind, reply_after
from sparring.world.events import ATTEMPT_TYPES, ToolCallEvent, TurnEvent
from sparring.world.vocab import DOMAIN, INTENT_SPECS, READ_TOOLS, TOOLS

EPS = 1e-8
ELICITED_KINDS = ("utterance", "described")  # provenance kinds that point at a customer message


# 1. The influence graph -----------------------------------------------------------------------------------------


@dataclass
class InfluenceGraph:
    """The trained side's actions (in order) and how information and errors flowed between them."""

    lengths: list[int]  # L_i: tokens the side generated in action i
    support: set[tuple[int, int]] = field(default_factory=set)  # E⁺ (i, j)
    failed: set[tuple[int, int]] = field(default_factory=set)  # E⁻ (i, j)
    errors: list[int] = field(default_factory=list)  # e_i
    direct: list[int] = field(default_factory=list)  # direct user inputs a_i used

    def __post_init__(self) -> None:
        n = len(self.lengths)
        self.errors = self.errors or [0] * n
        self.direct = self.direct or [0] * n


def action_runs(own: Sequence[int]) -> list[tuple[int, int]]:
    """``[start, end)`` of each run of 1s in a side's own-token mask: one run per message it generated."""
    runs, start = [], None
    for i, bit in enumerate([*own, 0]):
        if bit and start is None:
            start = i
        elif not bit and start is not None:
            runs.append((start, i))
            start = None
    return runs


def influence_graph(episode: Any, role: str, own: Sequence[int]) -> InfluenceGraph:
    """The graph over ``role``'s actions ("agent" or "customer") in ``episode``; ``own`` is that side's
    own-token mask over its completion, whose runs are its messages in order."""
    lengths = [b - a for a, b in action_runs(own)]
    events = list(episode.log.events)
    turns = [e for e in events if isinstance(e, TurnEvent) and e.role == role]
    if len(turns) != len(lengths):
        raise ValueError(f"{len(lengths)} generated runs but {len(turns)} {role} messages in the event log")
    graph = InfluenceGraph(lengths)
    if role == "agent":
        made, elicited = _owners(events)
        _agent_edges(graph, events, episode.agent_turns, made, elicited)
        if not episode.outcome.state_match:
            _unresolved_errors(graph, events, turns, made)
    else:
        _customer_inputs(graph, events)
    return graph


def _owners(events: Sequence[Any]) -> tuple[dict[int, int], dict[int, int | None]]:
    """Event index -> the agent action that made it (its message, its tool call), and customer message event
    index -> the agent action that elicited it (the last one before it; None for the opening)."""
    made, elicited, action = {}, {}, -1
    for e in events:
        if isinstance(e, TurnEvent) and e.role == "agent":
            action += 1
            made[e.index] = action
        elif isinstance(e, ToolCallEvent):
            made[e.index] = action
        elif isinstance(e, TurnEvent):
            elicited[e.index] = action if action >= 0 else None
    return made, elicited


def _agent_edges(
    graph: InfluenceGraph,
    events: Sequence[Any],
    parses: Sequence[Any],
    made: dict[int, int],
    elicited: dict[int, int | None],
) -> None:
    calls = {made[e.index]: e for e in events if isinstance(e, ToolCallEvent)}
    refused = {e.call_index for e in events if getattr(e, "type", None) in ATTEMPT_TYPES}
    for i, parsed in enumerate(parses[: len(graph.lengths)]):
        call = calls.get(i)
        bad_call = call is not None and (not call.ok or call.index in refused)
        graph.errors[i] = int(not parsed.format_ok or bad_call)
    _identity_edges(graph, events, made)
    _confirmation_edges(graph, events, made)
    for j, call in calls.items():
        for provenance in call.provenance.values():
            source = provenance.source
            if source is None or source.event_index is None:
                continue
            if source.kind == "result_field":
                i = made.get(source.event_index)
                if i is not None and i != j:
                    (graph.failed if graph.errors[i] else graph.support).add((i, j))
            elif source.kind in ELICITED_KINDS:
                i = elicited.get(source.event_index)
                if i is None:
                    graph.direct[j] += 1
                elif i != j:
                    graph.support.add((i, j))
    for i, call in calls.items():  # a retry of a failed call repeats its error
        if graph.errors[i]:
            retry = next((j for j in sorted(calls) if j > i and calls[j].name == call.name), None)
            if retry is not None:
                graph.failed.add((i, retry))


# Calls that do something for the customer: every tool an intent resolves with, whatever its selector says (a card
# frozen that no intent asked for is a wrong act too), the reads aside.
ACT_TOOLS = frozenset(spec.tool for spec in INTENT_SPECS.values()) - READ_TOOLS


def _unresolved_errors(
    graph: InfluenceGraph, events: Sequence[Any], turns: Sequence[Any], made: dict[int, int]
) -> None:
    """An episode whose world state never matched the goal: each accepted act (a call of a tool some intent
    resolves with, on any action) changed the wrong thing and each "done" report is a rule failure (e_i = 1), and a
    report after an act relied on it (E⁻). Without the act's error a misroute's blame went to the report and spared
    the act that caused it. When nothing else erred, the agent's close that left the case unresolved is the error:
    without it such a failure held no erring action and its blame stayed uniform."""
    calls = [e for e in events if isinstance(e, ToolCallEvent) and e.ok and e.index in made]
    acts = [made[e.index] for e in calls if e.name in ACT_TOOLS]
    reports = [i for i, turn in enumerate(turns) if DONE_REPORT.search(turn.text)]
    for i in acts + reports:
        graph.errors[i] = 1
    graph.failed.update((i, j) for i in acts for j in reports if j > i)
    if not any(graph.errors):
        for e in calls:
            if e.name == "end_conversation":
                graph.errors[made[e.index]] = 1


def _identity_edges(graph: InfluenceGraph, events: Sequence[Any], made: dict[int, int]) -> None:
    """E⁺ from the action whose identity call (banking: ``lookup_account``) identified the customer to each later
    account-level call that succeeded on that identity: the world refuses those calls before identification, so they
    would be unsupported."""
    source = None
    for e in events:
        if not isinstance(e, ToolCallEvent) or not e.ok:
            continue
        j = made.get(e.index)
        if e.name == DOMAIN.identity.tool:
            source = j
        elif source is not None and j is not None and j != source and TOOLS[e.name].needs_identity:
            graph.support.add((source, j))


def _acts_on(call: ToolCallEvent, intent: str) -> bool:
    """Whether ``call`` is ``intent``'s resolving call (its tool, and its action where the tool has several)."""
    spec = INTENT_SPECS[intent]
    selector = TOOLS[spec.tool].selector
    return call.name == spec.tool and (spec.action is None or call.arguments.get(selector) == spec.action)


def _confirmation_edges(graph: InfluenceGraph, events: Sequence[Any], made: dict[int, int]) -> None:
    """What a customer's answer to ``confirm_request`` says of the action that asked: a no is an explicit
    rejection (e_i = 1) and a later call acting on the refused intent repeats that error (E⁻); a yes is
    information the act on the confirmed intent then used (E⁺)."""
    calls = [e for e in events if isinstance(e, ToolCallEvent)]
    for ask in calls:
        intent, i = ask.arguments.get("intent"), made.get(ask.index)
        if ask.name != "confirm_request" or not ask.ok or intent not in INTENT_SPECS or i is None:
            continue
        reply = reply_after(events, ask.index)
        said = answer_kind(reply) if reply is not None else None
        if said is None:
            continue
        if said == "no":
            graph.errors[i] = 1
        for act in calls:
            j = made.get(act.index)
            if act.index > ask.index and j is not None and j != i and _acts_on(act, intent):
                (graph.support if said == "yes" else graph.failed).add((i, j))


def _customer_inputs(graph: InfluenceGraph, events: Sequence[Any]) -> None:
    mine, k = {}, -1
    for e in events:
        if isinstance(e, TurnEvent) and e.role == "customer":
            k += 1
            mine[e.index] = k
    for e in events:
        if isinstance(e, ToolCallEvent):
            for provenance in e.provenance.values():
                source = provenance.source
                if source is not None and source.kind in ELICITED_KINDS and source.event_index in mine:
                    graph.direct[mine[source.event_index]] += 1


# 2. Features ----------------------------------------------------------------------------------------------------


def features(graph: InfluenceGraph) -> tuple[list[float], list[float]]:
    """(φ⁺, φ⁻) per action."""
    n = len(graph.lengths)
    out_plus, out_minus, in_plus = [0] * n, [0] * n, [0] * n
    for i, j in graph.support:
        out_plus[i] += 1
        in_plus[j] += 1
    for i, _ in graph.failed:
        out_minus[i] += 1
    d_in = [graph.direct[i] + in_plus[i] for i in range(n)]
    phi_plus = [math.log1p(out_plus[i] + d_in[i]) for i in range(n)]
    phi_minus = [math.log1p(graph.errors[i] * (1 + out_minus[i] + d_in[i])) for i in range(n)]
    return phi_plus, phi_minus


# 3. Length-weighted standardization and clipped exponential weights --------------------------------------------


def influence_weights(phi: Sequence[float], lengths: Sequence[int], clip: float) -> list[float]:
    """m_i: exp of the clipped length-weighted z-score, normalized so that Σ_i L_i m_i = L."""
    total = sum(lengths)
    if total == 0:
        return [1.0] * len(phi)
    mean = sum(w * x for w, x in zip(lengths, phi, strict=True)) / total
    std = math.sqrt(sum(w * (x - mean) ** 2 for w, x in zip(lengths, phi, strict=True)) / total)
    raw = [math.exp(max(-clip, min(clip, (x - mean) / (std + EPS)))) for x in phi]
    norm = sum(w * r for w, r in zip(lengths, raw, strict=True)) / total
    return [r / norm for r in raw]


# 4. Sign-conditioned routing ------------------------------------------------------------------------------------


def routing_weights(graph: InfluenceGraph, beta_plus: float, clip: float) -> tuple[list[float], list[float]]:
    """(w for Â > 0, w for Â < 0) per action: success flows to the actions whose information was used, less to
    error-bearing ones; failure to the actions whose errors were used or repeated."""
    lengths = graph.lengths
    phi_plus, phi_minus = features(graph)
    m_plus, m_minus = influence_weights(phi_plus, lengths, clip), influence_weights(phi_minus, lengths, clip)
    # exp(−β₊ψ⁻) with ψ⁻ = φ⁻ − mean φ⁻: the mean's factor is common to every action and cancels below
    damped = [m * math.exp(-beta_plus * p) for m, p in zip(m_plus, phi_minus, strict=True)]
    total, mass = sum(lengths), sum(w * d for w, d in zip(lengths, damped, strict=True))
    w_pos = [total * d / mass for d in damped] if mass > 0 else [1.0] * len(lengths)
    return w_pos, m_minus


# 5. Token advantages --------------------------------------------------------------------------------------------


def token_weights(own: Sequence[int], per_action: Sequence[float]) -> list[float]:
    """Each completion token's weight: its action's on the side's own tokens, 1 elsewhere (masked out anyway)."""
    out = [1.0] * len(own)
    for (a, b), w in zip(action_runs(own), per_action, strict=True):
        out[a:b] = [w] * (b - a)
    return out


def iapo_token_weights(
    graph: InfluenceGraph, own: Sequence[int], beta_plus: float, clip: float
) -> tuple[list[float], list[float]]:
    """Per-token IAPO weights of one completion (its ``graph``, its side's own-token mask): (for Â > 0, Â < 0)."""
    w_pos, w_neg = routing_weights(graph, beta_plus, clip)
    return token_weights(own, w_pos), token_weights(own, w_neg)


def first_action_mask(own: Sequence[int]) -> list[float]:
    """1 on the tokens of the side's first message (MT-GRPO's turn-level window), 0 elsewhere."""
    runs = action_runs(own)
    mask = [0.0] * len(own)
    if runs:
        a, b = runs[0]
        mask[a:b] = [1.0] * (b - a)
    return mask


def group_normalized(values: Sequence[float], group: int) -> list[float]:
    """(x − mean_group) / (std_group + ε) over consecutive groups, as GRPO normalizes its rewards."""
    if group < 1 or len(values) % group:
        raise ValueError(f"{len(values)} values do not form groups of {group}")
    out: list[float] = []
    for k in range(0, len(values), group):
        part = list(values[k : k + group])
        mean = sum(part) / len(part)
        std = math.sqrt(sum((x - mean) ** 2 for x in part) / max(1, len(part) - 1))
        out += [(x - mean) / (std + 1e-4) for x in part]
    return out


def credit_batch(
    episodes: Sequence[Any],
    own_masks: Sequence[Sequence[int]],
    role: str,
    settings: Any,
    turn_rewards: Sequence[float],
    group: int,
    graphs: Sequence[InfluenceGraph] | None = None,
) -> list[tuple[str, Any, Any]]:
    """What :func:`token_advantages` needs per completion for ``settings.credit`` (iapo or mt_grpo); ``graphs``:
    the episodes' influence graphs where the caller built them already (built here otherwise)."""
    if settings.credit == "iapo":
        beta, clip = settings.iapo_beta_plus, settings.iapo_clip
        graphs = graphs or [influence_graph(ep, role, own) for ep, own in zip(episodes, own_masks, strict=True)]
        return [("iapo", *iapo_token_weights(gr, own, beta, clip)) for gr, own in zip(graphs, own_masks, strict=True)]
    turn = group_normalized(turn_rewards, group)
    return [("mt_grpo", first_action_mask(own), t) for own, t in zip(own_masks, turn, strict=True)]


def token_advantages(advantage: float, credit: tuple[str, Any, Any]) -> list[float]:
    """One completion's token advantages from its GRPO Â and its ``credit`` (one row of :func:`credit_batch`):
    IAPO's Â·wᵢ (w⁺ when Â > 0, else w⁻), or MT-GRPO's Â everywhere plus the turn advantage on the first turn."""
    kind, first, second = credit
    if kind == "iapo":
        return [advantage * w for w in (first if advantage > 0 else second)]
    return [advantage + second * m for m in first]


def make_credit_trainer(base: type) -> type:
    """``base`` (TRL's ``GRPOTrainer``) with per-token advantages (:func:`~sparring.hf_door.token_advantage_trainer`):
    the rollout returns, per completion, its :func:`credit_batch` row as the ``token_credit`` field, and
    :func:`token_advantages` turns TRL's Â into the (B, T) advantages TRL's loss reads unchanged."""
    return token_advantage_trainer(base, token_advantages)


# What the graph held: the figures a reader needs to see whether IAPO had anything to route ---------------------


def credit_summary(
    graphs: Sequence[InfluenceGraph], beta_plus: float, clip: float, reweighted: float = 0.1
) -> dict[str, float]:
    """Over the agent's episodes' ``graphs``: E⁺ and E⁻ edges and erring actions per episode, the share of actions
    (and of tokens) whose w⁺ or w⁻ differs from 1 by more than ``reweighted``, and the largest share of an episode's
    routed mass one action carries (mean and max; 1 action dominating is IAPO's collapse)."""
    n = actions = moved_pos = moved_neg = tokens = moved_tokens = 0
    support = failed = errors = top_mean = top_max = 0.0
    for graph in graphs:
        if not graph.lengths:
            continue
        w_pos, w_neg = routing_weights(graph, beta_plus, clip)
        n, actions, tokens = n + 1, actions + len(graph.lengths), tokens + sum(graph.lengths)
        support, failed, errors = support + len(graph.support), failed + len(graph.failed), errors + sum(graph.errors)
        moved_pos += sum(abs(w - 1) > reweighted for w in w_pos)
        moved_neg += sum(abs(w - 1) > reweighted for w in w_neg)
        moved_tokens += sum(ln for ln, w in zip(graph.lengths, w_pos, strict=True) if abs(w - 1) > reweighted)
        top = max(ln * w for ln, w in zip(graph.lengths, w_pos, strict=True)) / sum(graph.lengths)
        top_mean, top_max = top_mean + top, max(top_max, top)
    return {
        "episodes": n,
        "support_edges_per_episode": support / max(1, n),
        "failed_edges_per_episode": failed / max(1, n),
        "erring_actions_per_episode": errors / max(1, n),
        "actions_per_episode": actions / max(1, n),
        "share_actions_reweighted_pos": moved_pos / max(1, actions),
        "share_actions_reweighted_neg": moved_neg / max(1, actions),
        "share_tokens_reweighted_pos": moved_tokens / max(1, tokens),
        "top_action_mass_mean": top_mean / max(1, n),
        "top_action_mass_max": top_max,
    }


def failure_weights(graphs: Sequence[InfluenceGraph], beta_plus: float, clip: float) -> dict:
    """In failed episodes' ``graphs`` (a negative Â, so w⁻): the mean weight of the erring actions and of the others,
    and the share of such episodes with any erring action (no error, w⁻ = 1 everywhere: the blame stays uniform)."""
    on_error, on_other, with_error = [], [], 0
    for graph in graphs:
        _, w_neg = routing_weights(graph, beta_plus, clip)
        with_error += any(graph.errors)
        for e, w in zip(graph.errors, w_neg, strict=True):
            (on_error if e else on_other).append(w)
    return {
        "episodes": len(graphs),
        "share_with_error": with_error / max(1, len(graphs)),
        "w_neg_erring": sum(on_error) / len(on_error) if on_error else None,
        "w_neg_other": sum(on_other) / len(on_other) if on_other else None,
    }
