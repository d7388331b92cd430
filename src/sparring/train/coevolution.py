"""RL-ADA's co-evolution cycle (../shared/SEEDS.md), one cycle per call, in the paper's order.

1. Arena (:func:`play_arena`): the agent (DA) plays the current adversary (CA) on held-in scenarios x
   ``arena_runs``, both sampling. The agent wins an episode on strict PASS: W_DA = mean(strict_pass). The
   adversary wins when it misrouted an agent that identified it, stayed faithful (>= the judge's
   ``faithful_min``) and never named the intent (the judge's ``adv_won``): adv_success = mean(adv_won).
2. Pick the side (:func:`pick_side`), or none when the stop rule's gates (5.) already hold
   with this arena. The paper retrains "the side with the lower score"; each side is scored by its own wins (the
   rewards are not zero-sum), on different scales: W_DA (~0.6-0.9 here) always exceeded adv_success (~0.1-0.3),
   so comparing the rates (``train: weaker``) trained the adversary in every cycle and never the agent. The
   default (``train: behind``) compares each rate's change since the previous arena: the side that lost more
   ground trains (cycle 1: the adversary, which starts without RL; a tie: the side that did not train last).
3. Train that side with GRPO (:mod:`sparring.train.grpo`) against its frozen opponent, on fresh scenarios and
   replayed arena transcripts (:func:`gym_scenarios`). The agent (:func:`train_agent`) meets an opponent drawn
   per group from the current adversary, earlier ones and the cooperative simulator (``agent_mix``, against
   forgetting); each new adversary (:func:`train_adversary`) starts from the simulator (``adversary_init``), so
   every generation stays a realistic customer.
4. Evaluate the cycle (:func:`evaluate_cycle`): the cycle's agent, greedy as deployed, on held-out scenarios
   against the cooperative simulator (``_coop``), the current adversary (``_adv``, with its reward parts) and
   every generation (``_advpool``), with METRICS.md names.
5. Stop rule (:func:`stop_reason`): W_DA >= ``w_da_gate`` and |ΔW_DA| <= ``stability`` over ``window``
   consecutive cycles (the agent is good and no longer moving), or ``max_cycles`` cycles ran.

State between cycles is plain files (:class:`~sparring.train.cycle_state.CycleState`), and every random draw is
seeded from (seed, cycle), so a run resumed at cycle k equals an uninterrupted one.

Over 400 lines: RL-ADA's cycle in the paper's order, each of its five steps a section below.
"""

from __future__ import annotations

import random
import shutil
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from sparring.atomic import write_json
from sparring.judge import Scorer
from sparring.lm.checkpoints import load_checkpoint, save_checkpoint
from sparring.lm.policies import LMPolicy
from sparring.metrics import episode_metrics
from sparring.rollout import Episode, run_episodes
from sparring.seeds import derive_seed
from sparring.settings import CoevolutionSettings
from sparring.train.cycle_state import CycleState
from sparring.train.grpo import GRPOResult, train_side
from sparring.train.play import (
    REPLAYED,
    GameModels,
    adversary_customer,
    adversary_parts,
    against_pool,
    agent_opponents,
    cooperative_customer,
    turn_limits,
)
from sparring.train.self_training import Teacher, self_train
from sparring.world.scenarios import Scenario, as_cooperative

ROLE = {"agent": "agent", "adversary": "customer"}  # the chat role each side's model plays
METRICS_FILE = "metrics.json"
TIE = 1e-9  # changes this close are equal in the side rule (float noise: 0.5 - 0.25 against 0.75 - 0.5)


class CycleModels(GameModels):
    """A cycle's checkpoints: the agent (whose tokenizer every view is built with) and the customers it meets."""

    def __init__(self, state: CycleState, settings: CoevolutionSettings, device: str = "cpu") -> None:
        super().__init__(settings, device)
        self.agent_dir = state.agent_dir
        self.agent = self.model(state.agent_dir)

    def agent_policy(self, greedy: bool) -> LMPolicy:
        return self.agent_policy_of(self.agent_dir, greedy)


# 1. Arena ------------------------------------------------------------------------------------------------------


