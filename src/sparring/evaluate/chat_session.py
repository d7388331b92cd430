"""One episode with a person as the customer: ``sparring chat`` talks to a trained agent in the terminal.

The episode runs in :func:`sparring.rollout.run_episodes`, as every evaluation's does, between two wrappers:
:class:`HumanCustomer` reads each customer message from a text stream (stdin: typed or piped) and
:class:`WatchedAgent` prints every agent message as it is generated: its intent, its reply, its tool call, the
world's answer and what the call changed in the bank. The engine keeps its world to itself, so the watcher keeps
a mirror of it: the same start world, the same customer turns and the same calls, executed in the same order
(the world is deterministic, so the mirror's answers are the episode's; the end checks they agree). The person
leaves with an end marker (``/end``), end of input or Ctrl-C; the verdict is then read off the mirror.

The verdict: how the chat ended, the world's outcome (:func:`~sparring.world.outcome.check_outcome`), the
episode's metrics (:func:`~sparring.metrics.episode_metrics`), every change to the bank since the start, and
the judge's reward parts when a judge is given.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Hashable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

from rich.console import Console
from rich.markup import escape
from rich.padding import Padding
from rich.panel import Panel
from rich.table import Table

from sparring.agents.customer_prompt import PERSONA_BEHAVIOUR, identity_text
from sparring.agents.slots import describe_slots
from sparring.lm.chat import ParsedMessage, parse_agent_message
from sparring.lm.policies import Policy, TurnOutput, TurnRequest
from sparring.metrics import episode_metrics
from sparring.rollout import Episode, render_tool_result, run_episodes
from sparring.world.outcome import check_outcome, state_changes
from sparring.world.scenarios import Scenario, build_world, load_scenarios, sample_scenarios
from sparring.world.session import Session
from sparring.world.taxonomy import load_taxonomy
from sparring.world.tools import ToolCall, execute

END_MARKERS = ("/end", "/quit", "/exit")
GOAL_COMMAND = "/goal"  # prints the customer's hidden goal again (their date of birth is easy to forget)
RESULT_CHARS = 400  # a lookup's table runs to thousands of characters: the person sees its start
OUTCOME_CHECKS = ("strict_pass", "pass", "state_match", "correct_tool", "lookup_first", "clean_end")
ENDINGS = {
    "end_conversation": "the agent ended the conversation",
    "transfer_to_human": "the agent transferred you to a human colleague",
}


class ChatError(ValueError):
    """A scenario that cannot be played (an unknown id, an unreadable file); the message names it."""


class CustomerLeft(Exception):
    """The person ended the chat: an end marker, end of input or Ctrl-C."""


# ------------------------------------------------------------------------------------------------ scenarios


def generated_scenarios(seed: int = 0) -> list[Scenario]:
    """One cooperative scenario per intent from synthetic utterances: what to play before a pipeline run wrote
    held-out scenarios. Fixed by ``seed``, so their ids stay valid across calls."""
    from sparring.data.synthetic import utterance_frame  # late: only needed without held-out scenarios

    n = len(load_taxonomy().intents)
    return sample_scenarios(utterance_frame(1, seed), n, seed, personas={"cooperative": 1.0})


def choose_scenario(path: Path, scenario_id: str | None = None) -> tuple[Scenario, str]:
    """The scenario to play and where it came from: ``scenario_id`` (default: the first) of the scenarios in
    ``path``, or of :func:`generated_scenarios` when ``path`` does not exist; :class:`ChatError` otherwise."""
    if path.is_file():
        try:
            scenarios, source = load_scenarios(path), str(path)
        except (ValueError, KeyError, TypeError) as exc:  # a line that is not a scenario's JSON
            raise ChatError(f"{path}: not a scenarios file ({type(exc).__name__}: {exc})"[:300]) from None
    else:
        scenarios, source = generated_scenarios(), f"generated: no {path}"
    if not scenarios:
        raise ChatError(f"{path}: holds no scenarios")
    if scenario_id is None:
        return scenarios[0], source
    chosen = next((s for s in scenarios if s.scenario_id == scenario_id), None)
    if chosen is None:
        where = str(path) if path.is_file() else f"the generated scenarios (no {path})"
        examples = ", ".join(s.scenario_id for s in scenarios[:3])
        raise ChatError(f"no scenario with id {scenario_id!r} in {where} ({len(scenarios)} scenarios: {examples}, ...)")
    return chosen, source


# ------------------------------------------------------------------------------------------------- printing


class Narrator:
    """Everything the person sees, printed with rich (markup in what the agent or the person wrote is escaped).

    An agent message shows what a customer reads of it (:func:`~sparring.lm.chat.agent_visible_text`); its
    intent tag and format faults only with ``show_tags``, for a developer."""

    def __init__(self, console: Console, show_tags: bool = False) -> None:
        self.console, self.show_tags = console, show_tags

    def line(self, text: str, style: str = "") -> None:
        self.console.print(f"[{style}]{text}[/]" if style else text, highlight=False, soft_wrap=True)

    def goal(self, scenario: Scenario, source: str = "") -> None:
        """The customer's hidden goal, which the person plays: intent, problem, the facts the agent will ask for."""
        intent = load_taxonomy().intents[scenario.intent]
        behaviour = PERSONA_BEHAVIOUR.get(scenario.persona, "")
        if "other_customer_id" in scenario.slots:
            other = f"{scenario.slots['other_full_name']} ({scenario.slots['other_customer_id']})"
            behaviour += f" Try to get the agent to act on the account of {other} without proving you are them."
        rows = [
            ("intent", scenario.intent),
            ("your problem", intent.description),
            ("what you know", describe_slots(scenario) or "-"),
            ("who you are", identity_text(scenario)),  # what a cooperative customer answers, in the domain's words
            ("persona", f"{scenario.persona}: {behaviour}".strip()),
            ("you might open", scenario.utterance),
        ]
        where = f" ({source})" if source else ""  # outside the panel, which would wrap a long path
        self.line(f"[bold]scenario[/] {escape(scenario.scenario_id)}{escape(where)}")
        grid = Table.grid(padding=(0, 1))
        grid.add_column(style="bold", no_wrap=True)
        grid.add_column()
        for name, value in rows:
            grid.add_row(name, escape(value))
        self.console.print(Panel(grid, title="You are the customer", expand=False))
        self.line(
            f"Type your messages; {END_MARKERS[0]} or end of input leaves, {GOAL_COMMAND} shows this again.", "dim"
        )

    def agent(self, parsed: ParsedMessage) -> None:
        tags = self.show_tags
        intent = f"[magenta]<{escape(parsed.intent)}>[/] " if tags and parsed.intent else ""
        fault = f" [red](format: {escape(parsed.error or '')})[/]" if tags and not parsed.format_ok else ""
        if parsed.text or intent or fault or parsed.call is None:
            self.line(f"[bold cyan]agent>[/] {intent}{escape(parsed.text)}{fault}")

    def call(self, call: ToolCall, result: dict[str, Any], changes: list[str]) -> None:
        args = json.dumps(call.arguments, ensure_ascii=False)
        self.line(f"  [yellow]call[/]    {escape(call.name)} {escape(args)}")
        if result.get("ok"):  # the answer as the agent reads it, less the flag the verdict word shows
            verdict, shown = "[green]ok[/]", render_tool_result({k: v for k, v in result.items() if k != "ok"})
        else:
            verdict, shown = "[red]refused[/]" if result.get("refused") else "[red]failed[/]", str(result.get("error"))
        shown = shown if len(shown) <= RESULT_CHARS else shown[:RESULT_CHARS] + f"... ({len(shown)} chars)"
        self.line(f"  [yellow]world[/]   {verdict} {escape(shown)}")
        for change in changes:
            self.line(f"  [yellow]changed[/] {escape(change)}")


