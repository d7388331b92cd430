"""DA0, the support agent's warm start, as one run: the expert's demonstrations (its strict passes and recovery
demos), SFT in two phases (utterance → intent, then the episodes), and DA0 measured on held-out scenarios against
scripted cooperative and camouflaging customers, its routing of the test split beside TF-IDF's."""

from __future__ import annotations

import random
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import polars as pl

from sparring.agents.scripted import CamouflagingCustomer, CooperativeCustomer
from sparring.evaluate.agent import evaluate_agent, intent_accuracy
from sparring.evaluate.baselines import tfidf_intent_accuracy
from sparring.lm.chat import AGENT_SYSTEM_PROMPT
from sparring.lm.models import build_model, count_parameters
from sparring.lm.policies import LMPolicy
from sparring.settings import AgentSFTSettings, ModelSpec
from sparring.timing import Phases, sft_phases
from sparring.train.demos import expert_demonstrations, recovery_demonstrations, warm_start
from sparring.world.scenarios import Scenario


@dataclass
class AgentSFTRun:
    model: Any  # DA0
    metrics: dict[str, Any]  # held-out play, routing, TF-IDF's routing, the training's figures
    curves: Any  # the SFT phases' loss curves
    phases: Phases


def run(
    spec: ModelSpec,
    tokenizer: Any,
    utterances: pl.DataFrame,
    scenarios: dict[str, list[Scenario]],
    test: pl.DataFrame,
    cfg: AgentSFTSettings,
    scratch: Path,
    seed: int,
) -> AgentSFTRun:
    """DA0 trained on ``utterances`` (the train split) and the expert's demonstrations on ``scenarios["train"]``
    (the first ``cfg.demos``), measured on ``scenarios["heldout"]`` and the ``test`` split."""
    phases = Phases()
    system = AGENT_SYSTEM_PROMPT if cfg.system_prompt else ""
    demos, recoveries = _demonstrations(scenarios["train"][: cfg.demos], cfg, system, seed, phases)
    if cfg.tie_word_embeddings is not None:
        spec = spec.replace(tie_word_embeddings=cfg.tie_word_embeddings)
    with phases.time("build_model"):
        model = build_model(spec, tokenizer, seed=seed)
    model.config.agent_system_prompt = system  # saved with DA0: whoever loads it prompts it as it was trained
    texts, intents = utterances["text"].to_list(), utterances["intent"].to_list()
    result = warm_start(model, tokenizer, demos, texts, intents, cfg, scratch, seed=seed)
    sft_phases(phases, result)
    agent = LMPolicy(result.model, tokenizer, role="agent", max_new_tokens=cfg.max_new_tokens, greedy=True)
    heldout = scenarios["heldout"][: cfg.eval_scenarios]
    metrics = _measure(agent, heldout, utterances, test, seed, phases)
    metrics.update(
        parameters=count_parameters(result.model),
        demos=len(demos),
        recovery_demos=len(recoveries),
        intent_examples=len(utterances) if cfg.intent is not None else 0,
        n_heldout=len(heldout),
        train_seconds=round(result.seconds, 2),
        train_tokens_per_s=round(result.tokens_per_s, 1),
        final_loss=result.final_loss,
    )
    return AgentSFTRun(result.model, metrics, result.curves, phases)


def _demonstrations(
    scenarios: list[Scenario], cfg: AgentSFTSettings, system: str, seed: int, phases: Phases
) -> tuple[list, list]:
    """The expert's strict passes on ``scenarios``, and recovery demos on a sample of them (both in the demos)."""
    with phases.time("expert_episodes") as counts:
        demos = expert_demonstrations(scenarios, seed, refs=cfg.object_refs, agent_system=system)
        counts["episodes"] = len(scenarios)  # played; the strict passes among them are the demos
    with phases.time("recovery_episodes") as counts:
        replayed = random.Random(seed).sample(scenarios, round(cfg.recovery * len(scenarios)))
        recoveries = recovery_demonstrations(replayed, seed, refs=cfg.object_refs, agent_system=system)
        counts["episodes"] = len(replayed)
    return demos + recoveries, recoveries


def _measure(
    agent: Any, heldout: list[Scenario], train: pl.DataFrame, test: pl.DataFrame, seed: int, phases: Phases
) -> dict[str, Any]:
    """DA0 on held-out scenarios against scripted customers, its routing of the test split, and TF-IDF's."""
    # Scripted customers only: DA0 against the cooperative simulator (`_coop`) is measured by `evaluate`, so this
    # stage needs nothing of simulator_sft and `sparring run` trains the two side by side.
    customers = {"coopscripted": CooperativeCustomer(), "camo": CamouflagingCustomer(seed=seed)}
    with phases.time("eval_episodes") as counts:
        metrics = evaluate_agent(agent, heldout, customers, seed=seed)
        counts["episodes"] = int(sum(metrics.get(f"n_episodes_{k}", 0) for k in customers))
    with phases.time("eval_routing") as counts:
        metrics["intent_acc_heldout_split"] = intent_accuracy(agent, test["text"].to_list(), test["intent"].to_list())
        counts["episodes"] = len(test)  # one routing decision per held-out utterance
    with phases.time("tfidf_baseline"):
        metrics["tfidf_intent_acc_heldout_split"] = tfidf_intent_accuracy(
            train["text"].to_list(), train["intent"].to_list(), test["text"].to_list(), test["intent"].to_list()
        )
    return metrics
