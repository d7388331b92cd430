"""A quick-profile-sized agent learns for real: routing far above chance after seconds of SFT.

Held-out utterances come from a second generator seed, whose phrasings the training seed never used (the
ingest split does the same), so the accuracy is generalisation, not recall. One intent per tool family makes
routing a six-way decision: chance is 1/6 for the tool and 1/77 for a named intent.
"""

from __future__ import annotations

import torch

from sparring.agents.models import ModelSpec, build_model
from sparring.agents.policies import LMPolicy
from sparring.agents.tokenizer import train_tokenizer
from sparring.data.synthetic import generate_utterances
from sparring.evaluate.agent import route_utterances
from sparring.train.demos import intent_examples
from sparring.train.sft import SFTSettings, train_sft
from sparring.world.taxonomy import load_taxonomy

INTENTS = ["card_arrival", "transaction_charged_twice", "cancel_transfer", "top_up_failed", "atm_support", "age_limit"]


def _frame(per_intent: int, seed: int):
    frame = generate_utterances(per_intent, seed, style_weights={"cooperative": 1.0}, typo_rate=0.0)
    return frame.filter(frame["intent"].is_in(INTENTS)).unique("text", keep="first", maintain_order=True)


def test_quick_agent_routes_heldout_utterances_far_above_chance(tmp_path):
    torch.manual_seed(0)
    train, heldout = _frame(60, seed=11), _frame(8, seed=12)
    tok = train_tokenizer(train["text"].to_list(), vocab_size=700, intents=sorted(load_taxonomy().intents))
    model = build_model(
        ModelSpec(hidden_size=48, num_layers=2, num_heads=2, num_kv_heads=2, intermediate_size=128), tok
    )
    agent = LMPolicy(model, tok, role="agent", max_new_tokens=4, greedy=True)
    tools = {name: spec.tool for name, spec in load_taxonomy().intents.items()}

    def tool_accuracy() -> float:
        routes = route_utterances(agent, heldout["text"].to_list())
        gold = [tools[i] for i in heldout["intent"].to_list()]
        return sum(r["tool"] == g for r, g in zip(routes, gold, strict=True)) / len(gold)

    before = tool_accuracy()
    convs = intent_examples(train["text"].to_list(), train["intent"].to_list())
    settings = SFTSettings(epochs=8, learning_rate=3e-3, batch_size=16, warmup_steps=10, max_length=128)
    agent.model = train_sft(model, tok, convs, settings, tmp_path).model
    after = tool_accuracy()
    assert len(heldout) >= 30 and len(set(heldout["intent"].to_list())) == len(INTENTS)
    assert before < 0.35  # an untrained model names no intent, or a random one
    assert after >= 0.45, (before, after)  # chance: 1/6; measured 0.54-0.65 over tokenizer and epoch variants


def test_intent_examples_are_read_as_the_agent_reads_a_customer_opening():
    """With the agent's system prompt, phase 1's exchanges render exactly as ``route_utterances`` and episodes
    prompt the agent, followed by the intent (trained without it, an untied model prompted with it lost 0.44 of
    its Banking77 held-out accuracy)."""
    from sparring.rollout import AGENT_SYSTEM_PROMPT, agent_opening
    from sparring.train.sft import flatten

    tok = train_tokenizer(_frame(4, seed=1)["text"].to_list(), vocab_size=500, intents=sorted(load_taxonomy().intents))
    text, intent = "  my card still has not arrived ", "card_arrival"
    [example] = intent_examples([text], [intent], system=AGENT_SYSTEM_PROMPT)
    rendered = tok.apply_chat_template(flatten(example), tokenize=False)
    prompt = tok.apply_chat_template(agent_opening(text), add_generation_prompt=True, tokenize=False)
    assert "customer support agent" in prompt and "my card still has not arrived<" in prompt
    assert rendered.startswith(prompt) and rendered[len(prompt) :].startswith(f"<intent>{intent}")
    assert intent_examples([text, " "], [intent, intent]) == [example[1:]]  # no system by default; blanks dropped
