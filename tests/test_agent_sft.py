"""A quick-profile-sized agent learns for real: routing far above chance after seconds of SFT.

Held-out utterances come from a second generator seed, whose phrasings the training seed never used (the
ingest split does the same), so the accuracy is generalisation, not recall. One intent per tool family makes
routing a six-way decision: chance is 1/6 for the tool and 1/77 for a named intent.
"""

from __future__ import annotations

import pytest
import torch

from sparring.data.synthetic import generate_utterances
from sparring.lm.models import ModelSpec, build_model
from sparring.lm.policies import LMPolicy
from sparring.lm.tokenizer import train_tokenizer
from sparring.rollout import route_utterances
from sparring.settings import AgentSFTSettings, SFTSettings
from sparring.train.demos import intent_examples
from sparring.train.sft import train_sft
from sparring.world.taxonomy import load_taxonomy

INTENTS = ["card_arrival", "transaction_charged_twice", "cancel_transfer", "top_up_failed", "atm_support", "age_limit"]


def _frame(per_intent: int, seed: int):
    frame = generate_utterances(per_intent, seed, style_weights={"cooperative": 1.0}, typo_rate=0.0)
    return frame.filter(frame["intent"].is_in(INTENTS)).unique("text", keep="first", maintain_order=True)


# (assistant_only_loss, the held-out tool accuracy to reach): the reply alone, and DA0's intent phase, whose loss on
# every token (every position through the LM head) also spends these few steps on the customers' language
@pytest.mark.parametrize("assistant_only_loss, floor", [(True, 0.8), (False, 0.4)], ids=["reply_only", "whole_text"])
def test_quick_agent_routes_heldout_utterances_far_above_chance(tmp_path, assistant_only_loss, floor):
    torch.manual_seed(0)
    train, heldout = _frame(60, seed=11), _frame(8, seed=12)
    tok = train_tokenizer(train["text"].to_list(), vocab_size=700, intents=sorted(load_taxonomy().intents))
    model = build_model(
        ModelSpec(
            hidden_size=48, num_layers=2, num_heads=2, num_kv_heads=2, intermediate_size=128, tie_word_embeddings=False
        ),
        tok,
    )
    model.config.agent_system_prompt = ""  # as DA0 from scratch: trained and prompted without a system message
    agent = LMPolicy(model, tok, role="agent", max_new_tokens=4, greedy=True)
    tools = {name: spec.tool for name, spec in load_taxonomy().intents.items()}

    def tool_accuracy() -> float:
        routes = route_utterances(agent, heldout["text"].to_list())
        gold = [tools[i] for i in heldout["intent"].to_list()]
        return sum(r["tool"] == g for r, g in zip(routes, gold, strict=True)) / len(gold)

    before = tool_accuracy()
    convs = intent_examples(train["text"].to_list(), train["intent"].to_list())
    settings = SFTSettings(
        epochs=8,
        learning_rate=3e-3,
        batch_size=16,
        warmup_steps=10,
        max_length=128,
        assistant_only_loss=assistant_only_loss,
    )
    agent.model = train_sft(model, tok, convs, settings, tmp_path).model
    after = tool_accuracy()
    assert len(heldout) >= 30 and len(set(heldout["intent"].to_list())) == len(INTENTS)
    assert before < 0.35  # an untrained model names no intent, or a random one
    # chance: 1/6; measured 0.96 (0.54-0.65 when prompted with a system message it was not trained with)
    assert after >= floor, (before, after)


def test_intent_examples_are_read_as_the_agent_reads_a_customer_opening():
    """With the agent's system prompt, phase 1's exchanges render exactly as ``route_utterances`` and episodes
    prompt the agent, followed by the intent (trained without it, an untied model prompted with it lost 0.44 of
    its Banking77 held-out accuracy)."""
    from sparring.lm.chat import AGENT_SYSTEM_PROMPT
    from sparring.rollout import agent_opening
    from sparring.train.sft import flatten

    tok = train_tokenizer(_frame(4, seed=1)["text"].to_list(), vocab_size=500, intents=sorted(load_taxonomy().intents))
    text, intent = "  my card still has not arrived ", "card_arrival"
    [example] = intent_examples([text], [intent], system=AGENT_SYSTEM_PROMPT)
    rendered = tok.apply_chat_template(flatten(example), tokenize=False)
    prompt = tok.apply_chat_template(agent_opening(text), add_generation_prompt=True, tokenize=False)
    assert "customer support agent" in prompt and "my card still has not arrived<" in prompt
    assert rendered.startswith(prompt) and rendered[len(prompt) :].startswith(f"<intent>{intent}")
    assert intent_examples([text, " "], [intent, intent]) == [example[1:]]  # no system by default; blanks dropped