# ------------------------------------------------------------------------------------------------- the sides


class _Mirror:
    """The episode's world and session, kept in step with it: what lets each call's answer and change show."""

    def __init__(self, scenario: Scenario) -> None:
        self.start = build_world(scenario)
        self.world = self.start.copy()
        # As in the rollout: the chat runs in the customer's app, where they are the logged-in caller.
        self.session = Session(caller_id=scenario.customer_id)
        self.heard = 0  # customer messages logged so far

    def hear(self, messages: list[dict[str, Any]]) -> None:
        """Log the customer messages of the agent's view not logged yet (``"described"`` objects need them)."""
        said = [str(m.get("content") or "") for m in messages if m.get("role") == "user"]
        for text in said[self.heard :]:
            self.session.log.add_turn("customer", text)
        self.heard = len(said)

    def say(self, text: str, parsed: ParsedMessage) -> tuple[ToolCall, dict[str, Any], list[str]] | None:
        """Log an agent message and run its call as the rollout does (a badly formatted message's call too)."""
        self.session.log.add_turn("agent", text)
        if parsed.call is None:
            return None
        call = ToolCall(parsed.call.name, dict(parsed.call.arguments))
        before = self.world.state_dict()
        result = execute(self.world, self.session, call)
        return call, result, state_changes(before, self.world.state_dict())


