"""Self-training on verified successes: agent_rl's first part, DA0 -> DA0' before GRPO (issue 75).

RL-ADA bootstraps its agent on demonstrations; ReST-EM (Singh et al., arXiv 2312.06585) and slime's τ²-bench recipe
(SFT 8.6% -> SFT + rejection sampling 27.0% -> GRPO 32.9%) add a step between: the agent samples episodes, the
environment verifies them, and the agent is fine-tuned on its own verified successes. Here the verifier is the
world itself (a strict pass: the goal's state reached, the right tool, looked up first, ended cleanly), so nothing
is labelled. In the order it runs, for round r = 1 .. ``rounds``:

1. **Sample** (ReST-EM's E-step): the current agent plays every gym scenario (``scenarios``' gym.jsonl: openings no
   demonstration played) ``samples`` times at ``temperature``, against the training customers drawn as agent_rl's
   GRPO draws them (:func:`~sparring.train.play.agent_opponents`). Episodes are played ``batch`` at a time,
   all samples of a scenario in one call (each gets its own draw), the customers and the agent drawing per episode,
   so the set does not depend on the batch and a resumed run samples what an uninterrupted one did.
2. **Verify**: the world's strict passes, at most ``keep_per_scenario`` distinct transcripts a scenario; a
   scenario with none gives nothing. Only gym scenarios are sampled: a held-out or validation id is refused.
3. **Correct** (DAgger, Ross, Gordon & Bagnell, AISTATS 2011, when ``corrections`` is on): in each episode that
   failed, every state the agent reached where the expert (the scripted policy DA0's demonstrations came from, which
   sees the conversation as the agent does plus the goal its demonstrations carried) would have said something
   else becomes an example: the agent's own turns before it kept out of the loss, the expert's turn the target.
   Labelling stops at the agent's first diverging act the world carried out (a call that is neither a read nor a
   question, and did not fail): past it the world may hold a wrong act the expert's script was never written for.
   A failed or refused call changes nothing, so the expert's way on from it (the right call) is labelled too.
4. **Improve** (the M-step): the current agent fine-tuned on them (``sft``, loss on the agent's turns), with
   ``mix_demos`` of the expert's demonstrations on train scenarios and ``intent_rehearsal`` of agent_sft's
   utterance -> intent exchanges mixed in when asked (the rounds see synthetic dialogues only; agent_sft replays
   its intent phase against the same wearing down of what it learnt).

Each round's success rate, scenarios with a pass and data size are logged and kept (``rounds.json``); each round's
agent is written atomically under ``scratch``, so a killed run resumes after its last finished round.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sparring.agents.transcript import call_key, tool_calls, tool_history
from sparring.atomic import replace_dir, write_json
from sparring.lm.chat import parse_agent_message
from sparring.lm.checkpoints import load_checkpoint, save_checkpoint
from sparring.lm.policies import LMPolicy
from sparring.progress import LOGGER
from sparring.rollout import Episode, run_episodes
from sparring.seeds import derive_seed
from sparring.settings import CoevolutionSettings, SelfTrainingSettings
from sparring.train.cycle_state import CycleState
from sparring.train.opponents import PerEpisodeOpponent
from sparring.train.play import GameModels, agent_opponents, turn_limits
from sparring.train.sft import train_sft
from sparring.world.scenarios import Scenario
from sparring.world.vocab import CUSTOMER_MOVES, READ_TOOLS

READS = READ_TOOLS | set(CUSTOMER_MOVES)  # calls that change nothing in the world

ROUNDS_FILE = "rounds.json"


@dataclass
class Teacher:
    """What self-training reads beside the agent and its customers (agent_rl's and the cycles' agent gym)."""

    expert: Any = None  # the policy whose reply(scenario, messages) corrects the agent's failed states (DAgger)
    rehearsal: Callable[[int, int], list[list[dict[str, Any]]]] | None = None  # n of agent_sft's exchanges, a draw
    forbidden: Collection[str] = ()  # scenario ids never to sample (held-out, validation)


NO_TEACHER = Teacher()  # no expert, no rehearsal, nothing forbidden: enough for rounds without either


@dataclass
class SelfTrainingResult:
    agent_dir: Path  # the self-trained agent (the start when no round ran)
    rounds: list[dict[str, Any]] = field(default_factory=list)  # per round: what was sampled, kept and trained


def check_gym(gym: Sequence[Scenario], forbidden: Collection[str]) -> None:
    """Refuse to sample any scenario whose id is ``forbidden`` (held-out, validation): they measure the agent."""
    if leaked := sorted({s.scenario_id for s in gym} & set(forbidden)):
        raise ValueError(f"self-training may sample gym scenarios only; held-out or validation ids: {leaked[:5]}")


def sample_episodes(
    agent: LMPolicy,
    opponent: Callable[[Scenario, int], Any],
    gym: Sequence[Scenario],
    st: SelfTrainingSettings,
    co: CoevolutionSettings,
    seed: int,
    tokenizer: Any,
) -> list[Episode]:
    """Every gym scenario ``st.samples`` times, ``st.batch`` episodes a call, scenario by scenario."""
    per_call = max(1, st.batch // st.samples)
    out: list[Episode] = []
    for start in range(0, len(gym), per_call):
        chunk = [s for s in gym[start : start + per_call] for _ in range(st.samples)]
        customers = [opponent(s, derive_seed(seed, "customer", s.scenario_id, i % st.samples)) for i, s in
                     enumerate(chunk)]  # fmt: skip
        out += run_episodes(chunk, agent, PerEpisodeOpponent(customers, tokenizer), **turn_limits(co), seed=seed,
                            tokenizer=tokenizer)  # fmt: skip
        LOGGER.info(f"self-training: sampled {len(out)}/{len(gym) * st.samples} episodes")
    return out


def verified_successes(episodes: Sequence[Episode], keep_per_scenario: int) -> list[list[dict[str, Any]]]:
    """The world's strict passes, at most ``keep_per_scenario`` distinct transcripts of each scenario."""
    kept: dict[str, list[list[dict[str, Any]]]] = {}
    for ep in episodes:
        mine = kept.setdefault(ep.scenario.scenario_id, [])
        if ep.outcome.strict_pass and len(mine) < keep_per_scenario and ep.messages not in mine:
            mine.append(ep.messages)
    return [m for conversations in kept.values() for m in conversations]


