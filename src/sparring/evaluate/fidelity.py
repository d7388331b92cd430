"""Simulator fidelity: does the customer simulator behave like real customers, not only write like them?

The metrics follow TRACER (arXiv 2609.28690), whose claim is that style is not behaviour: a simulator must also
keep its hidden intent recoverable, end sessions as real users do, and follow their turn-by-turn trajectories.
Names are METRICS.md's.

- ``heldout_perplexity``: perplexity of the customer's own turns of held-out dialogues, customer view, goal given
  (the model's loss on assistant tokens only: what stage 1 trains).
- ``sim_faithfulness``: share of held-out scenarios whose intent the judge's oracle recovers from the simulated
  customer's turns (against ``agent_policy``, by default the scripted expert that escalates as real agents do,
  :class:`~sparring.agents.escalation.EscalatingExpert`: without it no simulator could end a session escalated).
- ``identity_given_rate``: share of those episodes where the agent identified the customer (a successful
  ``lookup_account``); ``identity_attempt_rate``: where it tried to (the customer's answer had the right shape);
  ``identity_fact_acc``: share of identity facts stated with the right value; ``strict_pass_coop`` etc.: the
  agent's episode metrics against the simulator.
- ``discriminator_auc``: the realism discriminator telling real held-out customer turns from simulated ones;
  0.5 is ideal.
- Replayed sessions (replayed as TRACER's stage 2 trains on them, :mod:`sparring.train.tracer`): each held-out
  dialogue becomes a scenario with its intent, persona and opening; the simulator plays it against the agent with
  the same goal format as in training (without the ending clause) and the session's ending is read off the world:
  ``resolved`` (resolved and ended cleanly), ``escalated`` (``transfer_to_human``), else ``abandoned`` (the
  customer left, or cut off). ``outcome_f1``: macro F1 of simulated
  vs real endings; ``group_outcome_rate_error``: mean over persona cohorts of the total-variation distance between
  simulated and real ending distributions (for a binary outcome, TRACER's |rate_sim(g) - rate_real(g)|);
  ``trajectory_distance``: mean DTW distance (cosine, per aligned step) between the real and simulated customer
  turn sequences, each turn embedded. Caveat: simulated endings depend on the agent the simulator plays against,
  real ones on the real agent, so these measure the pair (simulator, agent) against the real sessions.
  ``left_rate``: share of the held-out episodes the simulated customer left unresolved (agents.leaving).
- ``false_negative_rate`` (τ²-bench): the share of an agent's failures against the simulator that are the
  simulator's fault (:func:`false_negative_rate`), with ``agent_strict_pass`` beside it.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import polars as pl
import torch

from sparring.agents.customer_view import dialogue_view, extract_identity
from sparring.agents.escalation import EscalatingExpert
from sparring.agents.scripted import CooperativeCustomer, expert_agent
from sparring.data.synthetic import OUTCOMES
from sparring.judge.models import IntentOracle, RealismDiscriminator, intent_named_outright, join_turns
from sparring.metrics import episode_metrics
from sparring.rollout import Episode, run_episodes
from sparring.train.tracer import Embedder, customer_turns, dtw_distance, replay_scenarios, simulated_outcome
from sparring.world.scenarios import Scenario
from sparring.world.session import CUSTOMER_LEFT
from sparring.world.vocab import DOMAIN

# ----------------------------------------------------------------------------------------------- perplexity


def customer_turn_nll(
    model: Any, tokenizer: Any, conversations: Sequence[Sequence[Mapping[str, str]]], batch_size: int = 16
) -> tuple[float, int]:
    """Summed negative log-likelihood of the ``assistant`` (customer) tokens of customer-view conversations,
    and how many tokens that is. Rows longer than the model's context keep their start."""
    limit = getattr(getattr(model, "config", None), "max_position_embeddings", None) or 4096
    rows: list[tuple[list[int], list[int]]] = []
    for conv in conversations:
        enc = tokenizer.apply_chat_template(
            list(conv), tokenize=True, return_dict=True, return_assistant_tokens_mask=True
        )
        ids, mask = list(enc["input_ids"])[:limit], list(enc["assistant_masks"])[:limit]
        if sum(mask[1:]):
            rows.append((ids, mask))
    rows.sort(key=lambda r: len(r[0]))  # similar lengths together: less padding
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0
    device = next(model.parameters()).device
    total, count = 0.0, 0
    was_training = model.training
    model.eval()
    try:
        with torch.inference_mode():
            for start in range(0, len(rows), batch_size):
                batch = rows[start : start + batch_size]
                width = max(len(ids) for ids, _ in batch)
                ids = torch.full((len(batch), width), pad, dtype=torch.long)
                attn = torch.zeros((len(batch), width), dtype=torch.long)
                target = torch.zeros((len(batch), width), dtype=torch.bool)
                for i, (row, mask) in enumerate(batch):  # right padding: positions start at 0 as in training
                    ids[i, : len(row)] = torch.tensor(row)
                    attn[i, : len(row)] = 1
                    target[i, : len(row)] = torch.tensor(mask, dtype=torch.bool)
                logits = model(input_ids=ids.to(device), attention_mask=attn.to(device)).logits.float()
                logp = torch.log_softmax(logits[:, :-1], dim=-1)
                picked = logp.gather(-1, ids[:, 1:, None].to(device)).squeeze(-1)
                keep = target[:, 1:].to(device)
                total -= float(picked[keep].sum())
                count += int(keep.sum())
    finally:
        model.train(was_training)
    return total, count


