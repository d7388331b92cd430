"""RL-ADA's co-evolution cycle (../shared/SEEDS.md), one cycle per call, in the paper's order.

    1. Arena: the agent (DA) plays the current adversary (CA) on held-in scenarios x ``arena_runs`` (both sample,
       so the runs differ). The agent wins an episode on the judge's strict PASS: W_DA = mean(strict_pass).
       The adversary wins when it misrouted an agent that identified it (``adv_misroute``), stayed faithful
       (faithfulness >= the judge's ``faithful_min``) and never named the intent (the judge's ``adv_won``):
       adv_success = mean(adversary won).
    2. Stop rule (:func:`stop_reason`): W_DA >= 0.60 and |ΔW_DA| <= 0.05 over two consecutive cycles — the
       agent is good and no longer moving — or the cycle budget is spent. When the gates fire, nothing trains.
    3. The weaker side (lower of W_DA and adv_success; the rewards are not zero-sum, so each side is scored by
       its own wins) trains with GRPO (:mod:`sparring.train.grpo`) in the isolation gym against its frozen
       opponent. Against forgetting, the agent's opponent is drawn per group from the current adversary, earlier
       adversaries and the cooperative simulator (``agent_mix``); each new adversary starts from the simulator
       checkpoint (``adversary_init``), so every generation stays a realistic customer.
    4. Training data: fresh scenarios plus recent arena transcripts, mixed 70% failures / 30% successes of the
       trained side. A replayed transcript enters GRPO as its scenario: a fresh group of G episodes replays the
       hidden goal that beat (or did not beat) the side. The agent's groups also replay the customer's recorded
       opening, the message the agent lost on (later customer turns are the opponent's); the adversary writes its
       messages afresh, since they are what it learns. Replaying whole prefixes would need the world, the
       session and the opponent's sampling state mid-episode; replaying the opening keeps every group a
       like-for-like baseline (a group shares its opponent's messages until the agent's differ:
       ``opponents.SharedReplies``), and the failure-heavy mix puts the groups where rewards still spread.
    5. Evaluation of the cycle's agent (greedy, as deployed) on the given scenarios against the cooperative
       simulator (``_coop``, every persona cooperative, at ``coop_temperature``, continuing the scenario's own
       utterance unless ``coop_opening`` is "simulator"), the current adversary
       (``_adv``, plus its reward parts) and every adversary generation (``_advpool``), with METRICS.md names.

State between cycles is plain files (:class:`CycleState`: JSON, JSONL transcripts, checkpoint folders), and every
random draw is seeded from (seed, cycle), so a run resumed at cycle k equals an uninterrupted one.
"""

from __future__ import annotations

import json
import random
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

from sparring.agents.policies import LMPolicy, OpensWithUtterance, Policy
from sparring.atomic import write_json
from sparring.rollout import Episode, episode_metrics, run_episodes
from sparring.train.checkpoints import load_checkpoint, save_checkpoint
from sparring.train.grpo import GRPOSettings, Scorer, derive_seed, train_side
from sparring.train.opponents import adversary_customer, against_pool, cooperative_customer, customer_policy
from sparring.world.scenarios import Scenario, as_cooperative

REPLAYED = "arena_replay"  # utterance_source of an agent-gym scenario whose utterance is a recorded opening

STATE_FILE, TRANSCRIPTS_FILE, METRICS_FILE = "state.json", "transcripts.jsonl", "metrics.json"


@dataclass
class CoevolutionSettings:
    agent: GRPOSettings = field(default_factory=GRPOSettings)  # the agent's gym; its max_new_tokens everywhere
    adversary: GRPOSettings = field(default_factory=GRPOSettings)  # the adversary's gym; its temperature everywhere
    arena_scenarios: int = 24  # held-in scenarios per arena
    arena_runs: int = 2
    gym_scenarios: int = 32  # scenarios a gym samples its groups from
    replay_share: float = 0.5  # of them, from recent transcripts
    replay_failure_share: float = 0.7  # of the replayed, the trained side's failures
    max_transcripts: int = 512  # recent transcripts kept in the state
    agent_mix: dict[str, float] = field(default_factory=lambda: {"adversary": 0.5, "pool": 0.25, "coop": 0.25})
    adversary_init: str = "simulator"  # or "current": continue from the last adversary
    adversary_opening: str = "utterance"  # adversaries continue the scenario's utterance, or "own": write it all
    coop_temperature: float = 0.0  # the cooperative simulator in the cycle's evaluation (0: greedy)
    coop_opening: str = "utterance"  # ... opening with the scenario's utterance, or "simulator": its own words
    train: str = "weaker"  # which side trains: the weaker (RL-ADA), or always "agent" / "adversary" (ablations)
    eval_scenarios: int = 24  # per opponent; 0 skips evaluation
    w_da_gate: float = 0.60
    stability: float = 0.05
    window: int = 2  # consecutive cycles both gates must hold over
    max_cycles: int = 8
    seed: int = 0