@dataclass
class Arena:
    episodes: list[Episode]
    agent_won: list[bool]
    adv_won: list[bool]
    adv_faithfulness: list[float] = field(default_factory=list)  # the judge's, per episode

    @property
    def w_da(self) -> float:
        return sum(self.agent_won) / max(1, len(self.agent_won))

    @property
    def adv_success(self) -> float:
        return sum(self.adv_won) / max(1, len(self.adv_won))

    @property
    def mean_adv_faithfulness(self) -> float:
        return sum(self.adv_faithfulness) / max(1, len(self.adv_faithfulness))

    def records(self, cycle: int) -> list[dict[str, Any]]:
        """The arena's episodes as transcripts for later gyms' replays."""
        return [
            {"cycle": cycle, "scenario": ep.scenario.to_dict(), "agent_won": a, "adv_won": b, "messages": ep.messages}
            for ep, a, b in zip(self.episodes, self.agent_won, self.adv_won, strict=True)
        ]


def play_arena(
    models: CycleModels, adversary_dir: str, scenarios: Sequence[Scenario], judge: Scorer, seed: int, cycle: int
) -> Arena:
    """The agent against the current adversary on ``arena_scenarios`` of ``scenarios`` (the arena set, which no
    gym or demonstration plays) x ``arena_runs``, both sampling; the agent wins on strict PASS, the adversary on
    the judge's ``adv_won``."""
    s = models.settings
    picked = _sample(scenarios, s.arena_scenarios, random.Random(derive_seed(seed, cycle, "arena"))) * s.arena_runs
    episodes = run_episodes(
        picked,
        models.agent_policy(greedy=False),
        models.adversary(adversary_dir),
        seed=derive_seed(seed, cycle, "arena-play"),
        tokenizer=models.tokenizer,
        **turn_limits(s),
    )
    scores = judge.score(episodes)
    return Arena(
        episodes,
        [bool(ep.outcome.strict_pass) for ep in episodes],
        [bool(x["adv_won"]) for x in scores],
        [float(x["adv_faithfulness"]) for x in scores],
    )


# 2. Pick the side ----------------------------------------------------------------------------------------------


def weaker_side(w_da: float, adv_success: float) -> str:
    """``train: weaker``, the literal rule: the side with the lower win rate trains; a tie trains the adversary.
    Here W_DA always exceeds adv_success (different scales), so it never trains the agent."""
    return "agent" if w_da < adv_success else "adversary"


def behind_side(w_da_history: Sequence[float], adv_success_history: Sequence[float], trained: Sequence[str]) -> str:
    """``train: behind``: the side that lost more ground since the previous arena trains.

    Δ_agent = W_DA_k - W_DA_{k-1}, Δ_adv = adv_success_k - adv_success_{k-1} (the histories end with this cycle's
    arena); the side with the lower Δ trains, once each side has trained (until then, the side that never did).
    After the adversary's gym lowers W_DA the agent trains; after the agent's gym lowers adv_success the
    adversary does. With no previous arena (cycle 1, or a state saved before
    adv_success was kept), or a tie, the side that did not train last trains (``trained``: earlier cycles'
    sides, oldest first): the adversary first, since it starts without RL, as the paper's CA."""
    other = "agent" if trained and trained[-1] == "adversary" else "adversary"
    never = [side for side in ("adversary", "agent") if side not in trained]
    if trained and never:  # each side trains once before the rule compares them: both must move to co-evolve
        return never[0]
    if len(w_da_history) < 2 or len(adv_success_history) < 2:
        return other
    d_agent = w_da_history[-1] - w_da_history[-2]
    d_adv = adv_success_history[-1] - adv_success_history[-2]
    if abs(d_agent - d_adv) <= TIE:
        return other
    return "agent" if d_agent < d_adv else "adversary"


def pick_side(
    settings: CoevolutionSettings,
    w_da_history: Sequence[float],
    adv_success_history: Sequence[float],
    trained: Sequence[str],
    stop: str | None,
) -> str:
    """The side that trains this cycle under ``settings.train`` (behind, weaker, or an ablation's fixed side):
    agent, adversary, or none when the stop rule's gates already hold (``stop == "gates"``)."""
    if stop == "gates":
        return "none"
    if settings.train == "behind":
        return behind_side(w_da_history, adv_success_history, trained)
    if settings.train == "weaker":
        return weaker_side(w_da_history[-1], adv_success_history[-1])
    return settings.train


# 3. Train that side ---------------------------------------------------------------------------------------------