def test_an_agent_checkpoint_keeps_the_system_prompt_it_was_trained_with(tmp_path, tok, heldout):
    """DA0 from scratch trains without a system message (``agent_sft.system_prompt``: the constant prefix
    stalled its routing); its config records that, so every episode and route after a reload prompts it alike.
    A model without the record (a pretrained one, old checkpoints) reads the instructions."""
    from sparring.agents.scripted import CooperativeCustomer
    from sparring.lm.chat import AGENT_SYSTEM_PROMPT, USER
    from sparring.lm.checkpoints import load_checkpoint, save_checkpoint
    from sparring.rollout import agent_opening, run_episodes

    spec = ModelSpec(
        hidden_size=32, num_layers=1, num_heads=2, num_kv_heads=1, intermediate_size=64, tie_word_embeddings=False
    )
    model = build_model(spec, tok)
    assert LMPolicy(model, tok, role="agent").system_prompt == AGENT_SYSTEM_PROMPT
    model.config.agent_system_prompt = ""
    save_checkpoint(model, tok, tmp_path / "agent")
    reloaded, reloaded_tok = load_checkpoint(tmp_path / "agent")
    agent = LMPolicy(reloaded, reloaded_tok, role="agent", max_new_tokens=4)
    assert agent.system_prompt == ""
    [bare] = run_episodes(heldout[:1], agent, CooperativeCustomer(), max_turns=1)
    [instructed] = run_episodes(
        heldout[:1], agent, CooperativeCustomer(), max_turns=1, agent_system=AGENT_SYSTEM_PROMPT
    )
    assert [m["role"] for m in bare.messages][:1] == ["user"]
    assert bare.token_ids[0] == reloaded_tok.convert_tokens_to_ids(USER)
    assert instructed.messages[0] == {"role": "system", "content": AGENT_SYSTEM_PROMPT}
    text = "my card has not arrived"
    route_utterances(agent, [text])  # routes read the same prompt: the opening alone
    opening = reloaded_tok.apply_chat_template(agent_opening(text, ""), add_generation_prompt=True, return_dict=False)
    assert agent.prefill_tokens[-1] == len(opening) < 20


def test_warm_start_rehearses_a_seeded_sample_of_phase_one_among_the_demos(tmp_path, monkeypatch):
    """Phase 2 sees the demos plus ``intent_rehearsal`` of phase 1's exchanges (the same ones for a seed), each
    answered as the demos answer an opening, with phase 2's settings; phase 1 sees every exchange with the loss on
    the whole text."""
    import sparring.train.demos as demos_module
    from sparring.train.demos import warm_start
    from sparring.train.sft import SFTResult

    calls = []

    def fake_train_sft(model, tokenizer, conversations, settings, output_dir, seed=0):
        calls.append((list(conversations), settings))
        return SFTResult(model=model)

    monkeypatch.setattr(demos_module, "train_sft", fake_train_sft)
    frame = _frame(4, seed=3)
    texts, intents = frame["text"].to_list(), frame["intent"].to_list()
    demo = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}]
    phases = {"intent": SFTSettings(epochs=2, batch_size=16, assistant_only_loss=False),
              "sft": SFTSettings(epochs=3, batch_size=4)}  # fmt: skip

    def run(rehearsal: int, seed: int = 0):
        calls.clear()
        settings = AgentSFTSettings(**phases, intent_rehearsal=rehearsal)
        warm_start(None, None, [demo], texts, intents, settings, tmp_path, seed=seed)
        return calls[0], calls[1]

    (phase1, s1), (phase2, s2) = run(5)
    assert phase1 == intent_examples(texts, intents) and (s1.epochs, s1.batch_size, s1.assistant_only_loss) == (
        2, 16, False)  # fmt: skip
    # rehearsed: phase 1 exchanges whose reply is the demos' first reply, not the bare intent
    assert phase2[0] == demo and len(phase2) == 6
    assert all(ex[:-1] + [{**ex[-1], "content": ""}] in phase1 and ex[-1]["content"] == "hello" for ex in phase2[1:])
    assert (s2.epochs, s2.batch_size, s2.assistant_only_loss) == (3, 4, True)
    assert run(5)[1][0] == phase2 and run(5, seed=1)[1][0] != phase2  # seeded
    assert run(0)[1][0] == [demo] and len(run(10_000)[1][0]) == 1 + len(phase1)


