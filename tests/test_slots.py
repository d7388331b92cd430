"""Slot placeholders: an LM customer's [key]s are filled from its scenario before the agent reads them."""

from __future__ import annotations

import torch

from sparring.agents.customer_prompt import customer_goal, identity_text
from sparring.agents.scripted import CooperativeCustomer, ExpertAgent, describe_slots
from sparring.agents.slots import delexicalize, fact_values, lexicalize, slot_values
from sparring.lm.chat import END_OF_TURN
from sparring.lm.policies import TurnOutput, TurnRequest
from sparring.metrics import episode_metrics
from sparring.rollout import run_episodes

torch.set_num_threads(1)


def test_delexicalize_and_lexicalize_round_trip(heldout):
    detailed = 0
    for s in heldout:
        said = f"{identity_text(s)} {describe_slots(s)}"
        for values in (fact_values(s), slot_values(s)):
            template = delexicalize(said, values)
            assert lexicalize(template, values) == said
            assert not any(v in template for k, v in values.items() if len(v) > 4), template
        template = delexicalize(said, slot_values(s))  # what an LM customer writes
        assert s.identity["customer_id"] not in customer_goal(s) and "[customer_id]" in customer_goal(s)
        # An LM customer may state the whole description as [details]; its goal spells it out fact by fact.
        if describe_slots(s):
            detailed += 1
            assert template.endswith(" [details]") and "[details]" not in customer_goal(s)
            assert delexicalize(describe_slots(s), fact_values(s)) in customer_goal(s)
        else:
            assert "details" not in slot_values(s)
    assert detailed > 30  # scenarios whose details name an object
    assert (
        lexicalize("It was [amount] at [shop] [merchant]", {"amount": "3.00 GBP"})
        == "It was 3.00 GBP at [shop] [merchant]"
    )
    assert delexicalize("card C1234567 and 1234", {"x": "1234"}) == "card C1234567 and [x]"  # whole words only


class PlaceholderCustomer:
    """The cooperative customer, speaking as a delexicalized LM would: its facts as [key]s, with token ids."""

    def __init__(self, tokenizer) -> None:
        self.tokenizer, self.inner = tokenizer, CooperativeCustomer()
        self.end = tokenizer.convert_tokens_to_ids(END_OF_TURN)

    def act(self, requests: list[TurnRequest]) -> list[TurnOutput]:
        outs = []
        for r, said in zip(requests, self.inner.act(requests), strict=True):
            text = delexicalize(said.text, slot_values(r.scenario))
            ids = self.tokenizer.encode(text, add_special_tokens=False)
            outs.append(TurnOutput(text=text, token_ids=[*ids, self.end], logprobs=[0.0] * (len(ids) + 1)))
        return outs


def test_rollout_fills_placeholders_for_the_agent_and_keeps_them_in_the_customers_view(heldout, tok):
    customer = PlaceholderCustomer(tok)
    episodes = run_episodes(heldout, ExpertAgent(refs="described"), customer, max_turns=6, seed=0, tokenizer=tok)
    # The agent read the values: the described expert still passes everything, the world matched the details.
    assert episode_metrics(episodes)["strict_pass"] == 1.0
    filled = 0
    for e in episodes:
        own = [m["content"] for m in e.customer_messages if m["role"] == "assistant"]
        heard = [m["content"] for m in e.messages if m["role"] == "user"]
        values = slot_values(e.scenario)
        assert heard == [lexicalize(text, values) for text in own]
        assert not any("[customer_id]" in text for text in heard)
        filled += any("[customer_id]" in text for text in own)
        assert tok.decode(e.token_ids, skip_special_tokens=False) == tok.apply_chat_template(e.messages, tokenize=False)
    assert filled == len(episodes)  # every customer stated its identity as placeholders, the agent read values