def _action(intent: str | None, name: str | None, arguments: dict[str, Any], text: str) -> tuple:
    """What a turn does: its intent tag and call, or its words when it makes no call."""
    return intent, *call_key(name, arguments), "" if name else text.strip()


def _agent_action(message: dict[str, Any]) -> tuple:
    call = next(iter(tool_calls([message])), {})
    text = str(message.get("content") or "")
    return _action(message.get("intent"), call.get("name"), call.get("arguments", {}), text)


@dataclass(frozen=True)
class Divergence:
    index: int  # the agent's turn in ``Episode.messages``
    said: str  # the expert's turn there, as a model writes it
    wanted: tuple  # what the expert's turn does (intent tag, call, arguments; its words when it calls nothing)
    done: tuple  # what the agent's turn did, the same way


def _carried_out(messages: Sequence[dict[str, Any]], i: int) -> bool:
    """Whether the world carried out the call of the agent's turn ``i`` (its result, the next message, is ok; with
    no result read back, the episode ended on it, the world is taken to have changed)."""
    history = tool_history(list(messages[i : i + 2]))
    return not history or history[0][1]


def divergences(episode: Episode, expert: Any) -> list[Divergence]:
    """The agent's turns in ``episode`` where ``expert.reply(scenario, messages so far)`` does something else, up to
    and including the agent's first diverging act the world carried out (a call that is neither a read nor a
    question: past it the world may hold a wrong act the expert's script was never written for; a failed or refused
    call changes nothing)."""
    out: list[Divergence] = []
    for i, message in enumerate(episode.messages):
        if message["role"] != "assistant":
            continue
        try:
            said = expert.reply(episode.scenario, episode.messages[:i])
        except (IndexError, KeyError, ValueError):  # a state its script has no branch for (a malformed turn)
            break
        parsed = parse_agent_message(said)
        wanted = _action(parsed.intent, parsed.call.name if parsed.call else None,
                         dict(parsed.call.arguments) if parsed.call else {}, parsed.text)  # fmt: skip
        done = _agent_action(message)
        if wanted != done:
            out.append(Divergence(i, said, wanted, done))
            if done[1] is not None and done[1] not in READS and _carried_out(episode.messages, i):
                break
    return out


def expert_corrections(episodes: Sequence[Episode], expert: Any) -> list[list[dict[str, Any]]]:
    """DAgger's labels on the failed ``episodes``: at each of their :func:`divergences`, the conversation so far
    (the agent's turns out of the loss) ending in the expert's turn. Distinct examples only."""
    out: list[list[dict[str, Any]]] = []
    seen: set[str] = set()
    for ep in episodes:
        if ep.outcome.strict_pass:
            continue
        for d in divergences(ep, expert):
            example = [{**m, "train": False} if m["role"] == "assistant" else m for m in ep.messages[: d.index]]
            example.append({"role": "assistant", "content": d.said})
            if (key := json.dumps(example, sort_keys=True, default=str)) not in seen:
                seen.add(key)
                out.append(example)
    return out