@dataclass
class CycleState:
    """Where co-evolution stands after ``cycle`` finished cycles; paths are stored as given."""

    agent_dir: str
    simulator_dir: str
    adversary_dirs: list[str] = field(default_factory=list)  # generations, oldest first; the last is current
    cycle: int = 0
    w_da_history: list[float] = field(default_factory=list)
    trained_history: list[str] = field(default_factory=list)
    transcripts: list[dict[str, Any]] = field(default_factory=list)  # recent arena episodes, oldest first
    stopped: str | None = None  # why co-evolution stopped; None while it goes on

    @property
    def adversary_dir(self) -> str:
        """The current adversary: the last generation, or the simulator before the adversary ever trained."""
        return self.adversary_dirs[-1] if self.adversary_dirs else self.simulator_dir

    def save(self, folder: Path) -> None:
        folder = Path(folder)
        state = {k: v for k, v in asdict(self).items() if k != "transcripts"}
        folder.mkdir(parents=True, exist_ok=True)
        tmp = folder / f".{TRANSCRIPTS_FILE}.tmp"
        tmp.write_text("".join(json.dumps(t, sort_keys=True, default=str) + "\n" for t in self.transcripts))
        tmp.replace(folder / TRANSCRIPTS_FILE)
        write_json(state, folder / STATE_FILE)  # last: a folder with state.json is complete

    @classmethod
    def load(cls, folder: Path) -> CycleState:
        folder = Path(folder)
        state = json.loads((folder / STATE_FILE).read_text())
        lines = (folder / TRANSCRIPTS_FILE).read_text().splitlines()
        return cls(**state, transcripts=[json.loads(x) for x in lines if x.strip()])


def stop_reason(
    w_da_history: Sequence[float], gate: float = 0.60, tolerance: float = 0.05, window: int = 2, max_cycles: int = 8
) -> str | None:
    """Why to stop after these W_DA values (one per cycle), or None to go on.

    "gates": the last ``window`` values are all >= ``gate`` (competency) and each consecutive change among them is
    within ``tolerance`` (stability); "max_cycles": ``max_cycles`` cycles ran. A tiny slack absorbs float noise
    (0.64 -> 0.59 is a change of 0.05)."""
    w = list(w_da_history)
    eps = 1e-9
    if len(w) >= max(window, 2):
        last = w[-max(window, 2) :]
        steady = all(abs(b - a) <= tolerance + eps for a, b in zip(last, last[1:], strict=False))
        if steady and all(x >= gate - eps for x in last):
            return "gates"
    if len(w) >= max_cycles:
        return "max_cycles"
    return None


def weaker_side(w_da: float, adv_success: float) -> str:
    """The side with the lower win rate trains; a tie trains the adversary (it starts without RL)."""
    return "agent" if w_da < adv_success else "adversary"


def adversary_parts(scores: Sequence[dict[str, float]], suffix: str = "") -> dict[str, float]:
    """The judge's adversary reward parts over episodes, averaged, with ``suffix``; adv_success is its win rate."""
    n = max(1, len(scores))
    parts = {
        "adv_success": sum(x["adv_won"] for x in scores) / n,
        "adv_misroute": sum(x["adv_misroute"] for x in scores) / n,
        "adv_faithfulness": sum(x["adv_faithfulness"] for x in scores) / n,
        "adv_realism": sum(x["adv_realism"] for x in scores) / n,
        "adv_reward": sum(x["adv_reward"] for x in scores) / n,
    }
    return {f"{k}{suffix}": v for k, v in parts.items()}


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


class CycleModels:
    """Checkpoints loaded once per cycle, sharing the agent's tokenizer (so views are built with one vocabulary)."""

    def __init__(self, agent_dir: str) -> None:
        self.agent, self.tokenizer = load_checkpoint(Path(agent_dir))
        self._cache: dict[str, Any] = {}

    def model(self, folder: str) -> Any:
        if folder not in self._cache:
            model, tok = load_checkpoint(Path(folder))
            if tok.get_vocab() != self.tokenizer.get_vocab():
                raise ValueError(f"{folder}: tokenizer differs from the agent's")
            self._cache[folder] = model.eval()
        return self._cache[folder]