def gym_scenarios(
    fresh: Sequence[Scenario],
    transcripts: Sequence[dict[str, Any]],
    side: str,
    n: int,
    replay_share: float,
    failure_share: float,
    rng: random.Random,
) -> list[Scenario]:
    """``n`` scenarios: ``replay_share`` of them replayed from transcripts (``failure_share`` the side's losses,
    the rest its wins, each topped up from the other when short), the rest fresh."""
    won = "agent_won" if side == "agent" else "adv_won"
    losses = [t for t in transcripts if not t[won]]
    wins = [t for t in transcripts if t[won]]
    n_replay = min(round(n * replay_share), len(transcripts))
    n_loss = min(round(n_replay * failure_share), len(losses))
    n_win = min(n_replay - n_loss, len(wins))
    n_loss = min(n_replay - n_win, len(losses))
    replay = rng.sample(losses, n_loss) + rng.sample(wins, n_win)
    picked = [_replayed(t, side) for t in replay]
    picked += rng.sample(list(fresh), min(n - len(picked), len(fresh)))
    return picked


def _replayed(transcript: dict[str, Any], side: str) -> Scenario:
    """A transcript's scenario for ``side``'s gym. The agent replays the customer's recorded opening, the message
    it lost (or won) on: the opponent's words are the agent's state, and a fresh sample of them would be another
    episode. Its source is :data:`REPLAYED`, so the agent's gym opens with it. The adversary's messages are its
    own actions: it writes them afresh."""
    scenario = Scenario.from_dict(transcript["scenario"])
    opening = next((str(m.get("content") or "") for m in transcript["messages"] if m.get("role") == "user"), "")
    if side != "agent" or not opening.strip():
        return scenario
    return replace(scenario, utterance=opening.strip(), utterance_source=REPLAYED)


def _sample(scenarios: Sequence[Scenario], n: int, rng: random.Random) -> list[Scenario]:
    return rng.sample(list(scenarios), min(n, len(scenarios)))


def train_agent(
    models: CycleModels, state: CycleState, gym: Sequence[Scenario], judge: Scorer, seed: int, **grpo: Any
) -> GRPOResult:
    """The agent's isolation gym: GRPO against an opponent drawn per group from ``agent_mix``."""
    s = models.settings
    opponent = agent_opponents(state, s.agent_mix, models.customer, s.coop_opening, s.adversary_opening)
    return train_side(
        models.agent, models.tokenizer, ROLE["agent"], opponent, gym, judge, s.agent_grpo, seed=seed, **grpo
    )


def self_train_agent(
    models: CycleModels, state: CycleState, gym: Sequence[Scenario], teacher: Teacher, seed: int, scratch: Path
) -> tuple[Any, dict[str, float]]:
    """The agent's gym under ``agent_recipe: self_training``: agent_rl's self-training (verified passes and the
    expert's corrections, :mod:`sparring.train.self_training`) on ``gym``, against the league ``agent_mix`` draws
    from ``state``'s generations; the trained model and each round's figures (``self_training_<key>_round<r>``)."""
    s = models.settings
    result = self_train(
        Path(state.agent_dir), Path(state.simulator_dir), gym, s, s.agent_self_training, scratch, seed=seed,
        teacher=teacher, league=state,
    )  # fmt: skip
    model, _ = load_checkpoint(result.agent_dir)
    rows = result.rounds
    return model, {f"self_training_{k}_round{r['round']}": float(v) for r in rows for k, v in r.items() if k != "round"}


def train_adversary(
    models: CycleModels, state: CycleState, gym: Sequence[Scenario], judge: Scorer, seed: int, **grpo: Any
) -> GRPOResult:
    """The adversary's gym: a new generation, from the simulator (or the current adversary), against the frozen
    greedy agent. Its start is loaded afresh: GRPO trains in place, and the cached simulator stays `_coop`."""
    s = models.settings
    start = state.simulator_dir if s.adversary_init == "simulator" else state.adversary_dir
    start_model, _ = load_checkpoint(Path(start))
    return train_side(
        start_model,
        models.tokenizer,
        ROLE["adversary"],
        models.agent_policy(greedy=True),
        gym,
        judge,
        s.adversary_grpo,
        seed=seed,
        wrap=lambda policy: adversary_customer(policy, s.adversary_opening),
        **grpo,
    )


def grpo_metrics(result: GRPOResult) -> dict[str, float]:
    return {
        "grpo_tokens_per_s": result.update_tokens_per_s,
        "grpo_seconds": result.seconds,
        "grpo_setup_seconds": result.setup_seconds,
        "grpo_rollout_seconds": result.rollout_seconds,
        "grpo_rollout_episodes": result.rollout_episodes,
        "grpo_update_seconds": result.update_seconds,
        "grpo_update_tokens": result.update_tokens,
        "grpo_trained_tokens": result.trained_tokens,
        **{f"grpo_{name}": v for name, v in result.reward_stats().items()},
    }


