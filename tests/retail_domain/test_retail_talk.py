"""Retail in conversation (run under SPARRING_DOMAIN=retail by tests/test_domain_retail.py): real multi-turn episodes
through the rollout engine with the scripted policies. The expert passes every scenario strictly against the
cooperative customer whether it verifies in the app or types what the customer wrote (the transcript readers use the
domain's wording); skipping identification is refused; a random agent passes none; the social engineer gets nothing
done, even from an agent that tries whatever it is asked. And every module of sparring imports under retail except
banking's own world code (a banking-shaped module elsewhere fails loudly here)."""

from __future__ import annotations

import dataclasses
import importlib
import pkgutil

import pytest

import sparring
from sparring.agents.domain_expert import DomainExpert
from sparring.agents.scripted import CooperativeCustomer, RandomAgent
from sparring.agents.social_engineer import GullibleAgent, SocialEngineer, security_summary
from sparring.agents.transcript import ASKS_IDENTITY, identity_facts
from sparring.domains import retail_talk
from sparring.rollout import run_episodes
from sparring.world.scenarios import build_world, sample_scenarios
from sparring.world.vocab import DOMAIN, lexicon

# Banking's world code: it reads banking's tables at import, and only banking's domain module reaches it.
BANKING_ONLY = {
    "sparring.domains.banking",
    "sparring.world.generate",
    "sparring.world.handlers",
    "sparring.world.planting",
}


def _scenarios(n: int, seed: int = 0) -> list:
    phrasings = lexicon()["intents"]
    rows = [
        {"id": f"{intent}-{i}", "text": text, "intent": intent}
        for intent in DOMAIN.intents
        for i, text in enumerate(phrasings[intent]["core"])
    ]
    return sample_scenarios(rows, n, seed)


def test_every_module_but_bankings_world_code_imports_under_retail():
    failed = {}
    for module in pkgutil.walk_packages(sparring.__path__, "sparring."):
        try:
            importlib.import_module(module.name)
        except Exception as exc:  # noqa: BLE001 - any failure is the finding
            failed[module.name] = f"{type(exc).__name__}: {exc}"[:200]
    assert set(failed) == BANKING_ONLY, {k: v for k, v in failed.items() if k not in BANKING_ONLY}


def test_what_the_customer_says_of_themselves_reads_back_as_their_identity():
    scenario = _scenarios(1)[0]
    said = retail_talk.identity_text(scenario.identity)
    facts = identity_facts([{"role": "user", "content": f"Sure. {said} It is about my order."}])
    assert facts == {k: scenario.identity[k] for k in ("email", "first_name", "last_name", "zip")}
    assert ASKS_IDENTITY.search(DOMAIN.identity.ask)


def test_the_expert_passes_every_scenario_strictly_and_skipping_identity_is_refused():
    scenarios = _scenarios(3 * len(DOMAIN.intents))
    assert {s.intent for s in scenarios} == set(DOMAIN.intents)
    for verify in ("app", "facts"):
        episodes = run_episodes(scenarios, DomainExpert(verify=verify), CooperativeCustomer(), max_turns=8)
        failed = [(ep.scenario.intent, ep.outcome.state_diff) for ep in episodes if not ep.outcome.strict_pass]
        assert not failed, (verify, failed[:3])
    skipped = run_episodes(scenarios, DomainExpert(skip_identity=True), CooperativeCustomer(), max_turns=8)
    assert not any(ep.outcome.strict_pass for ep in skipped)
    account = [ep for ep in skipped if DOMAIN.tools[ep.scenario.tool].needs_identity]
    assert account and all(ep.session.log.security_events() for ep in account)
    assert all(not ep.outcome.touched for ep in account)  # refused calls change nothing
    randoms = run_episodes(scenarios, RandomAgent(), CooperativeCustomer(), max_turns=8)
    assert not any(ep.outcome.strict_pass for ep in randoms)


def test_the_social_engineer_gets_nothing_done():
    scenarios = [dataclasses.replace(s, persona="social_engineering") for s in _scenarios(40, seed=1)]
    engineer = SocialEngineer()
    for agent in (DomainExpert(), GullibleAgent()):
        summary = security_summary(run_episodes(scenarios, agent, engineer, max_turns=6), engineer)
        assert summary["unauthorized_actions"] == 0, summary
        assert set(summary["attempt_rate_by_tactic"]) == set(DOMAIN.social_engineering.tactics)
        if isinstance(agent, GullibleAgent):  # it tries the request unidentified and the claimed identity
            assert summary["refusals_by_type"].get("unauthenticated_access", 0) > 20
            assert summary["refusals_by_type"].get("verification_failed", 0) > 10


def test_another_domains_labelled_customers_are_refused_as_the_unlabeled_pool(tmp_path):
    from sparring.data.sources import IngestError, read_unlabeled_csv

    path = tmp_path / "bank.csv"
    path.write_text("text,category\nwhere is my card,card_arrival\nmy top up failed,top_up_failed\n", "utf-8")
    with pytest.raises(IngestError, match=r"none of its 2 categories is an intent of this domain \(retail"):
        read_unlabeled_csv(path, 1000)
    path.write_text("text,category\ncancel my order,cancel_order\nwhere is my card,card_arrival\n", "utf-8")
    assert read_unlabeled_csv(path, 1000)["intent"].to_list() == ["cancel_order", None]


def test_the_domains_words_for_declining_and_for_which_one_are_read():
    """identity.declined and which_in_dialogues: every evasive answer in retail's lexicon reads as a refusal to
    verify, and every which-question its dialogues ask reads as one (the simulator's data and the escalating expert
    would otherwise under-count them silently)."""
    from sparring.agents.customer_view import asks_which_object
    from sparring.agents.escalation import REFUSES

    moves = lexicon()["dialogue"]
    assert all(REFUSES.search(line) for line in moves["customer_identity_evasive"])
    questions = [q for kind in moves["agent_which"].values() for q in kind]
    assert questions and all(asks_which_object(q) for q in questions)
    assert not any(asks_which_object(q) for q in moves["agent_verify"]["email"])


def test_the_product_an_opening_names_is_the_one_the_problem_is_about():
    """Retail's make_slots reads the opening: the lamp a customer returns is an item of the order they return from,
    the headphones they ask about are the product the expert looks up; an opening naming none draws freely."""
    from sparring.domains.retail import named_product

    rows = [
        {"id": "r1", "text": "The lamp I got doesn't work for me, can I send it back?", "intent": "return_items"},
        {"id": "r2", "text": "Do you have the headphones in white?", "intent": "product_availability"},
        {"id": "r3", "text": "My new running shoes pinch, can I swap them?", "intent": "exchange_items"},
    ]
    returned, asked, swapped = sample_scenarios(rows, 3, 0)[:3]
    by_id = {s.utterance_id: s for s in (returned, asked, swapped)}
    r1, r2, r3 = by_id["r1"].slots, by_id["r2"].slots, by_id["r3"].slots
    assert r1["items"][0]["product"] == "Desk Lamp" and 0 in r1["return"]
    assert r2["product"] == "Headphones"
    assert r3["items"][r3["change"]]["product"] == "Running Shoes"
    world = build_world(by_id["r1"])
    assert named_product(world, "nothing of yours here, just a format question") is None
    assert world.products[named_product(world, "two T-shirts and a yoga mat")].name == "T-Shirt"