def heldout_perplexity(model: Any, tokenizer: Any, dialogues: pl.DataFrame, batch_size: int = 16) -> float:
    """exp(mean NLL per customer token) on held-out dialogues in the customer view, goals without endings."""
    conversations = [dialogue_view(row) for row in dialogues.iter_rows(named=True)]
    total, count = customer_turn_nll(model, tokenizer, conversations, batch_size)
    return math.exp(total / count) if count else math.nan


# ----------------------------------------------------------------------------- replayed sessions' measures


def identified(episode: Episode) -> bool:
    """The agent identified the customer: a successful call of the identity tool (banking: ``lookup_account``)."""
    return any(c.name == DOMAIN.identity.tool and c.ok for c in episode.log.tool_calls())


def identity_fact_share(episode: Episode) -> float:
    """Share of the scenario's identity facts (customer id, date of birth, postcode, card ending) the customer
    stated with the right value when asked: a graded view of :func:`identified` for models still learning to
    copy them from their goal."""
    turns = [
        {"role": "customer" if m["role"] == "user" else "agent", "text": str(m.get("content") or "")}
        for m in episode.messages
        if m["role"] in ("user", "assistant")
    ]
    said = extract_identity(turns)
    keys = DOMAIN.identity.keys
    return sum(said.get(k) == episode.scenario.identity[k] for k in keys) / len(keys)


def outcome_f1(real: Sequence[str], simulated: Sequence[str]) -> float:
    """Macro F1 of the simulated endings against the real ones, over the three outcomes (an outcome in neither
    scores 0), as sklearn's ``f1_score(..., average="macro", zero_division=0)``, which costs ~5 ms a call: the
    ending ceiling scores a thousand draws."""
    if len(real) != len(simulated):
        raise ValueError(f"{len(real)} real endings but {len(simulated)} simulated")
    pairs = list(zip(real, simulated, strict=True))
    scores = []
    for o in OUTCOMES:
        tp = sum(r == o and s == o for r, s in pairs)
        wrong = sum((r == o) != (s == o) for r, s in pairs)  # false positives + false negatives
        scores.append(2 * tp / (2 * tp + wrong) if tp + wrong else 0.0)
    return float(np.mean(scores))


def group_outcome_rate_error(real: Sequence[str], simulated: Sequence[str], groups: Sequence[str]) -> float:
    """Mean over cohorts of the total-variation distance between real and simulated ending distributions."""
    errors = []
    for g in sorted(set(groups)):
        r = [o for o, gg in zip(real, groups, strict=True) if gg == g]
        s = [o for o, gg in zip(simulated, groups, strict=True) if gg == g]
        rc, sc = Counter(r), Counter(s)
        errors.append(0.5 * sum(abs(rc[o] / len(r) - sc[o] / len(s)) for o in OUTCOMES))
    return float(np.mean(errors)) if errors else math.nan


def trajectory_distances(
    real: Sequence[Sequence[str]], simulated: Sequence[Sequence[str]], embedder: Embedder
) -> list[float]:
    """:func:`~sparring.train.tracer.dtw_distance` of each pair of real and simulated customer-turn sequences (NaN
    where either has no turns): per session, so a session's distance can be reported beside its ending."""
    flat = [t for turns in (*real, *simulated) for t in turns]
    if not flat:
        return [math.nan] * len(real)
    vectors = np.asarray(embedder(flat), dtype=np.float64)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True) + 1e-12
    start = 0
    seqs = []
    for turns in (*real, *simulated):
        seqs.append(vectors[start : start + len(turns)])
        start += len(turns)
    half = len(real)
    return [dtw_distance(r, s) for r, s in zip(seqs[:half], seqs[half:], strict=True)]


def mean_distance(distances: Sequence[float]) -> float:
    """The mean of the sessions' distances that are defined (NaN when none is)."""
    out = [d for d in distances if not math.isnan(d)]
    return float(np.mean(out)) if out else math.nan


def trajectory_distance(real: Sequence[Sequence[str]], simulated: Sequence[Sequence[str]], embedder: Embedder) -> float:
    """Mean :func:`~sparring.train.tracer.dtw_distance` between paired real and simulated customer-turn sequences."""
    return mean_distance(trajectory_distances(real, simulated, embedder))


