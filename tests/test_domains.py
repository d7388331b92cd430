"""The world as a domain file: banking loads into the tables the world reads; a bad file is refused by key and line."""

from __future__ import annotations

import dataclasses
import os
import re
from pathlib import Path

import pytest
from typer.testing import CliRunner

from pipelines.cli import app
from sparring.domains import HERE, DomainError, load_domain
from sparring.world import vocab
from sparring.world.calls import ToolError
from sparring.world.tools import validate
from sparring.world.vocab import INTENT_SPECS, TOOLS, resolving_args

BANKING = HERE / "banking.yaml"


def test_banking_is_the_world_the_tools_read() -> None:
    banking = load_domain("banking")
    assert vocab.DOMAIN is banking and TOOLS is banking.tools and INTENT_SPECS is banking.intents
    assert len(banking.intents) == 77 and banking.lexicon.is_file()
    # Every acting intent's resolving call passes its own tool's argument check (the cross-references hold).
    for spec in banking.intents.values():
        if spec.action is None:
            continue  # reading the account resolves it: no call of its own
        params = TOOLS[spec.tool].params
        slots = {k: 10.0 if params[k].type == "number" else (params[k].choices or ["x"])[0] for k in spec.slot_args}
        validate(TOOLS[spec.tool], resolving_args(spec, "T1" if spec.target else None, slots, "merchant_team"))
    # The queue-quoting intents are exactly those whose action requires a read_args argument.
    assert {i for i, s in INTENT_SPECS.items() if s.quotes_queue} == {
        i for i, s in INTENT_SPECS.items() if s.action and "case_queue" in TOOLS[s.tool].actions[s.action]
    }


def _broken(tmp_path: Path, old: str, new: str) -> Path:
    text = BANKING.read_text("utf-8")
    assert text.count(old) == 1, old
    path = tmp_path / "broken.yaml"
    path.write_text(text.replace(old, new), "utf-8")
    (tmp_path / "banking_lexicon.json").write_text((HERE / "banking_lexicon.json").read_text("utf-8"), "utf-8")
    return path


def _line_of(path: Path, needle: str) -> int:
    text = path.read_text("utf-8")
    return text[: text.index(needle)].count("\n") + 1


@pytest.mark.parametrize(
    ("old", "new", "where", "says"),
    [
        # an unknown key, at the line it is written
        (
            "    selector: reason\n",
            "    selector: reason\n    colour: red\n",
            "colour: red",
            "tools.dispute_charge.colour: unknown key",
        ),
        # a missing key: the line of the mapping that lacks it
        (
            "  card_arrival:\n    tool: card_services\n",
            "  card_arrival:\n",
            "card_arrival:",
            "intents.card_arrival.tool: missing key",
        ),
        # an intent whose tool does not exist
        (
            "  card_linking:\n    tool: card_services\n",
            "  card_linking:\n    tool: card_service\n",
            "tool: card_service\n",
            "intents.card_linking.tool: unknown tool 'card_service'",
        ),
        # a precondition on an unknown field
        (
            "      track_delivery: [card_id]",
            "      track_delivery: [card_number]",
            "track_delivery: [card_number]",
            "tools.card_services.actions.track_delivery.0: precondition on unknown argument 'card_number'",
        ),
        # an identity fact with no regex for its value: transcript readers would silently miss it
        (
            "    postcode: ['[A-Z]{1,2}\\d{1,2}[A-Z]? ?\\d[A-Z]{2}']\n",
            "",
            "  values:",
            "identity.values: no regex for 'postcode'",
        ),
        (
            "    card_last4: ['\\d{4}']",
            "    card_last4: ['(\\d{4}']",
            "card_last4: ['",
            "identity.values.card_last4.0: not a regex",
        ),
        # the wording of a value that is not an identifying one, and a wording that is no regex
        (
            "    card_last4: 'card ending (?:in )?'",
            "    card_number: 'card ending (?:in )?'",
            "card_number: 'card",
            "identity.said.card_number: 'card_number' is not an identifying value (identity.values)",
        ),
        (
            "  asked: 'verif|",
            "  asked: '(verif|",
            "asked: '(verif",
            "identity.asked: not a regex",
        ),
        # how an agent names an object in "which ...?" must be a regex
        ("words: ['top-?up']", "words: ['top-(up']", "words: ['top-(up']", "objects.top_up.words.0: not a regex"),
        (
            "  objects: '\\b(?:cards?|",
            "  objects: '\\b((?:cards?|",
            "objects: '",
            "which_in_dialogues.objects: not a regex",
        ),
        # a wrong type
        ("  facts_needed: 2", "  facts_needed: two", "facts_needed: two", "identity.facts_needed:"),
        # code the file names that does not exist
        (
            "module: sparring.domains.banking\n",
            "module: sparring.domains.bankin\n",
            "module: sparring",
            "module: no Python module 'sparring.domains.bankin'",
        ),
        # no way to end a conversation: every domain's episodes end with end_conversation
        (
            "  end_conversation:\n    description: End the conversation once the request is resolved.\n",
            "  end_chat:\n    description: End the conversation once the request is resolved.\n",
            "tools:",
            "tools: missing tool 'end_conversation'",
        ),
    ],
)
def test_a_bad_domain_file_is_refused_by_key_and_line(
    tmp_path: Path, old: str, new: str, where: str, says: str
) -> None:
    path = _broken(tmp_path, old, new)
    with pytest.raises(DomainError) as caught:
        load_domain(path)
    message = str(caught.value)
    assert str(path) in message and says in message, message
    assert re.search(rf"line {_line_of(path, where)}: {re.escape(says)}", message), message


