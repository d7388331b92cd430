"""Asset `agent_sft`: DA0, the support agent's warm start — SFT on expert tool-routing demonstrations."""

from __future__ import annotations

import random
from typing import Any

from pipelines.checks import report_check
from pipelines.stages import Plot, Stage, StageContext, StageOutput, stage_asset
from sparring.agents.scripted import CamouflagingCustomer, CooperativeCustomer
from sparring.catalog import AGENT_SFT
from sparring.evaluate import checks
from sparring.evaluate.agent import evaluate_agent, intent_accuracy
from sparring.evaluate.baselines import tfidf_intent_accuracy
from sparring.lm.chat import AGENT_SYSTEM_PROMPT
from sparring.lm.checkpoints import save_checkpoint
from sparring.lm.models import build_model, count_parameters
from sparring.lm.policies import LMPolicy
from sparring.timing import Phases, sft_phases
from sparring.train.demos import expert_demonstrations, recovery_demonstrations, warm_start

STAGE = Stage(
    name="agent_sft",
    description="DA0: SFT on expert demonstrations (lookup first, the right tool, a clean end) against "
    "cooperative customers; measured on held-out scenarios against scripted cooperative and camouflaging customers.",
    params=("model", "agent_sft"),
    # besides the trainer and its evaluation: the model it builds, the expert demos (agents, rollout, world) and
    # the camouflaging customer's utterances (data/synthetic.py and its lexicon)
    outs=(AGENT_SFT,),
    upstream=("ingest", "scenarios", "tokenizer"),
    headline_metrics=("strict_pass_camo",),
    series=Plot("step", "train_loss", "DA0 warm start: training loss (intent phase, then episodes)"),
    group="warm_start",
    kinds=("pytorch", "huggingface", "mlflow"),
)


@stage_asset(STAGE)
def agent_sft(ctx: StageContext) -> StageOutput:
    p, data, cfg, phases = ctx.params, ctx.catalog, ctx.params.agent_sft, Phases()
    tokenizer, train = data.tokenizer(), data.utterances("train")
    # Cooperative customers only: concealment styles are for co-evolution to discover.
    system = AGENT_SYSTEM_PROMPT if cfg.system_prompt else ""
    demos, recoveries = _demonstrations(data.scenarios("train", cfg.demos), cfg, system, p.seed, phases)
    spec = p.model if cfg.tie_word_embeddings is None else p.model.replace(tie_word_embeddings=cfg.tie_word_embeddings)
    with phases.time("build_model"):
        model = build_model(spec, tokenizer, seed=p.seed)
    model.config.agent_system_prompt = system  # saved with DA0: whoever loads it prompts it as it was trained
    texts, intents = train["text"].to_list(), train["intent"].to_list()
    result = warm_start(model, tokenizer, demos, texts, intents, cfg, data.scratch(STAGE.name), seed=p.seed)
    sft_phases(phases, result)
    ctx.log.curves(result.curves)
    with phases.time("save_checkpoint"):
        save_checkpoint(result.model, tokenizer, data.path(AGENT_SFT))
        ctx.log.checkpoint(data.path(AGENT_SFT), "")
    agent = LMPolicy(result.model, tokenizer, role="agent", max_new_tokens=cfg.max_new_tokens, greedy=True)
    heldout = data.scenarios("heldout", cfg.eval_scenarios)
    metrics = _measure(agent, heldout, train, data.utterances("test"), p.seed, phases)
    metrics.update(
        parameters=count_parameters(result.model),
        demos=len(demos),
        recovery_demos=len(recoveries),
        intent_examples=len(train) if cfg.intent is not None else 0,
        n_heldout=len(heldout),
        train_seconds=round(result.seconds, 2),
        train_tokens_per_s=round(result.tokens_per_s, 1),
        final_loss=result.final_loss,
    )
    return StageOutput(metrics=metrics, report={"phases": phases.as_dict()})


def _demonstrations(scenarios: list, cfg: Any, system: str, seed: int, phases: Phases) -> tuple[list, list]:
    """The expert's strict passes on ``scenarios``, and recovery demos on a sample of them (both in the demos)."""
    with phases.time("expert_episodes") as counts:
        demos = expert_demonstrations(scenarios, seed, refs=cfg.object_refs, agent_system=system)
        counts["episodes"] = len(scenarios)  # played; the strict passes among them are the demos
    with phases.time("recovery_episodes") as counts:
        replayed = random.Random(seed).sample(scenarios, round(cfg.recovery * len(scenarios)))
        recoveries = recovery_demonstrations(replayed, seed, refs=cfg.object_refs, agent_system=system)
        counts["episodes"] = len(replayed)
    return demos + recoveries, recoveries


def _measure(agent: Any, heldout: list, train: Any, test: Any, seed: int, phases: Phases) -> dict[str, Any]:
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


da0_beats_tfidf = report_check(
    "agent_sft", "da0_beats_tfidf", checks.da0_beats_tfidf.__doc__.split("\n\n")[0].replace("\n", " "),
    checks.da0_beats_tfidf,
)  # fmt: skip
