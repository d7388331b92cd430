"""`sparring chat`: a person (here, piped lines) plays the customer against an agent, sees its calls, the world's
answers and the bank's changes as they happen, and gets the verdict at the end; a user's mistake is one line.

The library part is driven by the scripted expert, whose calls are known; the command by a tiny random LM
checkpoint, which says nothing useful but must be talked to, to an end marker or the round limit, all the same."""

from __future__ import annotations

import io
import re

import pytest
from rich.console import Console
from typer.testing import CliRunner

from sparring.agents.customer_prompt import identity_text
from sparring.agents.scripted import ExpertAgent
from sparring.agents.slots import describe_slots
from sparring.cli import app
from sparring.evaluate.chat_session import generated_scenarios, play_chat
from sparring.lm.chat import agent_visible_text
from sparring.world.outcome import state_changes
from sparring.world.scenarios import build_world, save_scenarios

INTENT = "card_payment_not_recognised"  # resolved by dispute_charge on one transaction: a visible change


@pytest.fixture(scope="module")
def scenarios():
    return generated_scenarios()


@pytest.fixture(scope="module")
def disputed(scenarios):
    return next(s for s in scenarios if s.intent == INTENT)


@pytest.fixture(scope="module")
def checkpoint(tok, tmp_path_factory):
    """A tiny random agent saved as a pipeline would save it."""
    from sparring.lm.checkpoints import save_checkpoint
    from sparring.lm.models import build_model
    from sparring.settings import ModelSpec

    spec = ModelSpec(
        hidden_size=32, num_layers=1, num_heads=2, num_kv_heads=1, intermediate_size=64, tie_word_embeddings=False
    )
    folder = tmp_path_factory.mktemp("chat") / "agent"
    save_checkpoint(build_model(spec, tok), tok, folder)
    return folder


def chat(script: str, scenario, agent=None, **kwargs):
    out = io.StringIO()
    result = play_chat(
        agent or ExpertAgent(verify="facts"), scenario, io.StringIO(script), Console(file=out, width=200), **kwargs
    )
    return result, out.getvalue()


def answers(scenario) -> str:
    """What a cooperative customer answers when asked to verify and describe the payment."""
    return f"{identity_text(scenario)} {describe_slots(scenario)}"


def test_a_scripted_chat_shows_each_call_its_answer_and_change_then_a_strict_pass(disputed):
    # Lookup, payment_details and the dispute fill one turn's three calls: the agent reports after "thank you".
    script = f"hello, a payment I don't know\n{answers(disputed)}\nthank you\nno thanks, that's all\n"
    result, shown = chat(script, disputed)
    resolving = disputed.expected_calls[-1]
    assert resolving.name == "dispute_charge"
    assert "you> hello, a payment I don't know" in shown  # piped lines are echoed after the prompt
    assert "call    lookup_account" in shown and "call    dispute_charge" in shown
    assert "call    payment_details" in shown  # the dispute quotes the case queue the read showed
    assert shown.count("world   ok") == 4  # lookup, payment_details, dispute, end_conversation
    target = resolving.arguments["transaction_id"]
    assert f"changed transaction {target} disputed: False -> True" in shown
    assert "changed new case" in shown
    # The live lines come before the verdict, which shows the same changes and a strict pass.
    assert shown.index("changed transaction") < shown.index("Verdict")
    assert result.ended == "the agent ended the conversation"
    assert result.metrics["strict_pass"] == 1.0 and result.metrics["routing_acc"] == 1.0
    assert result.episode.outcome.strict_pass
    assert f"transaction {target} disputed: False -> True" in result.changes
    assert "strict_pass yes" in shown and "no judge: the verdict is the world's alone." in shown


def test_wrong_details_are_refused_and_end_in_a_transfer_without_a_pass(disputed):
    wrong = answers(disputed).replace(disputed.identity["date_of_birth"], "1900-01-01")
    result, shown = chat(f"hi\n{wrong}\n{wrong}\nhello?\n", disputed)
    assert result.ended == "the agent transferred you to a human colleague"
    assert "call    transfer_to_human" in shown and "dispute_charge" not in shown.split("Verdict")[0]
    assert result.metrics["strict_pass"] == 0.0 and result.changes == []
    assert "changes to the bank: none" in shown
    assert "expected != actual" in shown  # the dispute the expert would have filed is missing