def train_the_side(
    side: str,
    models: CycleModels,
    state: CycleState,
    new: CycleState,
    scenarios: Sequence[Scenario],
    judge: Scorer,
    seed: int,
    out_dir: Path,
    report_to: Sequence[str],
    teacher: Teacher | None = None,
) -> dict[str, float]:
    """Train ``side`` in its gym (the agent by ``agent_recipe``: GRPO, or self-training taught by ``teacher``), save
    it under ``out_dir / side`` and point ``new`` and ``models`` at it."""
    s, k = models.settings, new.cycle
    rng = random.Random(derive_seed(seed, k, "gym"))
    self_training = side == "agent" and s.agent_recipe == "self_training"
    n = s.self_training_scenarios if self_training else s.gym_scenarios
    gym = gym_scenarios(scenarios, new.transcripts, side, n, s.replay_share, s.replay_failure_share, rng)
    if self_training:
        if teacher is None:
            raise ValueError("coevolution.agent_recipe self_training needs the expert that corrects the agent")
        scratch = out_dir / "self_training"
        model, figures = self_train_agent(models, state, gym, teacher, derive_seed(seed, k, "self-training"), scratch)
        shutil.rmtree(scratch)  # each round's agent: the last one is saved below
    else:
        train = train_agent if side == "agent" else train_adversary
        result = train(models, state, gym, judge, derive_seed(seed, k, "grpo"), report_to=report_to)
        model, figures = result.model, grpo_metrics(result)
    save_checkpoint(model, models.tokenizer, out_dir / side)
    if side == "agent":
        new.agent_dir, models.agent = str(out_dir / side), model
    else:
        new.adversary_dirs = [*state.adversary_dirs, str(out_dir / side)]
        models.put(new.adversary_dirs[-1], model)
    return figures


def _trained_line(metrics: dict[str, Any]) -> str:
    """What the gym reached, for the progress line: GRPO's reward, or self-training's strict PASS by round."""
    if "grpo_reward_first" in metrics:
        return f"reward {metrics['grpo_reward_first']:.3f} -> {metrics['grpo_reward_last']:.3f}"
    rates = [v for k, v in sorted(metrics.items()) if k.startswith("self_training_success_rate_round")]
    return "self-training, strict PASS by round " + ", ".join(f"{x:.3f}" for x in rates)


# 4. Evaluate the cycle ------------------------------------------------------------------------------------------


def evaluate_cycle(
    models: CycleModels, state: CycleState, scenarios: Sequence[Scenario], judge: Scorer, seed: int
) -> dict[str, float]:
    """The cycle's agent, greedy, against `_coop`, the current adversary (`_adv`) and the pool (`_advpool`), on the
    same scenarios and draws every cycle: cycles differ by their models only."""
    s = models.settings
    agent = models.agent_policy(greedy=True)
    play = {**turn_limits(s), "seed": derive_seed(seed, "eval")}
    coop = cooperative_customer(models.customer(state.simulator_dir, s.coop_temperature), s.coop_opening)
    metrics = episode_metrics(run_episodes(as_cooperative(scenarios), agent, coop, **play), "_coop")
    adv = run_episodes(scenarios, agent, models.adversary(state.adversary_dir), **play)
    metrics.update(episode_metrics(adv, "_adv"))
    metrics.update(adversary_parts(judge.score(adv)))
    pool = state.adversary_dirs or [state.simulator_dir]  # scenarios dealt round-robin to the generations
    pooled = against_pool(list(scenarios), agent, [models.adversary(d) for d in pool], **play)
    metrics.update(episode_metrics(pooled, "_advpool"))
    return metrics


# 5. Stop rule ---------------------------------------------------------------------------------------------------