def ending_shares_by_persona(
    real: Sequence[str], simulated: Sequence[str], personas: Sequence[str]
) -> dict[str, float]:
    """``real_rate_<ending>_<persona>`` and ``sim_rate_<ending>_<persona>``: each persona's ending shares, real and
    simulated (issue 58 accepts a simulator whose shares are near the real ones for every persona)."""
    out: dict[str, float] = {}
    for persona in sorted(set(personas)):
        mine = [i for i, p in enumerate(personas) if p == persona]
        for outcome in OUTCOMES:
            out[f"real_rate_{outcome}_{persona}"] = sum(real[i] == outcome for i in mine) / len(mine)
            out[f"sim_rate_{outcome}_{persona}"] = sum(simulated[i] == outcome for i in mine) / len(mine)
    return out


def false_negative_rate(tested: Sequence[Episode], expert: Sequence[Episode], reference: Sequence[Episode]) -> float:
    """τ²-bench's false negatives: of the tested agent's failures against the simulator, the share that are the
    simulator's fault: the scenario is winnable (the goal-knowing expert passes it against the scripted cooperative
    customer, ``reference``) and the expert fails it against the same simulator (``expert``). NaN: no failures."""
    if not len(tested) == len(expert) == len(reference):
        raise ValueError("false_negative_rate needs the same scenarios in the three runs")
    failed = [i for i, ep in enumerate(tested) if not ep.outcome.strict_pass]
    if not failed:
        return math.nan
    fault = [i for i in failed if reference[i].outcome.strict_pass and not expert[i].outcome.strict_pass]
    return len(fault) / len(failed)


def session_records(
    dialogues: pl.DataFrame, replays: Sequence[Episode], distances: Sequence[float], oracle: IntentOracle
) -> list[dict[str, Any]]:
    """One record per replayed session, no texts: its id, persona, real and simulated endings, trajectory distance
    (None without turns) and whether the oracle recovers its intent from the simulated turns (its faithfulness)."""
    predicted = oracle.predict([join_turns(customer_turns(ep)) for ep in replays]) if replays else []
    return [
        {
            "session_id": row["id"],
            "persona": row["persona"],
            "real_ending": row["outcome"],
            "simulated_ending": simulated_outcome(ep),
            "trajectory_distance": None if math.isnan(d) else round(float(d), 4),
            "faithful": bool(p == row["intent"]),
        }
        for row, ep, d, p in zip(dialogues.iter_rows(named=True), replays, distances, predicted, strict=True)
    ]


# -------------------------------------------------------------------------------------------------- metrics


# The fidelity figures an RL simulator must beat SFT's on; on these "better" is lower, on the rest higher.
COMPARED = ("outcome_f1", "group_outcome_rate_error", "trajectory_distance")
LOWER_IS_BETTER = ("group_outcome_rate_error", "trajectory_distance")


def better_count(sft: dict[str, float], rl: dict[str, float]) -> int:
    """On how many of outcome F1, group outcome-rate error and trajectory distance the RL simulator beats SFT."""
    wins = 0
    for name in COMPARED:
        if name in sft and name in rl:
            wins += rl[name] < sft[name] if name in LOWER_IS_BETTER else rl[name] > sft[name]
    return wins