@pytest.mark.parametrize("leave", ["/end\n", ""], ids=["end-marker", "end-of-input"])
def test_leaving_before_the_goodbye_keeps_what_was_done_and_the_judges_parts(disputed, leave):
    seen = []

    def judge(episode):
        seen.append(episode)
        return {"agent_reward": 1.25, "adv_realism": 0.5}

    result, shown = chat(f"hello\n\n{answers(disputed)}\n{leave}", disputed, judge=judge)
    assert result.ended == "you left the chat" and result.episode.rounds == 2
    outcome = result.episode.outcome
    assert outcome.passed and outcome.correct_tool and not outcome.clean_end and not outcome.strict_pass
    assert seen == [result.episode] and [m["role"] for m in seen[0].messages].count("user") == 2
    assert result.metrics["routing_acc"] == 1.0 and result.metrics["ended_rate"] == 0.0
    assert "agent_reward" in shown and "1.250" in shown and "world's alone" not in shown


def agent_lines(shown: str) -> list[str]:
    return [line for line in shown.split("Verdict")[0].splitlines() if line.startswith("agent>")]


def test_agent_lines_show_what_the_customer_reads_and_tags_only_when_asked(disputed):
    script = f"hello, a payment I don't know\n{answers(disputed)}\nthank you\nno thanks, that's all\n"
    plain, shown = chat(script, disputed)
    tagged, shown_tagged = chat(script, disputed, show_tags=True)
    visible = [agent_visible_text(m) for m in plain.episode.messages if m["role"] == "assistant"]
    said = [line.removeprefix("agent> ") for line in agent_lines(shown)]
    assert said and said == [text for text in visible if text]  # exactly the customer's view of each message
    assert not any(re.search(r"<[a-z_?]+>", line) for line in said)
    assert f"<{INTENT}>" in shown_tagged and f"<{INTENT}>" not in shown.split("Verdict")[0]
    # The judged episode is the same with or without the tags on screen.
    assert plain.metrics == tagged.metrics and plain.episode.messages == tagged.episode.messages


def test_state_changes_name_objects_by_id(disputed):
    start = build_world(disputed)
    after = start.copy()
    card = after.customers[disputed.customer_id].cards[0]
    card.status = "blocked"
    after.customers[disputed.customer_id].account.balance += 1.0
    lines = state_changes(start.state_dict(), after.state_dict())
    assert f"card {card.card_id} status: 'active' -> 'blocked'" in lines
    assert any(line.startswith(f"{disputed.customer_id} account.balance:") for line in lines)
    assert state_changes(start.state_dict(), start.state_dict()) == []


# ---- the command ---------------------------------------------------------------------------------------------


def invoke(*args: str, script: str = ""):
    return CliRunner().invoke(app, ["chat", *args, "--max-new-tokens", "8"], input=script)