def run_cycle(
    state: CycleState,
    train_scenarios: Sequence[Scenario],
    eval_scenarios: Sequence[Scenario],
    judge: Scorer,
    settings: CoevolutionSettings,
    out_dir: Path,
    *,
    report_to: Sequence[str] = (),
    log: Callable[[str], None] = lambda _: None,
) -> tuple[CycleState, dict[str, Any]]:
    """Run cycle ``state.cycle + 1``; write its checkpoints, state and metrics into ``out_dir``; return both.

    ``train_scenarios`` feed the arena and the gym (held-in), ``eval_scenarios`` the cycle's evaluation (held-out).
    """
    if state.stopped:
        raise ValueError(f"co-evolution already stopped ({state.stopped})")
    s, out_dir = settings, Path(out_dir)
    k = state.cycle + 1
    a_cfg, c_cfg = s.agent, s.adversary
    turns = {"max_turns": a_cfg.max_turns, "max_calls_per_turn": a_cfg.max_calls_per_turn}
    models = CycleModels(state.agent_dir)
    tok = models.tokenizer

    def agent_policy(model: Any, greedy: bool) -> LMPolicy:
        return LMPolicy(
            model, tok, "agent", max_new_tokens=a_cfg.max_new_tokens, temperature=a_cfg.temperature, greedy=greedy
        )

    def customer(folder: str, temperature: float = c_cfg.temperature) -> LMPolicy:
        return customer_policy(models.model(folder), tok, c_cfg.max_new_tokens, temperature)

    def adversary(folder: str) -> Policy:
        return adversary_customer(customer(folder), s.adversary_opening)

    # 1. Arena: held-in scenarios x runs, both sides sampling.
    t0 = time.perf_counter()
    arena = _sample(train_scenarios, s.arena_scenarios, random.Random(derive_seed(s.seed, k, "arena"))) * s.arena_runs
    episodes = run_episodes(
        arena,
        agent_policy(models.agent, False),
        adversary(state.adversary_dir),
        seed=derive_seed(s.seed, k, "arena-play"),
        tokenizer=tok,
        **turns,
    )
    scores = judge.score(episodes)
    agent_won = [bool(ep.outcome.strict_pass) for ep in episodes]
    adv_won = [bool(sc["adv_won"]) for sc in scores]
    w_da = sum(agent_won) / max(1, len(agent_won))
    arena_adv = sum(adv_won) / max(1, len(adv_won))
    records = [
        {"cycle": k, "scenario": ep.scenario.to_dict(), "agent_won": a, "adv_won": b, "messages": ep.messages}
        for ep, a, b in zip(episodes, agent_won, adv_won, strict=True)
    ]
    transcripts = (state.transcripts + records)[-s.max_transcripts :]
    history = [*state.w_da_history, w_da]
    metrics: dict[str, Any] = {
        "cycle": k,
        "w_da": w_da,
        "arena_adv_success": arena_adv,
        "arena_seconds": time.perf_counter() - t0,
    }
    log(f"cycle {k}: arena W_DA={w_da:.3f} adversary wins={arena_adv:.3f} ({len(episodes)} episodes)")

    # 2. Stop rule on the agent as it enters this cycle; 3. the weaker side trains.
    reason = stop_reason(history, s.w_da_gate, s.stability, s.window, s.max_cycles)
    new = replace(state, cycle=k, w_da_history=history, transcripts=transcripts, stopped=None)
    if s.train not in ("weaker", "agent", "adversary"):
        raise ValueError(f"train must be weaker, agent or adversary, got {s.train!r}")
    side = s.train if s.train != "weaker" else weaker_side(w_da, arena_adv)
    side = "none" if reason == "gates" else side
    if side != "none":
        rng = random.Random(derive_seed(s.seed, k, "gym"))
        trained = "agent" if side == "agent" else "customer"
        gym = gym_scenarios(
            train_scenarios, transcripts, trained, s.gym_scenarios, s.replay_share, s.replay_failure_share, rng
        )
        if side == "agent":
            opponent = agent_opponents(state, s.agent_mix, customer, s.coop_opening, s.adversary_opening)
            result = train_side(
                models.agent,
                tok,
                "agent",
                opponent,
                gym,
                judge,
                replace(a_cfg, seed=derive_seed(s.seed, k, "grpo")),
                report_to=report_to,
            )
            save_checkpoint(result.model, tok, out_dir / "agent")
            new.agent_dir = str(out_dir / "agent")
            models.agent = result.model
        else:
            start = state.simulator_dir if s.adversary_init == "simulator" else state.adversary_dir
            start_model, _ = load_checkpoint(Path(start))
            result = train_side(
                start_model,
                tok,
                "customer",
                agent_policy(models.agent, True),
                gym,
                judge,
                replace(c_cfg, seed=derive_seed(s.seed, k, "grpo")),
                wrap=lambda policy: adversary_customer(policy, s.adversary_opening),
                report_to=report_to,
            )
            save_checkpoint(result.model, tok, out_dir / "adversary")
            new.adversary_dirs = [*state.adversary_dirs, str(out_dir / "adversary")]
            models._cache[new.adversary_dirs[-1]] = result.model
        stats = result.reward_stats()
        metrics.update(
            grpo_tokens_per_s=result.update_tokens_per_s,
            grpo_seconds=result.seconds,
            grpo_rollout_seconds=result.rollout_seconds,
            grpo_trained_tokens=result.trained_tokens,
            **{f"grpo_{name}": v for name, v in stats.items()},
        )
        log(f"cycle {k}: trained the {side}: reward {stats['reward_first']:.3f} -> {stats['reward_last']:.3f}")
    new.trained_history = [*state.trained_history, side]
    new.stopped = reason  # "gates": nothing trained; "max_cycles": this was the last cycle
    metrics.update(trained=side, stop_reason=new.stopped)

    # 5. Evaluation of this cycle's agent, greedy, against each opponent on the same scenarios and seed.
    if s.eval_scenarios > 0:
        t0 = time.perf_counter()
        metrics.update(
            _evaluate(
                agent_policy(models.agent, True),
                new,
                customer,
                adversary,
                eval_scenarios[: s.eval_scenarios],
                judge,
                s,
                turns,
            )
        )
        metrics["eval_seconds"] = time.perf_counter() - t0
    new.save(out_dir)
    write_json(metrics, out_dir / METRICS_FILE)
    return new, metrics


