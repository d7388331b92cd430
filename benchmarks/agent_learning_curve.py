"""Does the agent learn from its own play? Learning curves of the agent's gym, arm by arm, side by side (issue 41).

From a run's warm start (``--cycle 0``, the default: DA0 in ``models/agent_sft`` and the simulator in
``models/simulator_sft``, which then plays the adversary, the pool and the cooperative customer of the gym's mix,
as before any adversary trained) or a finished cycle's state (``--cycle N``), every arm trains the same starting
agent against the gym's opponent mix (``coevolution.agent_mix``) on the same gym scenarios with the same seed, and
keeps the agent every ``--every`` steps. Every kept agent, and the start, then plays the same held-out scenarios greedy
against ``_advpool`` and ``_coop`` as ``evaluate`` plays them (strict PASS, routing, failure kinds), each scenario
``--draws K`` times (default 1; 1..16, else refused) under K customer draws shared by every checkpoint
(:class:`HeldoutCurve`; ``_coop`` once while greedy): figures are over every (scenario, draw). Beside each curve, per
step: the training reward's mean and spread, the share of groups with no spread, the mean |advantage|, and TRL's KL,
token entropy and clip ratio; and the rollouts' and updates' tokens/s.

Arms: ``--arm NAME:key=value,...`` overrides ``coevolution.agent_grpo`` (repeatable; default: learning rates 1e-4,
3e-4 and 1e-3, the params' other settings), for example ``--arm iapo:credit=iapo`` or
``--arm lr1e-3_clip:learning_rate=1e-3,epsilon_high=0.28``. ``--rft`` adds rejection-sampling fine-tuning at equal
episode budgets: every ``--every`` steps' worth of episodes (steps x scenarios_per_step x num_generations), the
current agent samples them at the gym's temperature against the same mix, and is SFT'd (agent_sft's phase-2
settings, ``--rft-set`` overrides) on its own strict passes. ``gain`` and ``gain_ci`` are the last checkpoint's pool
strict PASS minus the start's over (scenario, draw) and its 95% interval resampling scenarios, each with its draws
(:func:`~sparring.evaluate.intervals.paired_difference`).

A shared warm start leaves out the variance of SFT (DA0's and the simulator's seeds): ``--seed`` varies only the RL seed
(the gym's scenario draw and sampling). ``--fresh-gym N`` draws the gym's scenarios from training utterances that no
training scenario opens with, in place of ``coevolution.gym_scenarios`` of the training scenarios. ``--also-start
NAME=DIR`` plays another agent (a changed warm start, say) on the start's held-out episodes and prints its paired
difference from the start (``gain_<opp>``, ``gain_<opp>_ci``); with ``--steps 0`` no arm trains and only the starts are
played.
Prints a row per checkpoint, writes ``--plot`` (a PNG of the curves), and a JSON last line ``{"start": {...},
"draws": K, "arms": {"<arm>": {"steps": [0, E, ...], "strict_pass_advpool": [...], "strict_pass_coop": [...],
"gain": ..., "gain_ci": [low, high], "seed": ..., "train": [per-step signals]}}}``.

Usage: ``python benchmarks/agent_learning_curve.py ROOT [--cycle 0] [--steps 40] [--every 10]
[--eval-scenarios 240] [--draws 1] [--arm NAME:k=v,...] [--rft] [--fresh-gym N] [--seed 0] [--also-start NAME=DIR]
[--gym-file FILE] [--agent-reward-only] [--reward k=v,...] [--train-seconds S] [--device cpu|cuda]
[--plot curves.png] [--runs-json starts.json] [--arms-json arms.json]``. ``--runs-json`` writes the start's and every
``--also-start``'s per-episode strict PASS vs the pool and ``_coop`` (``scenario_ids`` in play order, ``draws`` per
opponent its draw indices, a 0/1 string per agent and opponent, draw-major: character i is scenario i mod n of
draw i div n).
``--gym-file`` draws the gym from a scenarios JSONL (``data/scenarios/gym.jsonl``: the cycles' unplayed gym).
``--agent-reward-only`` holds the judge's learned parts constant (``ConstantStyle``, unloaded): the agent's reward
reads the world alone.
``--reward`` changes the gym's reward weights (``judge.reward``), e.g. ``false_report=1.0``.
``--arms-json`` writes, after every checkpoint it plays, each arm's per-episode outcomes (rows of scenario id, opponent,
strict pass, failure kind, draw; draw-major) against the pool and ``_coop``, with the start's:
``benchmarks/credit_arms.py`` recomputes the intervals from them. Every checkpoint also reports what the agent's
influence graph held on its held-out episodes (``graph``: E⁺ / E⁻ edges and erring actions per episode, the share of
actions IAPO would reweight by more than 10%, and w⁻ on the erring actions of refused and misrouted episodes:
:func:`~sparring.train.iapo.credit_summary`), and a collapsed checkpoint (its agent stopped reaching the act, or one
action carries the routed mass) is named under ``collapsed`` and printed, not averaged in.
``--train-seconds`` stops each GRPO arm at a wall-clock budget and keeps the step it reached; the last kept agent
is played first, so a run cut short still reports where its arm ended. ``--device cuda`` puts every model
(and TRL's training) on a lent GPU.

One file over 400 lines: a benchmark is one script: the held-out curve, the arms (GRPO, RFT) played on it and the
printout, top to bottom.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from transformers import TrainerCallback

from benchmarks.agent_gym import overrides
from benchmarks.credit_arms import paired
from sparring.agents.leaving import gives_up
from sparring.atomic import write_json
from sparring.catalog import load_judge
from sparring.evaluate.crossplay import failure_kind, failure_rates
from sparring.evaluate.heldout import check_draws, draw_seed
from sparring.evaluate.intervals import paired_difference
from sparring.judge.rewards import DONE_REPORT, Judge
from sparring.lm.checkpoints import load_checkpoint, save_checkpoint
from sparring.lm.policies import LMPolicy
from sparring.metrics import episode_metrics
from sparring.params import ParamsError, load_params
from sparring.rollout import run_episodes
from sparring.runtime import apply_torch_threads
from sparring.seeds import DRAW_SET, derive_seed
from sparring.train.coevolution import CycleModels, agent_opponents, gym_scenarios
from sparring.train.cycle_state import CycleState
from sparring.train.cycles import absolute
from sparring.train.grpo import train_side
from sparring.train.iapo import credit_summary, failure_weights, influence_graph
from sparring.train.opponents import PerEpisodeOpponent
from sparring.train.play import GameModels, against_pool, cooperative_customer
from sparring.train.sft import train_sft
from sparring.train.world_reward import ConstantStyle
from sparring.world.answers import confirmation_answers
from sparring.world.scenarios import as_cooperative, load_scenarios, unplayed_scenarios
from sparring.world.vocab import CUSTOMER_MOVES

DEFAULT_ARMS = ("lr1e-4:learning_rate=1e-4", "lr3e-4:learning_rate=3e-4", "lr1e-3:learning_rate=1e-3")
SHOWN = ("strict_pass_advpool", "routing_acc_advpool", "strict_pass_coop", "routing_acc_coop")
RFT_SFT = "epochs=1,warmup_steps=0,learning_rate=3e-4"  # one pass over a round's passes; a round is ~25 steps
AFTER_NO = ("heard_no", "recovered_after_no", "left_after_")
GRAPH_KEYS = ("graph_advpool", "graph_coop", "graph_refused_misroute_advpool", "graph_refused_misroute_coop")
TRL_SIGNALS = ("kl", "entropy", "clip_ratio/region_mean", "loss", "grad_norm")  # TRL 1.16's log keys


class KeepEvery(TrainerCallback):
    """Saves the trained model every ``every`` optimizer steps into ``folder/step_<n>`` (a transformers callback:
    the trainer's own hook, no change to its loop)."""

    def __init__(self, every: int, tokenizer: Any, folder: Path, seconds: float = 0.0) -> None:
        self.every, self.tokenizer, self.folder, self.kept = every, tokenizer, folder, {}
        self.deadline = time.monotonic() + seconds if seconds else None  # --train-seconds: stop, keeping the last

    def on_step_end(self, args: Any, state: Any, control: Any, model: Any = None, **kwargs: Any) -> None:
        late = self.deadline is not None and time.monotonic() > self.deadline
        if state.global_step % self.every == 0 or late:
            path = self.folder / f"step_{state.global_step}"
            save_checkpoint(getattr(model, "module", model), self.tokenizer, path)
            self.kept[state.global_step] = path
        if late:
            print(f"  --train-seconds reached at step {state.global_step}: training stops", flush=True)
            control.should_training_stop = True


def start_state(root: Path, cycle: int) -> CycleState:
    """``models/cycles/cycle_<cycle>``'s state, or for cycle 0 the warm start: DA0 and the simulator alone."""
    if cycle == 0:
        missing = [d for d in ("agent_sft", "simulator_sft") if not any((root / "models" / d).glob("*.safetensors"))]
        if missing:
            raise SystemExit(f"error: {root / 'models'}: no {' or '.join(missing)} checkpoint (run those stages)")
        return absolute(CycleState(agent_dir="models/agent_sft", simulator_dir="models/simulator_sft"), root)
    folder = root / "models" / "cycles" / f"cycle_{cycle}"
    if not (folder / "state.json").is_file():
        raise SystemExit(f"error: {folder}: no finished cycle state (state.json)")
    return absolute(CycleState.load(folder), root)


def run_params(root: Path, profile: str) -> Any:
    """A finished run's params (its params.yaml under ``profile``), or a clear exit naming what is wrong."""
    try:
        return load_params(root / "params.yaml", profile)
    except (ParamsError, FileNotFoundError) as exc:
        raise SystemExit(f"error: {exc}") from None


class HeldoutCurve:
    """Held-out play of checkpoints against ``_advpool`` and ``_coop``, as ``evaluate`` plays them: the same
    scenarios and customer draws for every checkpoint, customers loaded once. Draw j's rollout seed is
    ``draw_seed(seed, j)`` (draw 0: ``heldout_seed(seed)``) and the customers draw per episode, so every checkpoint
    meets the same random numbers (common random numbers); ``_advpool`` plays ``draws`` draws, ``_coop`` one while
    it is greedy (``coop_temperature`` 0), else as many. The pool is ``state.adversary_dirs`` (the simulator alone
    when none trained, as at ``--cycle 0``): evaluate's ``_advpool`` also deals generation 0 in once adversaries
    trained; the acceptance yardstick is benchmarks/yardstick.py."""

    def __init__(
        self, state: CycleState, co: Any, held: list[Any], seed: int, device: str = "cpu", draws: int = 1
    ) -> None:
        self.models, self.held, self.seed = GameModels(co, device, episode_draws=True), held, seed
        a = co.agent_grpo
        self.turns = {"max_turns": a.max_turns, "max_calls_per_turn": a.max_calls_per_turn}
        self.draws = {"_coop": check_draws(range(draws if co.coop_temperature > 0 else 1))}
        self.draws["_advpool"] = check_draws(range(draws))
        simulator = self.models.customer(state.simulator_dir, co.coop_temperature)
        self.coop = cooperative_customer(simulator, co.coop_opening)
        dirs = state.adversary_dirs or [state.simulator_dir]
        self.pool = [self.models.adversary(d) for d in dirs]
        self.opponents = {"_coop": ["_coop"], "_advpool": [Path(d).name for d in dirs]}  # who played scenario i
        self.credit = (a.iapo_beta_plus, a.iapo_clip)

    @classmethod
    def of_run(cls, root: Path, p: Any, n: int, device: str = "cpu", draws: int = 1) -> HeldoutCurve:
        """A finished run's warm start (DA0's simulator and pool) on the run's first ``n`` held-out scenarios."""
        held = load_scenarios(root / "data" / "scenarios" / "heldout.jsonl")[:n]
        return cls(start_state(root, 0), p.coevolution, held, p.seed, device, draws)

    def play(self, agent: Any) -> dict[str, list[Any]]:
        """``agent``'s episodes on the held-out scenarios against ``_coop`` and ``_advpool``: draw by draw
        (draw-major), each draw's in the scenarios' order."""
        played: dict[str, list[Any]] = {}
        for suffix, draws in self.draws.items():
            played[suffix] = []
            for d in draws:
                turns = {**self.turns, "seed": draw_seed(self.seed, d)}
                if suffix == "_coop":
                    episodes = run_episodes(as_cooperative(self.held), agent, self.coop, **turns)
                else:
                    episodes = against_pool(self.held, agent, self.pool, **turns)
                by_id = {ep.scenario.scenario_id: ep for ep in episodes}
                played[suffix] += [by_id[s.scenario_id] for s in self.held]
        return played

    def point(self, folder: Path | str) -> dict[str, Any]:
        """A checkpoint's figures per opponent over every (scenario, draw), and its per-episode ``passes_<opp>`` and
        ``outcomes_<opp>`` rows (scenario id, opponent, strict pass, failure kind, draw), draw-major."""
        played, n = self.play(self.models.agent_policy_of(folder, greedy=True)), len(self.held)
        row: dict[str, Any] = {}
        for suffix, episodes in played.items():
            row.update(episode_metrics(episodes, suffix))
            row.update({k: v for k, v in failure_rates(episodes, suffix).items() if v})
            row.update(after_a_no(episodes, suffix))
            row.update(left_after(episodes, suffix))
            passed = [int(bool(ep.outcome.strict_pass)) for ep in episodes]
            kinds = [failure_kind(ep) or "" for ep in episodes]
            names, draws = self.opponents[suffix], self.draws[suffix]
            row[f"draws{suffix}"] = len(draws)
            row[f"passes{suffix}"] = passed
            row[f"outcomes{suffix}"] = [  # for --arms-json
                [ep.scenario.scenario_id, names[(i % n) % len(names)], passed[i], kinds[i], draws[i // n]]
                for i, ep in enumerate(episodes)
            ]
            row[f"act_reached{suffix}"] = sum(acted(ep) for ep in episodes) / max(1, len(episodes))
            graphs = [influence_graph(ep, "agent", ep.agent_mask) for ep in episodes]
            row[f"graph{suffix}"] = credit_summary(graphs, *self.credit)
            lost = [gr for gr, kind in zip(graphs, kinds, strict=True) if kind in ("refused", "misroute")]
            row[f"graph_refused_misroute{suffix}"] = failure_weights(lost, *self.credit)
        return row


def gain(before: dict[str, Any], after: dict[str, Any], suffix: str, seed: int) -> list[float]:
    """[mean, low, high]: ``after``'s strict PASS minus ``before``'s against ``suffix`` over (scenario, draw), with
    the 95% interval that resamples scenarios, each with its draws (:func:`~sparring.evaluate.intervals.
    paired_difference`)."""
    return paired_difference(*paired(before[f"outcomes_{suffix}"], after[f"outcomes_{suffix}"]), seed=seed)


def acted(episode: Any) -> bool:
    """Whether the agent called any tool that acts (not a read, a question or the end)."""
    return any(c.name not in NOT_ACTS for c in episode.log.tool_calls())


def collapse(point: dict[str, Any], start: dict[str, Any]) -> str:
    """Why a checkpoint counts as collapsed ("" when it does not), so it is reported, not averaged in: its agent
    stopped reaching the act (under half the start's share of pool episodes), or one action carries nearly all
    of its episodes' routed mass (≥ 0.9 on average, where the start's does not)."""
    reached, before = point["act_reached_advpool"], start["act_reached_advpool"]
    if reached < 0.5 * before:
        return f"no act: {reached:.2f} of pool episodes reach an act (start {before:.2f})"
    top, top_before = point["graph_advpool"]["top_action_mass_mean"], start["graph_advpool"]["top_action_mass_mean"]
    if top >= 0.9 > top_before:
        return f"one action dominates: it carries {top:.2f} of an episode's routed mass (start {top_before:.2f})"
    return ""


def after_a_no(episodes: list[Any], suffix: str) -> dict[str, float]:
    """How the agent meets a no: ``heard_no`` the share of episodes where the customer did not say yes to a
    confirmation of another intent than its own, ``recovered_after_no`` the share of those that still passed
    strictly (the recovery demonstrations' target: DA0 went on to act on the refused request)."""
    answers = [confirmation_answers(ep) for ep in episodes]
    heard = [ep for ep, said in zip(episodes, answers, strict=True) if said["other"] > said["other_yes"]]
    recovered = sum(bool(ep.outcome.strict_pass) for ep in heard)
    return {
        f"heard_no{suffix}": len(heard) / max(1, len(episodes)),
        f"recovered_after_no{suffix}": recovered / max(1, len(heard)),
    }


NOT_ACTS = {"lookup_account", "payment_details", "end_conversation", *CUSTOMER_MOVES}  # reads, questions, the end


def left_kind(messages: list[dict[str, Any]], called: set[str], tool: str) -> str:
    """What the agent's last message in ``messages`` did before the customer left (``called``: every tool the
    episode called; ``tool``: the scenario's): ``claimed_done_wrong_act`` (the expert's "All done ... taken care
    of" report after acting with another tool), ``claimed_done_no_act`` (that report with no act but reads, or
    only the scenario's own tool, refused: a left episode never has it succeed), ``confirm``, ``question``
    (``ask_customer`` or words ending in a question mark) or ``said`` (the rest)."""
    last = next((m for m in reversed(messages) if m.get("role") == "assistant"), {})
    calls = {c.get("function", c).get("name") for c in (last.get("tool_calls") or [])}
    text = str(last.get("content") or "").strip()
    if DONE_REPORT.search(text):
        return "claimed_done_wrong_act" if called - NOT_ACTS - {tool} else "claimed_done_no_act"
    if "confirm_request" in calls:
        return "confirm"
    return "question" if "ask_customer" in calls or text.endswith("?") else "said"


def left_after(episodes: list[Any], suffix: str) -> dict[str, float]:
    """:func:`left_kind` of every episode a customer left (``failure_left``), as shares of all episodes. The
    customer leaves politely after a false report: the episode ends unresolved, as any leaving does."""
    kinds = [
        left_kind(ep.messages, {c.name for c in ep.log.tool_calls()}, ep.scenario.tool)
        for ep in episodes
        if failure_kind(ep) == "left"
    ]
    n = max(1, len(episodes))
    return {f"left_after_{k}{suffix}": kinds.count(k) / n for k in sorted(set(kinds))}


def step_signals(result: Any, updates_per_batch: int) -> list[dict[str, float]]:
    """Per optimizer step: TRL's logged figures beside the figures of the rollout it trained on (sparring's record;
    with ``num_iterations`` = μ > 1, one rollout feeds μ steps)."""
    rows = []
    for log in result.curves:
        if "step" not in log or "loss" not in log:
            continue
        step = int(log["step"])
        batch = result.steps[min((step - 1) // updates_per_batch, len(result.steps) - 1)]
        rollout = {k: round(float(v), 4) for k, v in batch.items() if k != "step"}
        rows.append({"step": step, **rollout, **{k: log[k] for k in TRL_SIGNALS if k in log}})
    return rows


def fresh_scenarios(root: Path, p: Any, train: list[Any], n: int, seed: int) -> list[Any]:
    """``n`` gym scenarios from the ingested training utterances that no training scenario opens with: DA0's
    demonstrations played the training scenarios, so their groups mostly all pass; these it has never played. An
    opening that already leaves the chat ends the episode before the agent speaks: nothing to train on."""
    import polars as pl

    rows = pl.read_parquet(root / "data" / "ingest" / "train.parquet")
    cfg = p.scenarios
    return unplayed_scenarios(rows, train, n, seed, dict(cfg.personas), n_customers=cfg.n_customers, skip=gives_up)


def beside_start(curve: HeldoutCurve, start: dict[str, Any], folder: Path, name: str, seed: int) -> dict[str, Any]:
    """Another warm start (``--also-start``) on the same held-out play, with its paired difference from the start's
    pool and ``_coop`` strict PASS: a change to the warm start measured without a second simulator or judge."""
    row = curve.point(folder)
    print(f"{name}: " + ", ".join(f"{k} {row[k]:.3f}" for k in SHOWN), flush=True)
    figures = {k: v for k, v in row.items() if not k.startswith(("passes_", "outcomes_"))}
    figures["passes"] = {suffix: row[f"passes_{suffix}"] for suffix in ("advpool", "coop")}  # for --runs-json
    for suffix in ("advpool", "coop"):
        mean, low, high = gain(start, row, suffix, seed)
        figures[f"gain_{suffix}"], figures[f"gain_{suffix}_ci"] = mean, [low, high]
        print(f"  {name} - start, {suffix} strict PASS: {mean:+.3f} [{low:+.3f}, {high:+.3f}]", flush=True)
    return figures


def arm_summary(name: str, steps: list[int], points: list[dict[str, Any]], arm: dict, seed: int) -> dict[str, Any]:
    """One arm's curve over its checkpoints (``points[0]``: the start), its last checkpoint's pool gain over the
    start with the paired interval over (scenario, draw), its collapsed checkpoints (printed), and its training."""
    mean, low, high = gain(points[0], points[-1], "advpool", seed)
    start = points[0]
    collapsed = {step: why for step, row in zip(steps, points, strict=True) if (why := collapse(row, start))}
    print(f"  {name}: pool strict PASS gain {mean:+.3f} [{low:+.3f}, {high:+.3f}]", flush=True)
    for step, why in collapsed.items():
        print(f"  {name} step {step}: COLLAPSED ({why}): report it, do not average it in", flush=True)
    return {
        "steps": steps,
        **{k: [row[k] for row in points] for k in SHOWN},
        "failures": [{k: v for k, v in row.items() if k.startswith("failure_")} for row in points],
        "after_no": [{k: v for k, v in row.items() if k.startswith(AFTER_NO)} for row in points],
        "act_reached_advpool": [row["act_reached_advpool"] for row in points],
        "graph": [{k: row[k] for k in GRAPH_KEYS} for row in points],
        "collapsed": collapsed,
        "gain": mean,
        "gain_ci": [low, high],
        "seed": seed,
        **{k: v for k, v in arm.items() if k != "kept"},
    }


def grpo_arm(
    state: CycleState, settings: Any, ctx: dict[str, Any], every: int, out: Path, seconds: float = 0.0
) -> dict[str, Any]:
    """One GRPO arm from the starting agent: the checkpoints kept every ``every`` steps (and where ``seconds`` of
    training ran out) and the per-step signals."""
    model, _ = load_checkpoint(Path(state.agent_dir))
    keep = KeepEvery(every, ctx["tok"], out, seconds)
    game = (ctx["tok"], "agent", ctx["opponent"], ctx["gym"], ctx["judge"], settings)
    result = train_side(model, *game, seed=ctx["seed"], callbacks=[keep])
    signals = step_signals(result, settings.num_iterations)
    rollout_tokens = sum(s["update_tokens"] for s in result.steps)
    return {
        "kept": keep.kept,
        "train": signals,
        "gym_seconds": result.seconds,
        "rollout_tokens_per_s": rollout_tokens / max(result.rollout_seconds, 1e-9),
        "update_tokens_per_s": result.update_tokens_per_s,
    }


def rft_arm(state: CycleState, grpo: Any, sft: Any, ctx: dict[str, Any], steps: int, every: int, out: Path) -> dict:
    """Rejection-sampling fine-tuning at GRPO's episode budget: per ``every`` steps' worth of episodes, the current
    agent samples them against the gym's mix and is SFT'd on its own strict passes."""
    model, _ = load_checkpoint(Path(state.agent_dir))
    per_round = every * grpo.scenarios_per_step * grpo.num_generations
    rng, kept, rows = random.Random(ctx["seed"]), {}, []
    for done in range(every, steps + 1, every):
        picked = [rng.choice(ctx["gym"]) for _ in range(per_round // grpo.num_generations)]
        picked = [s for s in picked for _ in range(grpo.num_generations)]  # G samples of each, as a GRPO group
        draw = derive_seed(ctx["seed"], "rft", done)
        chosen = [ctx["opponent"](s, derive_seed(draw, i // grpo.num_generations)) for i, s in enumerate(picked)]
        agent = LMPolicy(
            model.eval(), ctx["tok"], "agent", max_new_tokens=grpo.max_new_tokens, temperature=grpo.temperature
        )
        t0 = time.perf_counter()
        episodes = run_episodes(
            picked,
            agent,
            PerEpisodeOpponent(chosen, ctx["tok"]),
            max_turns=grpo.max_turns,
            max_calls_per_turn=grpo.max_calls_per_turn,
            seed=draw,
            tokenizer=ctx["tok"],
        )
        passes = [ep.messages for ep in episodes if ep.outcome.strict_pass]
        row = {"step": done, "episodes": len(episodes), "passes": len(passes), "rollout_s": time.perf_counter() - t0}
        if passes:
            result = train_sft(model, ctx["tok"], passes, sft, out / "sft", seed=ctx["seed"])
            model = result.model
            row.update({"sft_loss": result.final_loss, "sft_s": result.seconds})
        rows.append(row)
        save_checkpoint(model, ctx["tok"], out / f"step_{done}")
        kept[done] = out / f"step_{done}"
        print(f"  rft step {done}: {len(passes)}/{len(episodes)} strict passes kept", flush=True)
    return {"kept": kept, "train": rows}


def plot(curves: dict[str, Any], start: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(10, 4), sharey=True)
    for ax, key, title in zip(
        axes, ("strict_pass_advpool", "strict_pass_coop"), ("vs _advpool", "vs _coop"), strict=True
    ):
        for name, arm in curves.items():
            ax.plot(arm["steps"], arm[key], marker="o", label=name)
        ax.axhline(start[key], color="grey", linestyle=":", label="start")
        ax.set_title(f"held-out strict PASS {title}")
        ax.set_xlabel("optimizer steps (RFT: equal episodes)")
    axes[0].set_ylabel("strict PASS")
    axes[1].legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def main(argv: list[str] | None = None) -> int:
    """The start played, then every arm trained and its kept agents played, curve by curve.
    Over 60 lines: the benchmark's steps in the order the printout reads them."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("root", type=Path, help="a project folder whose warm-start stages (or cycles) ran")
    parser.add_argument("--cycle", type=int, default=0, help="0: DA0 and the simulator; N: cycle_N's state")
    parser.add_argument("--steps", type=int, default=40, help="optimizer steps per arm (0: play the starts only)")
    parser.add_argument("--every", type=int, default=10, help="evaluate every K steps")
    parser.add_argument("--eval-scenarios", type=int, default=240)
    parser.add_argument("--arm", action="append", default=[], help="NAME:key=value,... (agent_grpo overrides)")
    parser.add_argument("--rft", action="store_true", help="add the rejection-sampling fine-tuning arm")
    parser.add_argument("--rft-set", default=RFT_SFT, help="agent_sft.sft overrides for the RFT arm")
    parser.add_argument("--fresh-gym", type=int, default=0, help="N gym scenarios from unplayed training utterances")
    parser.add_argument("--seed", type=int, default=0, help="the RL seed (the warm start is shared)")
    parser.add_argument(
        "--also-start", action="append", default=[], help="NAME=DIR: another agent played beside the start, paired"
    )
    parser.add_argument("--gym-file", type=Path, default=None, help="gym scenarios from this scenarios JSONL")
    parser.add_argument(
        "--agent-reward-only", action="store_true", help="skip the judge's oracle and discriminator (adversary terms)"
    )
    parser.add_argument("--reward", default="", help="judge.reward overrides for the gym, e.g. false_report=1.0")
    parser.add_argument("--train-seconds", type=float, default=0, help="stop each GRPO arm's training after this")
    parser.add_argument("--device", default="cpu", help="cpu, or cuda where a GPU is lent (models and training)")
    parser.add_argument("--profile", default="default")
    parser.add_argument("--plot", type=Path, default=None, help="write the curves as a PNG here")
    parser.add_argument("--draws", type=int, default=1, help=f"K customer draws per held-out scenario, 1..{DRAW_SET}")
    parser.add_argument(
        "--runs-json", type=Path, default=None, help="write the starts' per-episode strict PASS (ids, 0/1) here"
    )
    parser.add_argument(
        "--arms-json", type=Path, default=None, help="write every checkpoint's per-episode outcomes (rows) here"
    )
    args = parser.parse_args(argv)
    if not 1 <= args.draws <= DRAW_SET:
        parser.error(f"--draws {args.draws}: K must be 1..{DRAW_SET} (draw indices 0..{DRAW_SET - 1})")
    if args.every < 1 or (args.steps and args.steps < args.every):
        raise SystemExit("error: --every must be >= 1 and --steps 0 or >= --every")
    if args.gym_file and (args.fresh_gym or not args.gym_file.is_file()):
        raise SystemExit(f"error: --gym-file {args.gym_file}: no such file, or given with --fresh-gym")
    also = dict(text.partition("=")[::2] for text in args.also_start)
    for name, folder in also.items():
        if not name or not any(Path(folder).glob("*.safetensors")):
            raise SystemExit(f"error: --also-start {name}={folder}: expected NAME=DIR with a checkpoint in DIR")
    root = args.root.resolve()
    p = run_params(root, args.profile)
    judge_params = p.judge.model_copy(update={"reward": overrides(args.reward, p.judge.reward)})
    apply_torch_threads(p.runtime.torch_threads)
    co = p.coevolution
    state = start_state(root, args.cycle)
    base = co.agent_grpo.replace(max_steps=max(args.steps, 1), rollout_ahead=0)  # arms share the cores: one each
    arms = {}
    for text in (args.arm or DEFAULT_ARMS) if args.steps else ():  # --steps 0: the starts alone
        name, _, changes = text.partition(":")
        arms[name.strip() or changes] = overrides(changes, base)
    seed = derive_seed(p.seed, args.cycle + 1, "grpo", args.seed)
    models = CycleModels(state, co, args.device)
    train = load_scenarios(root / "data" / "scenarios" / "train.jsonl")
    rng = random.Random(derive_seed(p.seed, args.cycle + 1, "gym", args.seed))
    gym = gym_scenarios(
        train, state.transcripts, "agent", co.gym_scenarios, co.replay_share, co.replay_failure_share, rng
    )
    if args.fresh_gym:
        gym = fresh_scenarios(root, p, train, args.fresh_gym, derive_seed(p.seed, "fresh-gym", args.seed))
    if args.gym_file:
        gym = load_scenarios(args.gym_file)
    if args.agent_reward_only:
        judge = Judge(ConstantStyle(), judge_params.reward, max_turns=base.max_turns)
    else:
        judge = load_judge(root / "models" / "judge", judge_params, base.max_turns)
    opponent = agent_opponents(state, dict(co.agent_mix), models.customer, co.coop_opening, co.adversary_opening)
    ctx = {"tok": models.tokenizer, "opponent": opponent, "gym": gym, "judge": judge, "seed": seed}
    held = load_scenarios(root / "data" / "scenarios" / "heldout.jsonl")[: args.eval_scenarios]
    curve = HeldoutCurve(state, co, held, p.seed, args.device, args.draws)
    start = curve.point(state.agent_dir)
    print("start: " + ", ".join(f"{k} {start[k]:.3f}" for k in SHOWN), flush=True)
    others = {name: beside_start(curve, start, Path(folder), name, args.seed) for name, folder in also.items()}
    passes = {"start": {k: start[f"passes_{k}"] for k in ("advpool", "coop")}}
    passes.update({name: row.pop("passes") for name, row in others.items()})
    ids = {"scenario_ids": [sc.scenario_id for sc in held], "draws": {k[1:]: v for k, v in curve.draws.items()}}
    if args.runs_json:  # per-episode strict PASS of the start and every --also-start (ids, draws and 0/1, no texts)
        flags = {name: {k: "".join(map(str, v)) for k, v in row.items()} for name, row in passes.items()}
        args.runs_json.write_text(json.dumps({**ids, "strict_pass": flags}))
    outcomes: dict[str, Any] = {"start": {k: start[f"outcomes_{k}"] for k in ("advpool", "coop")}, "arms": {}}
    out: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="sparring-curve-") as scratch:
        runs = {name: ("grpo", s) for name, s in arms.items()}
        if args.rft and args.steps:
            runs["rft"] = ("rft", overrides(args.rft_set, p.agent_sft.sft))
        for name, (kind, settings) in runs.items():
            folder = Path(scratch) / name
            print(f"{name}: training {args.steps} steps, keeping every {args.every}", flush=True)
            if kind == "grpo":
                arm = grpo_arm(state, settings, ctx, args.every, folder, args.train_seconds)
            else:
                arm = rft_arm(state, base, settings, ctx, args.steps, args.every, folder)
            steps = [0, *sorted(arm["kept"])]
            played = {0: start}
            # the last first: a run cut short still reports where its arm ended
            for step in [steps[-1], *steps[1:-1]] if len(steps) > 1 else []:
                played[step] = row = curve.point(arm["kept"][step])
                print(f"  {name} step {step:3d}: " + ", ".join(f"{k} {row[k]:.3f}" for k in SHOWN), flush=True)
                if args.arms_json:  # after every checkpoint: a run cut short keeps what it measured
                    kept = outcomes["arms"].setdefault(name, {"seed": args.seed, "checkpoints": {}})["checkpoints"]
                    kept[str(step)] = {k: row[f"outcomes_{k}"] for k in ("advpool", "coop")}
                    write_json({**ids, **outcomes}, args.arms_json)
            out[name] = arm_summary(name, steps, [played[step] for step in steps], arm, args.seed)
    if args.plot:
        plot(out, start, args.plot)
    head = {k: v for k, v in start.items() if not k.startswith(("passes_", "outcomes_"))}
    gym_note = {"scenarios": len(gym), "fresh": bool(args.fresh_gym), "file": str(args.gym_file or "")}
    summary = {"root": str(root), "cycle": args.cycle, "eval_scenarios": len(held), "draws": args.draws}
    summary.update(gym=gym_note, reward=judge_params.reward.model_dump(), start=head, also_start=others, arms=out)
    print(json.dumps(summary))
    return 0


if __name__ == "__main__":
    sys.exit(main())