def test_chat_piped_to_the_end_marker_with_the_generated_default_scenario(checkpoint, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # no data/scenarios/heldout.jsonl, no models/judge here
    result = invoke("--checkpoint", str(checkpoint), script="hello\nmy card was stolen\n/end\n")
    assert result.exit_code == 0, result.output
    assert "(generated: no data/scenarios/heldout.jsonl)" in result.output
    assert "you> hello" in result.output and "you> my card was stolen" in result.output
    assert result.output.count("agent>") >= 2  # at least one message per round, whatever it says
    assert "Verdict: you left the chat after 2 round(s)." in result.output
    assert "strict_pass no" in result.output and "the verdict is the world's alone" in result.output


def test_chat_keeps_intent_tags_behind_show_tags(disputed, scenarios, tmp_path, monkeypatch):
    import sparring.cli

    monkeypatch.setattr(sparring.cli, "_load_agent", lambda checkpoint, max_new_tokens: ExpertAgent(verify="facts"))
    path = tmp_path / "heldout.jsonl"
    save_scenarios([disputed], path)
    args = ("--checkpoint", str(tmp_path), "--scenarios", str(path), "--judge", str(tmp_path / "no_judge"))
    plain = invoke(*args, script="hello\n/end\n")
    tagged = invoke(*args, "--show-tags", script="hello\n/end\n")
    assert plain.exit_code == 0 and tagged.exit_code == 0, plain.output + tagged.output
    assert agent_lines(plain.output) and not any("<" in line for line in agent_lines(plain.output))
    assert any(f"<{INTENT}>" in line for line in agent_lines(tagged.output))
    assert plain.output.split("episode metrics")[1] == tagged.output.split("episode metrics")[1]


def test_chat_plays_the_chosen_scenario_until_the_round_limit(checkpoint, scenarios, tmp_path):
    path = tmp_path / "heldout.jsonl"
    save_scenarios(scenarios[:3], path)
    chosen = scenarios[2]
    script = "hi\nI need help\nstill there?\nthis is never read\n"
    result = invoke(
        "--checkpoint", str(checkpoint), "--scenarios", str(path), "--scenario", chosen.scenario_id,
        "--judge", str(tmp_path / "no_judge"), "--max-turns", "2", script=script,
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    assert f"{chosen.scenario_id} ({path})" in result.output and chosen.identity["customer_id"] in result.output
    assert "Verdict: the chat reached its 2 rounds after 2 round(s)." in result.output
    assert "you> I need help" in result.output and "still there?" not in result.output  # never asked for


def one_line_error(result, *fragments: str) -> None:
    assert result.exit_code not in (0, None), result.output
    assert "Traceback" not in result.output and result.exception is None or isinstance(result.exception, SystemExit)
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error:"), result.output
    for fragment in fragments:
        assert fragment in lines[0], (fragment, result.output)


def test_a_missing_checkpoint_folder_is_one_line_naming_it(tmp_path):
    missing = tmp_path / "no_such_agent"
    one_line_error(invoke("--checkpoint", str(missing), "--scenarios", str(tmp_path / "x.jsonl")), str(missing))


def test_an_unknown_scenario_id_is_one_line_naming_it(checkpoint, scenarios, tmp_path):
    path = tmp_path / "heldout.jsonl"
    save_scenarios(scenarios[:2], path)
    result = invoke("--checkpoint", str(checkpoint), "--scenarios", str(path), "--scenario", "sc_nope")
    one_line_error(result, "'sc_nope'", str(path), scenarios[0].scenario_id)
    generated = invoke("--checkpoint", str(checkpoint), "--scenarios", str(tmp_path / "none.jsonl"), "--scenario", "x")
    one_line_error(generated, "'x'", "generated scenarios")


def test_a_scenarios_file_that_is_not_one_is_one_line_naming_it(checkpoint, tmp_path):
    path = tmp_path / "heldout.jsonl"
    path.write_text('{"scenario_id": "sc_1"}\n')
    one_line_error(invoke("--checkpoint", str(checkpoint), "--scenarios", str(path)), str(path), "not a scenarios file")


def test_a_judge_folder_that_does_not_load_is_one_line_naming_it(checkpoint, tmp_path):
    judge = tmp_path / "judge"
    judge.mkdir()
    result = invoke(
        "--checkpoint", str(checkpoint), "--scenarios", str(tmp_path / "none.jsonl"), "--judge", str(judge),
        "--params", str(tmp_path / "no_params.yaml"),
    )  # fmt: skip
    one_line_error(result, str(judge), "cannot load the judge")


def test_route_prints_no_loading_bar(checkpoint, tmp_path):
    """transformers' "Loading weights" bar went to the terminal beside route's own progress."""
    csv_in = tmp_path / "in.csv"
    csv_in.write_text("text\nmy card never came\n")
    result = CliRunner().invoke(app, ["route", str(csv_in), "--checkpoint", str(checkpoint)])
    assert result.exit_code == 0, result.output
    assert "Loading" not in result.output and "it/s" not in result.output, result.output
    assert result.output.strip().startswith("routed 1 rows"), result.output