def simulator_fidelity(
    sim_policy: Any,
    heldout_scenarios: Sequence[Scenario],
    heldout_dialogues: pl.DataFrame,
    oracle: IntentOracle,
    discriminator: RealismDiscriminator,
    agent_policy: Any = None,
    seed: int = 0,
    *,
    max_turns: int = 6,
    max_dialogues: int | None = None,
    embedder: Embedder | None = None,
    perplexity: bool = True,
    agent_under_test: Any = None,
    sessions: list[dict[str, Any]] | None = None,
) -> dict[str, float]:
    """Every fidelity metric of a customer policy (an ``LMPolicy(role="customer")`` or a scripted customer).

    ``agent_policy`` defaults to :class:`~sparring.agents.escalation.EscalatingExpert` (the scripted expert, which
    also hands over when the customer asks for a person or refuses twice); ``max_dialogues``
    caps the replayed and perplexity dialogues; ``embedder`` (texts -> vectors) defaults to the judge's MiniLM
    encoder; ``perplexity`` needs an LM policy (skipped for scripted ones). ``agent_under_test`` (e.g. DA0) also
    plays the held-out scenarios against the simulator, which writes its own opening (evaluate's ``_coopsim``): its
    ``agent_strict_pass`` and the :func:`false_negative_rate` of its failures, judged by ``agent_policy``'s
    episodes (the expert's, by default). ``sessions``, when given, is filled with one record per replayed
    session (:func:`session_records`).

    Over 60 lines: TRACER's fidelity metrics side by side, each a few lines over the same rollouts."""
    agent = agent_policy if agent_policy is not None else EscalatingExpert()
    dialogues = heldout_dialogues.head(max_dialogues) if max_dialogues is not None else heldout_dialogues
    metrics: dict[str, float] = {}
    model, tokenizer = getattr(sim_policy, "model", None), getattr(sim_policy, "tokenizer", None)
    if perplexity and model is not None and tokenizer is not None and dialogues.height:
        metrics["heldout_perplexity"] = heldout_perplexity(model, tokenizer, dialogues)

    episodes = run_episodes(heldout_scenarios, agent, sim_policy, max_turns=max_turns, seed=seed)
    sim_turns = [customer_turns(ep) for ep in episodes]
    joined = [join_turns(turns) for turns in sim_turns]
    if episodes:
        predicted = oracle.predict(joined)
        intents = [ep.scenario.intent for ep in episodes]
        metrics["sim_faithfulness"] = float(np.mean([p == t for p, t in zip(predicted, intents, strict=True)]))
        metrics["sim_prob_true_intent"] = float(np.mean(oracle.prob_of(joined, intents)))
        natural = getattr(oracle, "natural_label_intents", ())
        metrics["sim_intent_named_rate"] = float(
            np.mean([intent_named_outright(j, t, natural) for j, t in zip(joined, intents, strict=True)])
        )
        metrics["identity_given_rate"] = float(np.mean([identified(ep) for ep in episodes]))
        metrics["identity_fact_acc"] = float(np.mean([identity_fact_share(ep) for ep in episodes]))
        tried = [any(c.name == DOMAIN.identity.tool for c in ep.log.tool_calls()) for ep in episodes]
        metrics["identity_attempt_rate"] = float(np.mean(tried))
        agent_metrics = episode_metrics(episodes, "_coop")
        for name in ("strict_pass", "pass", "routing_acc", "lookup_first", "ended_rate", "mean_rounds"):
            metrics[f"{name}_coop"] = float(agent_metrics[f"{name}_coop"])
        metrics["left_rate"] = float(np.mean([ep.ended_by == CUSTOMER_LEFT for ep in episodes]))
        if agent_under_test is not None:
            tested = run_episodes(heldout_scenarios, agent_under_test, sim_policy, max_turns=max_turns, seed=seed)
            reference = run_episodes(
                heldout_scenarios, expert_agent(), CooperativeCustomer(), max_turns=max_turns, seed=seed
            )
            metrics["agent_strict_pass"] = float(np.mean([ep.outcome.strict_pass for ep in tested]))
            metrics["false_negative_rate"] = false_negative_rate(tested, episodes, reference)

    replays: list[Episode] = []
    if dialogues.height:
        replays = run_episodes(replay_scenarios(dialogues, seed), agent, sim_policy, max_turns=max_turns, seed=seed)
        real_outcomes = dialogues["outcome"].to_list()
        sim_outcomes = [simulated_outcome(ep) for ep in replays]
        metrics["outcome_f1"] = outcome_f1(real_outcomes, sim_outcomes)
        metrics["outcome_acc"] = float(np.mean([r == s for r, s in zip(real_outcomes, sim_outcomes, strict=True)]))
        metrics["group_outcome_rate_error"] = group_outcome_rate_error(
            real_outcomes, sim_outcomes, dialogues["persona"].to_list()
        )
        for outcome in OUTCOMES:
            metrics[f"sim_rate_{outcome}"] = sim_outcomes.count(outcome) / len(sim_outcomes)
            metrics[f"real_rate_{outcome}"] = real_outcomes.count(outcome) / len(real_outcomes)
        metrics.update(ending_shares_by_persona(real_outcomes, sim_outcomes, dialogues["persona"].to_list()))
        real_turns = [[t["text"] for t in row if t["role"] == "customer"] for row in dialogues["turns"].to_list()]
        if embedder is None:
            from sparring.judge.models import embed as embedder  # deferred: loads the MiniLM encoder
        distances = trajectory_distances(real_turns, [customer_turns(ep) for ep in replays], embedder)
        metrics["trajectory_distance"] = mean_distance(distances)
        if sessions is not None:
            sessions += session_records(dialogues, replays, distances, oracle)

    real_texts = [t["text"] for row in heldout_dialogues["turns"].to_list() for t in row if t["role"] == "customer"]
    simulated = [t for turns in [*sim_turns, *(customer_turns(ep) for ep in replays)] for t in turns]
    if real_texts and simulated:
        metrics["discriminator_auc"] = discriminator.auc(real_texts, simulated)
        metrics["sim_prob_real"] = float(np.mean(discriminator.prob_real(simulated)))
    metrics["n_sim_episodes"] = len(episodes)
    metrics["n_replayed"] = len(replays)
    return metrics