def test_every_problem_is_listed_at_once(tmp_path: Path) -> None:
    path = _broken(tmp_path, "      track_delivery: [card_id]", "      track_delivery: [card_number]")
    text = path.read_text("utf-8").replace(
        "  card_linking:\n    tool: card_services\n", "  card_linking:\n    tool: nope\n"
    )
    path.write_text(text, "utf-8")
    with pytest.raises(DomainError, match="2 problem") as caught:
        load_domain(path)
    assert "card_number" in str(caught.value) and "'nope'" in str(caught.value)


def test_retail_loads_and_shares_the_world_s_code_contract() -> None:
    retail = load_domain("retail")
    assert retail.module == "sparring.domains.retail" and retail.identity.tool == "find_user_id"
    assert retail.tools["return_delivered_order_items"].params["item_ids"].type == "array"
    assert {"end_conversation", "transfer_to_human"} <= set(retail.tools) and len(retail.intents) == 14
    with pytest.raises(ToolError, match="list of non-empty strings"):
        validate(
            retail.tools["return_delivered_order_items"], {"order_id": "#W1", "item_ids": "1", "payment_method_id": "g"}
        )


def test_the_domain_command_checks_a_file_and_changes_nothing(tmp_path: Path) -> None:
    runner = CliRunner()
    good = runner.invoke(app, ["domain", "banking"])
    assert good.exit_code == 0 and "77 intents" in good.output
    path = _broken(tmp_path, "  card_linking:\n    tool: card_services\n", "  card_linking:\n    tool: card_service\n")
    before = {p.name: p.read_bytes() for p in tmp_path.iterdir()}
    bad = runner.invoke(app, ["domain", str(path)])
    assert bad.exit_code == 2 and "unknown tool 'card_service'" in bad.output and "Traceback" not in bad.output
    assert {p.name: p.read_bytes() for p in tmp_path.iterdir()} == before


def test_a_social_engineering_phrase_the_engineer_cannot_fill_is_named() -> None:
    from sparring.agents.social_engineer import TACTICS, unknown_placeholders

    phrases = load_domain("banking").social_engineering
    assert TACTICS == tuple(phrases.tactics) and unknown_placeholders(phrases) == []
    broken = dataclasses.replace(phrases, pushes=(*phrases.pushes, "Send it to {iban}."))
    assert unknown_placeholders(broken) == ["pushes: {iban} in 'Send it to {iban}.'"]


def test_params_domain_is_bound_before_the_world_and_a_second_one_is_refused(tmp_path: Path, monkeypatch) -> None:
    """sparring.runtime.bind_domain: a packaged name or a file's path (relative to the project) becomes
    $SPARRING_DOMAIN; an unknown one is named with the packaged ones; this process plays banking, so retail is
    refused rather than mixed in."""
    from sparring.runtime import DOMAIN_ENV, bind_domain

    monkeypatch.delenv(DOMAIN_ENV, raising=False)
    assert bind_domain("banking", tmp_path) == HERE / "banking.yaml"
    assert Path(os.environ[DOMAIN_ENV]) == HERE / "banking.yaml"
    copy = tmp_path / "mine.yaml"
    copy.write_text((HERE / "banking.yaml").read_text("utf-8"), "utf-8")
    with pytest.raises(ValueError, match="already plays banking"):
        bind_domain("mine.yaml", tmp_path)  # another file, though the same words
    with pytest.raises(ValueError, match=r"no domain 'shop' \(packaged: banking, retail"):
        bind_domain("shop", tmp_path)
    with pytest.raises(ValueError, match="already plays banking, not 'retail'"):
        bind_domain("retail", tmp_path)