def self_train(
    da0_dir: Path,
    simulator_dir: Path,
    gym: Sequence[Scenario],
    co: CoevolutionSettings,
    st: SelfTrainingSettings,
    scratch: Path,
    *,
    seed: int = 0,
    teacher: Teacher = NO_TEACHER,
    demos: Callable[[int], list[list[dict[str, Any]]]] | None = None,
    league: CycleState | None = None,
    log: Callable[[str], None] = LOGGER.info,
) -> SelfTrainingResult:
    """DA0 (``da0_dir``) self-trained for ``st.rounds`` rounds in ``scratch`` (``round_<r>``: each round's agent;
    a second call resumes after the last one written). ``teacher``: the ids never to sample, the expert for
    ``st.corrections`` and the rehearsal for ``st.intent_rehearsal``; ``demos(n)``: n expert demonstrations, for
    ``st.mix_demos``; ``league``: the co-evolution state whose adversary generations the agent meets as
    ``co.agent_mix`` draws them (None: the simulator alone, agent_rl's).

    Over 60 lines: the method's steps per round, in the module docstring's order, with the resume between them."""
    check_gym(gym, teacher.forbidden)
    expert, rehearsal = teacher.expert, teacher.rehearsal
    if st.rounds and st.corrections and expert is None:
        raise ValueError("agent_rl.self_training.corrections needs the expert that corrects the agent (none given)")
    if st.rounds and st.intent_rehearsal and rehearsal is None:
        raise ValueError("agent_rl.self_training.intent_rehearsal needs agent_sft's utterances (none given)")
    scratch = Path(scratch)
    saved = scratch / ROUNDS_FILE
    rounds: list[dict[str, Any]] = json.loads(saved.read_text())["rounds"] if saved.is_file() else []
    rounds = [r for r in rounds if (scratch / f"round_{r['round']}").is_dir()][: st.rounds]
    agent_dir = scratch / f"round_{len(rounds)}" if rounds else Path(da0_dir)
    if len(rounds) == st.rounds:  # all done (none asked: DA0, whatever an earlier run left in scratch)
        return SelfTrainingResult(agent_dir, rounds)
    if rounds:
        log(f"self-training: resuming after round {len(rounds)}")
    models = GameModels(co, episode_draws=True)
    model, _ = load_checkpoint(agent_dir)
    models.model(simulator_dir)  # the one vocabulary every view is built with: DA0's and the simulator's are one
    tokenizer = models.tokenizer
    state = league or CycleState(agent_dir=str(da0_dir), simulator_dir=str(simulator_dir))
    opponent = agent_opponents(state, co.agent_mix, models.customer, co.coop_opening, co.adversary_opening)
    extra = demos(st.mix_demos) if demos is not None and st.mix_demos else []
    for r in range(len(rounds) + 1, st.rounds + 1):
        t0 = time.perf_counter()
        model.eval()
        agent = LMPolicy(model, tokenizer, "agent", max_new_tokens=co.agent_grpo.max_new_tokens,
                         temperature=st.temperature, episode_draws=True)  # fmt: skip
        episodes = sample_episodes(agent, opponent, gym, st, co, derive_seed(seed, "self-training", r), tokenizer)
        passes = verified_successes(episodes, st.keep_per_scenario)
        fixes = expert_corrections(episodes, expert) if st.corrections else []
        replayed = rehearsal(st.intent_rehearsal, derive_seed(seed, "rehearsal", r)) if st.intent_rehearsal else []
        row: dict[str, Any] = {
            "round": r,
            "episodes": len(episodes),
            "success_rate": sum(ep.outcome.strict_pass for ep in episodes) / max(1, len(episodes)),
            "scenarios_with_a_pass": len({ep.scenario.scenario_id for ep in episodes if ep.outcome.strict_pass}),
            "kept": len(passes),
            "corrections": len(fixes),
            "demos_mixed": len(extra),
            "intent_rehearsed": len(replayed),
            "sample_seconds": round(time.perf_counter() - t0, 1),
        }
        if passes or fixes:
            model.train()
            result = train_sft(
                model, tokenizer, passes + fixes + extra + replayed, st.sft, scratch / "sft", seed=derive_seed(seed, r)
            )
            model = result.model
            row.update(sft_loss=result.final_loss, sft_seconds=round(result.seconds, 1))
        replace_dir(scratch / f"round_{r}", lambda folder, m=model: save_checkpoint(m, tokenizer, folder))
        rounds.append(row)
        write_json({"rounds": rounds}, saved)
        log(f"self-training round {r}: {row['kept']} verified successes and {row['corrections']} expert corrections "
            f"kept of {row['episodes']} episodes "
            f"(strict PASS {row['success_rate']:.3f} on {row['scenarios_with_a_pass']} scenarios)")  # fmt: skip
    return SelfTrainingResult(scratch / f"round_{st.rounds}", rounds)