def stop_reason(w_da_history: Sequence[float], settings: CoevolutionSettings, trained: Sequence[str]) -> str | None:
    """Why to stop after these W_DA values (one per cycle), or None to go on.

    "gates": both sides have trained (``trained``: the earlier cycles' sides), the last ``window`` values are all
    >= ``w_da_gate`` (competency) and each consecutive change among them is within ``stability``; "max_cycles":
    ``max_cycles`` cycles ran. A tiny slack absorbs float noise (0.64 -> 0.59 is a change of 0.05). Without the
    first gate a competent DA1 held the gates at once and co-evolution ended with nothing trained."""
    w, s, eps = list(w_da_history), settings, 1e-9
    n = max(s.window, 2)
    if len(w) >= n and {"agent", "adversary"} <= set(trained):
        last = w[-n:]
        steady = all(abs(b - a) <= s.stability + eps for a, b in zip(last, last[1:], strict=False))
        if steady and all(x >= s.w_da_gate - eps for x in last):
            return "gates"
    if len(w) >= s.max_cycles:
        return "max_cycles"
    return None


# The cycle ------------------------------------------------------------------------------------------------------


def run_cycle(
    state: CycleState,
    train_scenarios: Sequence[Scenario],
    eval_scenarios: Sequence[Scenario],
    judge: Scorer,
    settings: CoevolutionSettings,
    out_dir: Path,
    *,
    seed: int = 0,
    report_to: Sequence[str] = (),
    agent_gym: Sequence[Scenario] | None = None,
    arena_scenarios: Sequence[Scenario] | None = None,
    teacher: Teacher | None = None,
    log: Callable[[str], None] = lambda _: None,
) -> tuple[CycleState, dict[str, Any]]:
    """Run cycle ``state.cycle + 1``; write its checkpoints, state and metrics into ``out_dir``; return both.

    ``train_scenarios`` feed the gyms (held-in), ``eval_scenarios`` the cycle's evaluation (held-out);
    ``agent_gym``, when given, is the agent gym's fresh draw in their place (``coevolution.agent_gym: unplayed``);
    ``arena_scenarios`` (the arena set, which neither side trains on; None: the train scenarios) the arena's;
    ``teacher`` (the expert, agent_sft's rehearsal, the ids never to sample) the agent's self-training gym's; every
    draw is seeded from (``seed``, cycle).

    Over 60 lines: the cycle's steps in the module docstring's order, each timed and logged."""
    if state.stopped:
        raise ValueError(f"co-evolution already stopped ({state.stopped})")
    s, out_dir, k = settings, Path(out_dir), state.cycle + 1
    t0 = time.perf_counter()
    models = CycleModels(state, s)
    load_seconds = time.perf_counter() - t0

    t0 = time.perf_counter()
    arena_set = train_scenarios if arena_scenarios is None else arena_scenarios
    arena = play_arena(models, state.adversary_dir, arena_set, judge, seed, k)
    transcripts = (state.transcripts + arena.records(k))[-s.max_transcripts :]
    history = [*state.w_da_history, arena.w_da]
    adv_history = [*state.adv_success_history, arena.adv_success]
    metrics: dict[str, Any] = {
        "cycle": k,
        "w_da": arena.w_da,
        "arena_adv_success": arena.adv_success,
        "arena_adv_faithfulness": arena.mean_adv_faithfulness,
        "arena_seconds": time.perf_counter() - t0,
        "arena_episodes": len(arena.episodes),
        "load_seconds": load_seconds,
    }
    log(
        f"cycle {k}: arena W_DA={arena.w_da:.3f} adversary wins={arena.adv_success:.3f} "
        f"({len(arena.episodes)} episodes)"
    )

    stop = stop_reason(history, s, state.trained_history)
    side = pick_side(s, history, adv_history, state.trained_history, stop)
    new = replace(
        state, cycle=k, w_da_history=history, adv_success_history=adv_history, transcripts=transcripts, stopped=None
    )
    if side != "none":
        t0 = time.perf_counter()
        fresh = agent_gym if side == "agent" and agent_gym is not None else train_scenarios
        metrics.update(train_the_side(side, models, state, new, fresh, judge, seed, out_dir, report_to, teacher))
        metrics["train_side_seconds"] = time.perf_counter() - t0  # gym, training, checkpoint
        log(f"cycle {k}: trained the {side}: {_trained_line(metrics)}")
    new.trained_history = [*state.trained_history, side]
    new.stopped = stop  # "gates": nothing trained; "max_cycles": this was the last cycle
    metrics.update(trained=side, stop_reason=stop)

    if s.eval_scenarios > 0:
        t0 = time.perf_counter()
        metrics.update(evaluate_cycle(models, new, eval_scenarios[: s.eval_scenarios], judge, seed))
        metrics["eval_seconds"] = time.perf_counter() - t0
    new.save(out_dir)
    write_json(metrics, out_dir / METRICS_FILE)
    return new, metrics
