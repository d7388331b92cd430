"""Asset `simulator_rl`: the customer simulator, stage 2 of TRACER (GRPO on replayed sessions), and both
simulators' fidelity on the same held-out sessions, with DA0 played against each."""

from __future__ import annotations

from typing import Any

from pipelines.stages import Stage, StageContext, StageOutput, stage_asset
from sparring.catalog import AGENT_SFT, FIDELITY, SIMULATOR_RL, SIMULATOR_SFT
from sparring.evaluate.ending_ceiling import simulator_ceiling
from sparring.evaluate.fidelity import better_count, simulator_fidelity
from sparring.judge.rewards import TrainedBackend
from sparring.lm.checkpoints import save_checkpoint
from sparring.lm.policies import LMPolicy
from sparring.timing import Phases
from sparring.train.tracer import train_simulator_rl

STAGE = Stage(
    name="simulator_rl",
    description="Customer simulator (TRACER stage 2): multi-turn GRPO on replayed training sessions against the "
    "scripted expert, rewarded by how the session ends and how its customer turns follow the real ones; both "
    "simulators' fidelity on the same held-out sessions, and DA0 against each.",
    params=("simulator_rl", "agent_sft"),
    outs=(SIMULATOR_RL,),
    upstream=("ingest", "scenarios", "judge_models", "simulator_sft", "agent_sft"),
    # started first when ready: evaluate waits for it, and its ~20 min outlast the cycles and peer_rl beside it
    priority=1,
    headline_metrics=("rl.outcome_f1", "sft.outcome_f1", "rl_better_on"),
    group="warm_start",
    kinds=("pytorch", "huggingface", "mlflow"),
)


def _fidelity(ctx: StageContext, model: Any, tokenizer: Any, da0: Any, judge: tuple[Any, Any]) -> dict[str, float]:
    p, data = ctx.params, ctx.catalog
    cfg = p.simulator_rl
    # Sampled, not greedy: a simulator stands for a population of customers, and greedy decoding would give every
    # context one ending, so no persona's ending rates could match the real ones.
    t = cfg.eval_temperature
    policy = LMPolicy(
        model, tokenizer, role="customer", max_new_tokens=cfg.max_new_tokens, temperature=t or 1.0, greedy=t == 0
    )
    agent = LMPolicy(da0, tokenizer, role="agent", max_new_tokens=p.agent_sft.max_new_tokens, greedy=True)
    return simulator_fidelity(
        policy,
        data.scenarios("heldout", cfg.eval_dialogues),
        data.dialogues("test"),
        *judge,
        seed=p.seed,
        max_dialogues=cfg.eval_dialogues,
        agent_under_test=agent,
    )


@stage_asset(STAGE)
def simulator_rl(ctx: StageContext) -> StageOutput:
    p, data, phases = ctx.params, ctx.catalog, Phases()
    judge = data.judge_models()
    da0, _ = data.checkpoint(AGENT_SFT)
    model, tokenizer = data.checkpoint(SIMULATOR_SFT)
    with phases.time("fidelity_sft") as counts:  # before training: GRPO trains these weights in place
        sft = _fidelity(ctx, model, tokenizer, da0, judge)
        counts["episodes"] = int(sft.get("n_sim_episodes", 0) + sft.get("n_replayed", 0))
    from sparring.judge.oracle import embed  # deferred: loads the MiniLM encoder

    with phases.time("grpo") as counts:
        result, history = train_simulator_rl(
            model, tokenizer, data.dialogues("train"), p.simulator_rl, embedder=embed, judge=TrainedBackend(*judge),
            seed=p.seed,
        )  # fmt: skip
        counts["episodes"] = result.rollout_episodes
    ctx.log.curves(result.curves)
    for row in history:
        for name, value in row.items():
            if name != "step":
                ctx.log.trajectory(f"train_{name}", value, int(row["step"]))
    with phases.time("fidelity_rl") as counts:
        rl = _fidelity(ctx, result.model, tokenizer, da0, judge)
        counts["episodes"] = int(rl.get("n_sim_episodes", 0) + rl.get("n_replayed", 0))
    ceiling = _ceiling(ctx, phases)
    with phases.time("save_checkpoint"):  # both stages' fidelity beside the weights: evaluate's `simulator`
        results = {FIDELITY: {"profile": p.profile, "sft": sft, "rl": rl, "ceiling": ceiling}}
        save_checkpoint(result.model, tokenizer, data.path(SIMULATOR_RL), results)
        ctx.log.checkpoint(data.path(SIMULATOR_RL), "")
    report = {"phases": phases.as_dict(), "sft": sft, "rl": rl, "ceiling": ceiling, "train_history": history}
    metrics = {**_metrics(sft, rl, result, history), **{f"ceiling.{k}": v for k, v in ceiling.items()}}
    return StageOutput(metrics=metrics, report={**report, "steps": result.steps})


def _ceiling(ctx: StageContext, phases: Phases) -> dict[str, float]:
    """The best ending fidelity any simulator reaches on the same held-out sessions, against the same expert."""
    cfg = ctx.params.simulator_rl
    if not cfg.ceiling_draws:
        return {}
    with phases.time("ceiling") as counts:
        test = ctx.catalog.dialogues("test").head(cfg.eval_dialogues)
        counts["episodes"] = cfg.ceiling_draws * len(test)
        return simulator_ceiling(ctx.catalog.dialogues("train"), test, cfg.ceiling_draws, ctx.params.seed)


def _metrics(sft: dict[str, float], rl: dict[str, float], result: Any, history: list[dict]) -> dict[str, float]:
    """Both simulators' fidelity side by side, how many figures RL wins, and the training's first and last step."""
    metrics = {
        **{f"sft.{k}": v for k, v in sft.items()},
        **{f"rl.{k}": v for k, v in rl.items()},
        "rl_better_on": better_count(sft, rl),  # of outcome F1, group error, trajectory distance
        "train_seconds": round(result.seconds, 2),
        "train_episodes": result.rollout_episodes,
        # the rewards TRL saw are group-normalized (mean 0 by construction): the raw parts per step say more
        "train_frac_zero_std_groups": result.reward_stats().get("frac_zero_std_groups", 0.0),
    }
    if history:
        first, last = history[0], history[-1]
        metrics.update({f"train_first_{k}": v for k, v in first.items() if k != "step"})
        metrics.update({f"train_last_{k}": v for k, v in last.items() if k != "step"})
    return metrics
