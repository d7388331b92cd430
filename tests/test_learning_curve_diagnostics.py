"""benchmarks/agent_learning_curve.py's reading of where a customer left (the agent's last message before it), its
collapsed checkpoints, and its held-out play over K customer draws (``--draws``) with paired gains over (scenario,
draw)."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest

from sparring.agents.scripted import CamouflagingCustomer, CooperativeCustomer, ExpertAgent

ROOT = Path(__file__).resolve().parents[1]
import benchmarks.agent_learning_curve as curve  # noqa: E402

REPORT = "All done, I've taken care of that for you. Is there anything else I can help with?"  # the expert's


def said(text: str = "", *calls: str) -> dict:
    return {"role": "assistant", "content": text, "tool_calls": [{"function": {"name": c}} for c in calls]}


def customer(text: str) -> dict:
    return {"role": "user", "content": text}


@pytest.mark.parametrize(
    "last, called, kind",
    [
        (said(REPORT), {"lookup_account", "confirm_request", "card_services"}, "claimed_done_wrong_act"),
        (said(REPORT), {"lookup_account", "confirm_request"}, "claimed_done_no_act"),
        (said(REPORT), {"lookup_account", "fees_and_rates"}, "claimed_done_no_act"),  # its own tool, refused
        (said("Please tell me ... I've taken care of that for you."), {"lookup_account"}, "claimed_done_no_act"),
        (said("Just to be sure: you want to change your PIN?", "confirm_request"), {"confirm_request"}, "confirm"),
        (said("", "ask_customer"), {"ask_customer"}, "question"),
        (said("Which card was it?"), set(), "question"),
        (said("Thank you, let me look up your account.", "lookup_account"), {"lookup_account"}, "said"),
    ],
)
def test_the_agents_last_message_before_the_customer_left_is_named(last, called, kind):
    messages = [customer("I need help"), said("Hello", "lookup_account"), last, customer("Thanks, bye!")]
    assert curve.left_kind(messages, called, "fees_and_rates") == kind


def checkpoint(acted: float, top: float) -> dict:
    return {"act_reached_advpool": acted, "graph_advpool": {"top_action_mass_mean": top}}


@pytest.mark.parametrize(
    "point, why",
    [
        (checkpoint(0.80, 0.30), ""),
        (checkpoint(0.45, 0.30), ""),  # fewer acts than the start, not half as many
        (checkpoint(0.30, 0.30), "no act: 0.30 of pool episodes reach an act (start 0.90)"),
        (checkpoint(0.0, 0.30), "no act: 0.00 of pool episodes reach an act (start 0.90)"),
        (checkpoint(0.80, 0.95), "one action dominates: it carries 0.95 of an episode's routed mass (start 0.30)"),
    ],
)
def test_a_collapsed_checkpoint_is_named_so_it_is_not_averaged_in(point, why):
    """An arm whose agent stopped reaching the act, or whose episodes became one action carrying the whole routed
    mass, is reported as collapsed with the figure that says so."""
    assert curve.collapse(point, checkpoint(0.90, 0.30)) == why


def scripted_curve(tok, heldout, draws: int) -> curve.HeldoutCurve:
    """A HeldoutCurve with scripted players (no checkpoint): the expert as every agent, the cooperative customer as
    ``_coop`` (greedy: one draw) and a pool of two camouflaging customers played ``draws`` times."""
    c = object.__new__(curve.HeldoutCurve)
    c.held, c.seed, c.credit = heldout[:5], 0, (0.05, 0.25)
    c.turns = {"max_turns": 6, "max_calls_per_turn": 3, "tokenizer": tok}
    c.draws = {"_coop": [0], "_advpool": list(range(draws))}
    c.coop, c.pool = CooperativeCustomer(), [CamouflagingCustomer(seed=0), CamouflagingCustomer(seed=1)]
    c.opponents = {"_coop": ["_coop"], "_advpool": ["gen_a", "gen_b"]}
    c.models = SimpleNamespace(agent_policy_of=lambda folder, greedy: ExpertAgent())
    return c


def test_held_out_play_records_every_scenario_and_draw_and_pairs_over_them(tok, heldout):
    """Each (scenario, draw) once, draw-major, with the draw as the rows' fifth field and the generation that played
    it; the same agent twice meets the same draws, so its gain is exactly 0; rows from before draws read as draw 0."""
    c = scripted_curve(tok, heldout, draws=2)
    start, again = c.point("start"), c.point("again")
    ids = [s.scenario_id for s in heldout[:5]]
    rows = start["outcomes_advpool"]
    assert [r[0] for r in rows] == ids * 2 and [r[4] for r in rows] == [0] * 5 + [1] * 5
    assert [r[1] for r in rows] == ["gen_a", "gen_b", "gen_a", "gen_b", "gen_a"] * 2
    assert len(start["passes_advpool"]) == 10 and len(start["outcomes_coop"]) == 5
    assert (start["draws_advpool"], start["draws_coop"]) == (2, 1)
    assert start["strict_pass_advpool"] == sum(start["passes_advpool"]) / 10
    assert curve.gain(start, again, "advpool", seed=0) == [0.0, 0.0, 0.0]
    old = {"outcomes_advpool": [r[:4] for r in rows[:5]]}  # four fields: draw 0
    better = {"outcomes_advpool": [[*r[:2], 1, "", 0] for r in rows[:5]]}
    mean, low, high = curve.gain(old, better, "advpool", seed=0)
    assert mean == pytest.approx(1 - sum(start["passes_advpool"][:5]) / 5) and low <= mean <= high


@pytest.mark.parametrize("draws", ["0", "17"])
def test_draws_outside_the_draw_set_are_refused_with_exit_2(draws, capsys):
    with pytest.raises(SystemExit) as exit_:
        curve.main(["/nowhere", "--draws", draws])
    err = capsys.readouterr().err
    assert exit_.value.code == 2 and f"error: --draws {draws}: K must be 1..16" in err and "Traceback" not in err
