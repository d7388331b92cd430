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
from sparring.drivers import StageResult
from sparring.evaluate.agent import evaluate_agent, intent_accuracy
from sparring.evaluate.baselines import tfidf_intent_accuracy
from sparring.lm.chat import AGENT_SYSTEM_PROMPT
from sparring.lm.checkpoints import save_checkpoint
from sparring.lm.models import build_model, count_parameters
from sparring.lm.policies import LMPolicy
from sparring.settings import AgentSFTSettings, ModelSpec
from sparring.timing import Phases, sft_phases
from sparring.train.demos import expert_demonstrations, recovery_demonstrations, warm_start
from sparring.world.scenarios import Scenario


@dataclass
class Inputs:
    model: ModelSpec  # params' `model`: the shape DA0 is built with
    tokenizer: Any  # the tokenizer stage's
    utterances: pl.DataFrame  # the train split: the intent phase's examples
    test: pl.DataFrame  # the test split: DA0's routing measured on it, TF-IDF's beside it
    scenarios: dict[str, list[Scenario]]  # "train" (the demos are played on them) and "heldout" (measured on)
    scratch: Path  # the trainers' output folder


def run(inputs: Inputs, settings: AgentSFTSettings, out_dir: Path, seed: int) -> StageResult:
    """DA0 trained on the train split and the expert's demonstrations on the first ``settings.demos`` train
    scenarios, measured on the held-out scenarios and the test split; saved to ``out_dir``."""
    phases, cfg, spec = Phases(), settings, inputs.model
    system = AGENT_SYSTEM_PROMPT if cfg.system_prompt else ""
    demos, recoveries = _demonstrations(inputs.scenarios["train"][: cfg.demos], cfg, system, seed, phases)
    if cfg.tie_word_embeddings is not None:
        spec = spec.replace(tie_word_embeddings=cfg.tie_word_embeddings)
    with phases.time("build_model"):
        model = build_model(spec, inputs.tokenizer, seed=seed)
    model.config.agent_system_prompt = system  # saved with DA0: whoever loads it prompts it as it was trained
    texts, intents = inputs.utterances["text"].to_list(), inputs.utterances["intent"].to_list()
    result = warm_start(model, inputs.tokenizer, demos, texts, intents, cfg, inputs.scratch, seed=seed)
    sft_phases(phases, result)
    agent = LMPolicy(result.model, inputs.tokenizer, role="agent", max_new_tokens=cfg.max_new_tokens, greedy=True)
    heldout = inputs.scenarios["heldout"][: cfg.eval_scenarios]
    metrics = _measure(agent, heldout, inputs.utterances, inputs.test, seed, phases)
    metrics.update(
        parameters=count_parameters(result.model),
        demos=len(demos),
        recovery_demos=len(recoveries),
        intent_examples=len(inputs.utterances) if cfg.intent is not None else 0,
        n_heldout=len(heldout),
        train_seconds=round(result.seconds, 2),
        train_tokens_per_s=round(result.tokens_per_s, 1),
        final_loss=result.final_loss,
    )
    with phases.time("save_checkpoint"):
        save_checkpoint(result.model, inputs.tokenizer, out_dir)
    return StageResult(metrics, phases=phases, checkpoints={"": out_dir}, curves=result.curves)


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