def agent_opponents(
    state: CycleState,
    mix: dict[str, float],
    customer: Callable[[str], LMPolicy],
    coop_opening: str,
    adversary_opening: str,
) -> Callable[[Scenario, int], Policy]:
    """Per group: the current adversary, an earlier generation ("pool") or the cooperative simulator ("coop"),
    which opens as ``_coop`` does (``coop_opening``); adversaries open as ``adversary_opening`` says. A replayed
    scenario (:data:`REPLAYED`) opens with its recorded message whoever plays the later turns."""
    lms = {d: customer(d) for d in {state.simulator_dir, *state.adversary_dirs}}
    policies = {d: adversary_customer(p, adversary_opening) for d, p in lms.items()}  # the simulator: 1st adversary
    coop = cooperative_customer(lms[state.simulator_dir], coop_opening)
    replays = {d: OpensWithUtterance(p) for d, p in lms.items()}  # one per LM, so a rollout batches its groups
    earlier = state.adversary_dirs[:-1]
    names = sorted(n for n, w in mix.items() if w > 0)
    unknown = set(names) - {"adversary", "pool", "coop"}
    if unknown or not names:
        raise ValueError(f"agent_mix: keys must be adversary/pool/coop with a positive weight, got {mix}")

    def choose(scenario: Scenario, seed: int) -> Policy:
        rng = random.Random(seed)
        name = rng.choices(names, [mix[n] for n in names])[0]
        if name == "pool" and earlier:
            folder = rng.choice(earlier)
        else:
            folder = state.simulator_dir if name == "coop" else state.adversary_dir
        if scenario.utterance_source == REPLAYED:
            return replays[folder]  # the recorded opening, then this opponent's turns
        return coop if name == "coop" else policies[folder]

    return choose


def _evaluate(
    agent: Policy,
    state: CycleState,
    customer: Callable[..., LMPolicy],
    adversary: Callable[[str], Policy],
    scenarios: Sequence[Scenario],
    judge: Scorer,
    s: CoevolutionSettings,
    turns: dict[str, int],
) -> dict[str, float]:
    seed = derive_seed(s.seed, "eval")  # the same draws every cycle: cycles differ by their models only

    def play(policy: Policy, part: Sequence[Scenario]) -> list[Episode]:
        return run_episodes(part, agent, policy, seed=seed, **turns) if part else []

    coop = cooperative_customer(customer(state.simulator_dir, s.coop_temperature), s.coop_opening)
    metrics = episode_metrics(play(coop, as_cooperative(scenarios)), "_coop")
    adv = play(adversary(state.adversary_dir), scenarios)
    metrics.update(episode_metrics(adv, "_adv"))
    metrics.update(adversary_parts(judge.score(adv)))
    pool = state.adversary_dirs or [state.simulator_dir]  # scenarios dealt round-robin to the generations
    pooled = against_pool(list(scenarios), agent, [adversary(d) for d in pool], seed=seed, **turns)
    metrics.update(episode_metrics(pooled, "_advpool"))
    return metrics
