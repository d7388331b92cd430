"""benchmarks/agent_learning_curve.py's reading of where a customer left: the agent's last message before it."""

from __future__ import annotations

from pathlib import Path

import pytest

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