def test_expert_demonstrations_play_a_customer_policy_as_they_play_its_name(tmp_path):
    """A policy in ``customers`` (a trained adversary in ``agent_gym.py --expert``) is played as given: the
    scripted cooperative customer's instance yields exactly the demos its name does; a name not known is refused,
    and so is SFT on no demos at all (an expert that passed nothing) instead of failing inside TRL."""
    import pytest

    from sparring.agents.scripted import CooperativeCustomer
    from sparring.data.synthetic import utterance_frame
    from sparring.train.demos import expert_demonstrations
    from sparring.world.scenarios import sample_scenarios

    scenarios = sample_scenarios(utterance_frame(2, seed=3), 12, seed=1)
    by_name = expert_demonstrations(scenarios, 0, ("cooperative",), refs="described")
    by_policy = expert_demonstrations(scenarios, 0, (CooperativeCustomer(),), refs="described")
    assert len(by_name) >= 10 and by_policy == by_name
    assert any(m["role"] == "tool" for m in by_policy[0])  # whole episodes: looked up, resolved, ended
    with pytest.raises(ValueError, match="nobody"):
        expert_demonstrations(scenarios, 0, ("nobody", CooperativeCustomer()))
    with pytest.raises(ValueError, match="no conversations"):
        train_sft(None, None, [], SFTSettings(), tmp_path)


def test_a_recovery_demonstration_keeps_its_wrong_turns_out_of_the_loss(tmp_path):
    """DART-style recovery demos: every agent turn up to the wrong confirmation believes the wrong intent and is
    marked ``train: false``; TRL's own tokenization of them (SFTTrainer's dataset: its labels, assistant_only_loss)
    trains the recovery after the customer's no and not one token of the wrong turns."""
    from datasets import Dataset
    from trl import SFTTrainer

    from sparring.data.synthetic import utterance_frame
    from sparring.train.demos import recovery_demonstrations
    from sparring.train.sft import flatten, sft_config
    from sparring.world.scenarios import sample_scenarios

    scenarios = sample_scenarios(utterance_frame(2, seed=3), 12, seed=1)
    demos = recovery_demonstrations(scenarios, 0, refs="described")
    assert len(demos) >= 8
    turns = []
    for demo in demos:
        agent = [m for m in demo if m["role"] == "assistant"]
        confirms = [
            (m, m["tool_calls"][0]["function"]["arguments"]["intent"])
            for m in agent
            if m.get("tool_calls") and m["tool_calls"][0]["function"]["name"] == "confirm_request"
        ]
        (wrong_turn, wrong), (right_turn, right) = confirms[0], confirms[1]
        assert wrong != right and wrong_turn.get("train") is False and right_turn.get("train") is None
        cut = agent.index(wrong_turn)
        assert all(m["train"] is False and m["intent"] == wrong for m in agent[: cut + 1])
        assert all("train" not in m and m["intent"] == right for m in agent[cut + 1 :])
        turns.append((wrong, right))
    tok = train_tokenizer(
        [m["content"] for d in demos for m in flatten(d)], vocab_size=900, intents=sorted(load_taxonomy().intents)
    )
    model = build_model(ModelSpec(hidden_size=16, num_layers=1, num_heads=2, num_kv_heads=2, intermediate_size=32), tok)
    trainer = SFTTrainer(
        model=model,
        args=sft_config(SFTSettings(max_steps=1, batch_size=2, max_length=4096), tmp_path),
        train_dataset=Dataset.from_list([{"messages": flatten(d)} for d in demos]),
        processing_class=tok,
    )
    for row, (wrong, right) in zip(trainer.train_dataset, turns, strict=True):
        trained = tok.decode([i for i, label in zip(row["input_ids"], row["labels"], strict=True) if label != -100])
        whole = tok.decode(row["input_ids"])
        assert f"<intent>{wrong}" in whole and f"<intent>{wrong}" not in trained
        assert f'"intent": "{right}"' in trained and "end_conversation" in trained