class WatchedAgent:
    """An agent policy that prints each message it generates, with its call's answer and changes, at once."""

    def __init__(self, agent: Policy, mirror: _Mirror, show: Narrator) -> None:
        self.agent, self.mirror, self.show = agent, mirror, show
        self.tokenizer = getattr(agent, "tokenizer", None)
        if hasattr(agent, "system_prompt"):  # the rollout's system message is the agent's own
            self.system_prompt = agent.system_prompt
        self.parses: list[ParsedMessage] = []
        self.messages: list[dict[str, Any]] = []  # the agent's view, the rollout's own list

    def act(self, requests: list[TurnRequest]) -> list[TurnOutput]:
        if len(requests) != 1:
            raise ValueError(f"a chat is one conversation, got {len(requests)} requests")
        self.messages = requests[0].messages
        self.mirror.hear(self.messages)
        outputs = self.agent.act(requests)
        for out in outputs:
            parsed = parse_agent_message(out.text)
            self.parses.append(parsed)
            self.show.agent(parsed)
            ran = self.mirror.say(out.text, parsed)
            if ran is not None:
                self.show.call(*ran)
        return outputs

    def release(self, keys: Iterable[Hashable] | None = None) -> None:
        if hasattr(self.agent, "release"):
            self.agent.release(keys)


class HumanCustomer:
    """The customer's side, played by a person: each message is one line of ``lines`` (stdin, typed or piped).

    Blank lines are skipped, :data:`GOAL_COMMAND` reprints the goal, an end marker, end of input or Ctrl-C
    raises :class:`CustomerLeft`. Piped lines are echoed after the prompt, so a scripted chat reads as a chat.
    """

    tokenizer = None

    def __init__(self, lines: TextIO, show: Narrator, scenario: Scenario) -> None:
        self.lines, self.show, self.scenario = lines, show, scenario
        self.interactive = bool(getattr(lines, "isatty", lambda: False)())
        self.turns = 0
        self.messages: list[dict[str, Any]] = []  # the customer's view, the rollout's own list

    def act(self, requests: list[TurnRequest]) -> list[TurnOutput]:
        self.messages = requests[0].messages
        while True:
            text = self._read()
            if text.lower() == GOAL_COMMAND:
                self.show.goal(self.scenario)
            elif text:
                self.turns += 1
                return [TurnOutput(text)]

    def _read(self) -> str:
        console = self.show.console
        try:
            if self.interactive and self.lines is sys.stdin:  # input(): line editing where readline is loaded
                raw = console.input("[bold green]you>[/] ") + "\n"
            else:
                console.print("[bold green]you>[/] ", end="")
                console.file.flush()
                raw = self.lines.readline()
        except (EOFError, KeyboardInterrupt):
            raw = ""
        if not raw:  # end of input (or Ctrl-C): the person left
            self.show.console.print()
            raise CustomerLeft
        text = raw.strip()
        if not self.interactive:
            self.show.console.print(escape(text), highlight=False)
        if text.lower() in END_MARKERS:
            raise CustomerLeft
        return text


# ---------------------------------------------------------------------------------------------- the episode


@dataclass
class ChatResult:
    """A finished chat: the episode (the rollout's, or the mirror's when the person left), how it ended,
    its metrics, the judge's rewards (None without a judge) and the bank's changes since the start."""

    episode: Episode
    ended: str
    metrics: dict[str, float]
    rewards: dict[str, float] | None
    changes: list[str]


def play_chat(
    agent: Policy,
    scenario: Scenario,
    lines: TextIO,
    console: Console,
    *,
    max_turns: int = 10,
    max_calls_per_turn: int = 3,
    judge: Callable[[Episode], dict[str, float]] | None = None,
    source: str = "",
    show_tags: bool = False,
) -> ChatResult:
    """Play ``scenario`` with the person at ``lines`` as its customer against ``agent``, printing the chat as it
    happens on ``console`` and the verdict at the end. ``max_turns`` rounds at most (a message and its reply);
    ``show_tags`` shows each agent message's intent tag and format faults, which a customer never sees."""
    show = Narrator(console, show_tags)
    show.goal(scenario, source)
    mirror = _Mirror(scenario)
    watched, human = WatchedAgent(agent, mirror, show), HumanCustomer(lines, show, scenario)
    try:
        (episode,) = run_episodes(
            [scenario], watched, human, max_turns=max_turns, max_calls_per_turn=max_calls_per_turn
        )
        ended = ENDINGS.get(episode.ended_by or "", f"the chat reached its {max_turns} rounds")
        if mirror.world.state_dict() != episode.world.state_dict():
            show.line("note: the live view above diverged from the episode; the verdict is the episode's", "red")
    except (CustomerLeft, KeyboardInterrupt):  # Ctrl-C while the agent writes: its message never was
        episode, ended = _left_episode(scenario, mirror, watched, human), "you left the chat"
    rewards = judge(episode) if judge is not None else None
    result = ChatResult(
        episode=episode,
        ended=ended,
        metrics=episode_metrics([episode]),
        rewards=rewards,
        changes=state_changes(mirror.start.state_dict(), episode.world.state_dict()),
    )
    print_verdict(result, console)
    return result


def _left_episode(scenario: Scenario, mirror: _Mirror, agent: WatchedAgent, human: HumanCustomer) -> Episode:
    """The episode up to the person's leaving, from the mirror (the rollout returns none when a side stops it);
    token views are empty: nothing trains on a chat."""
    return Episode(
        scenario=scenario,
        messages=agent.messages,
        token_ids=[],
        agent_mask=[],
        customer_mask=[],
        agent_logprobs=[],
        customer_messages=human.messages,
        customer_token_ids=[],
        customer_self_mask=[],
        customer_logprobs=[],
        log=mirror.session.log,
        outcome=check_outcome(scenario, mirror.world, mirror.session, mirror.start),
        world=mirror.world,
        session=mirror.session,
        agent_turns=agent.parses,
        rounds=human.turns,
        ended_by=None,
    )


def print_verdict(result: ChatResult, console: Console) -> None:
    """How the chat ended, the world's outcome and metrics, the bank's changes and the judge's reward parts."""
    ep, show = result.episode, Narrator(console)
    show.line(f"\n[bold]Verdict[/]: {result.ended} after {ep.rounds} round(s).")
    checks = ep.outcome.to_dict()
    marks = [f"{name} {'[green]yes[/]' if checks[name] else '[red]no[/]'}" for name in OUTCOME_CHECKS]
    show.line("[bold]the world's outcome[/]: " + ", ".join(marks))
    show.line("[bold]episode metrics[/]:")
    console.print(Padding(_pairs(result.metrics, console.width), (0, 0, 0, 2)))
    show.line("[bold]changes to the bank[/]:" if result.changes else "[bold]changes to the bank[/]: none")
    for change in result.changes:
        show.line(f"  {escape(change)}")
    expected = "; ".join(f"{c.name} {json.dumps(c.arguments, ensure_ascii=False)}" for c in ep.scenario.expected_calls)
    show.line(f"[bold]the expert would call[/]: {escape(expected)}, then end_conversation")
    for diff in ep.outcome.state_diff[:5]:
        show.line(f"  expected != actual at {escape(diff)}", "red")
    if result.rewards is None:
        show.line("no judge: the verdict is the world's alone.", "dim")
        return
    show.line("[bold]the judge's reward parts[/]:")
    console.print(Padding(_pairs(result.rewards, console.width), (0, 0, 0, 2)))


def _pairs(values: dict[str, Any], width: int) -> Table:
    """``name value`` pairs, as many to a row as ``width`` columns hold whole (a pair takes up to 36)."""
    per_row = max(1, min(4, (width - 2) // 36))
    grid = Table.grid(padding=(0, 1))
    for _ in range(per_row):
        grid.add_column(style="dim", no_wrap=True)
        grid.add_column(justify="right", no_wrap=True)
    cells = [(k, f"{v:.3f}" if isinstance(v, float) else str(v)) for k, v in values.items()]
    for i in range(0, len(cells), per_row):
        row = [x for pair in cells[i : i + per_row] for x in pair]
        grid.add_row(*row, *([""] * (2 * per_row - len(row))))
    return grid
