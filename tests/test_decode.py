"""sparring's decode loop (lm/decode.py) against ``model.generate``: the same tokens on fixed prompts for the
default model, a qwen2 member and a LoRA model, greedy and sampled; rows that end at different steps; and whole
episodes (KV reuse, given prefixes, clean edges) identical through LMPolicy with either decoder."""

from __future__ import annotations

import pytest
import torch
from transformers import LogitsProcessor, LogitsProcessorList

from sparring.agents.openings import ContinuesUtterance
from sparring.data.synthetic import utterance_frame
from sparring.lm.decode import decode
from sparring.lm.kv_cache import BufferLayer, buffered_cache
from sparring.lm.models import ModelSpec, build_model
from sparring.lm.policies import LMPolicy
from sparring.lm.tokenizer import end_of_turn_id
from sparring.rollout import run_episodes
from sparring.world.scenarios import sample_scenarios

torch.set_num_threads(1)
SMALL = ModelSpec(hidden_size=64, num_layers=2, num_heads=2, num_kv_heads=1, intermediate_size=128)
LORA = {"r": 4, "lora_alpha": 8, "target_modules": ["q_proj", "v_proj"]}


class EndsAt(LogitsProcessor):
    """Row i ends (its only allowed token is ``end``) at generated step ``steps[i]``: rows end at different steps."""

    def __init__(self, prompt_len: int, steps: list[int], end: int) -> None:
        self.prompt_len, self.steps, self.end = prompt_len, steps, end

    def __call__(self, input_ids: torch.Tensor, scores: torch.Tensor) -> torch.Tensor:
        step = input_ids.shape[1] - self.prompt_len
        for row, at in enumerate(self.steps):
            if step == at:
                scores[row] = float("-inf")
                scores[row, self.end] = 0.0
            elif step < at:
                scores[row, self.end] = float("-inf")
        return scores


def left_padded(tok, texts: list[str]) -> tuple[torch.Tensor, torch.Tensor]:
    prompts = [tok.encode(t, add_special_tokens=False) for t in texts]
    width = max(len(p) for p in prompts)
    ids = torch.full((len(prompts), width), tok.pad_token_id, dtype=torch.long)
    mask = torch.zeros_like(ids)
    for i, p in enumerate(prompts):
        ids[i, width - len(p) :], mask[i, width - len(p) :] = torch.tensor(p), 1
    return ids, mask


def empty_cache(model, capacity: int):
    return buffered_cache([BufferLayer(capacity) for _ in range(model.config.num_hidden_layers)])


@pytest.fixture(scope="module")
def prompts(tok):
    texts = ["i lost my card", "how do i top up my account with a cheque please", "hi", "refund not showing up yet"]
    return left_padded(tok, texts)


@pytest.mark.parametrize("kind", ["llama", "qwen2", "lora"])
def test_the_loop_writes_generates_tokens_rows_ending_at_different_steps(tok, prompts, kind):
    specs = {"llama": ModelSpec(), "qwen2": ModelSpec(arch="qwen2"), "lora": SMALL.model_copy(update={"lora": LORA})}
    spec = specs[kind]  # the default model, a qwen2 member, a LoRA model
    model = build_model(spec, tok).eval()
    ids, mask = prompts
    end, new = end_of_turn_id(tok), 12
    out = {}
    for how in ("loop", "generate"):
        processors = LogitsProcessorList([EndsAt(ids.shape[1], [3, 11, 0, 7], end)])
        cache = empty_cache(model, ids.shape[1] + new)
        with torch.inference_mode():
            if how == "loop":
                out[how] = decode(model, ids, mask, cache, processors, new, end, tok.pad_token_id).sequences
            else:
                out[how] = model.generate(
                    input_ids=ids, attention_mask=mask, logits_processor=processors, max_new_tokens=new,
                    do_sample=False, eos_token_id=end, pad_token_id=tok.pad_token_id, cache=cache,
                    return_dict_in_generate=True,
                ).sequences  # fmt: skip
    assert torch.equal(out["loop"], out["generate"])
    generated = out["loop"][:, ids.shape[1] :].tolist()
    assert [row.index(end) for row in generated] == [3, 11, 0, 7]  # each row's own end, then padding
    assert all(set(row[row.index(end) + 1 :]) <= {tok.pad_token_id} for row in generated)
    assert len(set(map(tuple, generated))) == 4  # the rows differ: a test of rows, not of one row copied


@pytest.fixture(scope="module")
def scenarios():
    return sample_scenarios(utterance_frame(1, 5), 8, seed=3)


@pytest.mark.parametrize("greedy", [True, False])
def test_episodes_are_the_same_with_either_decoder(tok, scenarios, greedy):
    """KV reuse across turns, the shared system prompt, an adversary's given prefix, clean edges and sampling's
    draws: whole episodes token for token, with the same logprobs."""
    agent_model, customer_model = build_model(SMALL, tok), build_model(SMALL, tok, seed=1)
    episodes = {}
    for how in ("loop", "generate"):
        opts = {"max_new_tokens": 16, "greedy": greedy, "kv_cache_dtype": "auto", "decoder": how}
        agent = LMPolicy(agent_model, tok, "agent", **opts)
        customer = ContinuesUtterance(LMPolicy(customer_model, tok, "customer", **opts))
        episodes[how] = run_episodes(scenarios, agent, customer, max_turns=3, seed=5)
    loop, gen = episodes["loop"], episodes["generate"]
    assert [e.token_ids for e in loop] == [e.token_ids for e in gen]
    assert [e.messages for e in loop] == [e.messages for e in gen]
    for a, b in zip(loop, gen, strict=True):
        assert a.agent_logprobs == pytest.approx(b.agent_logprobs, abs=1e-5)
    said = [m["content"] for e in loop for m in e.messages]
    assert all(text == text.strip() for text in said)  # the edge rule holds on the loop's messages


def test_a_bad_decoder_is_refused(tok):
    with pytest.raises(ValueError, match="decoder"):
        LMPolicy(build_model(SMALL, tok), tok, "agent", decoder="beam")


def test_gym_step_times_switch_reaches_every_policy_and_undoes_itself(tok):
    """benchmarks/gym_step_time.py's "before" path: generate over a bfloat16 cache for policies built inside the
    switch (the gym builds them deep in the trainer), a caller's own option kept, the defaults back after it."""
    from benchmarks.gym_step_time import ARMS, rollout_path

    model = build_model(SMALL, tok)
    with rollout_path(ARMS["before"][0]):
        inside = LMPolicy(model, tok, "agent")
        chosen = LMPolicy(model, tok, "agent", decoder="loop")
    after = LMPolicy(model, tok, "agent")
    assert (inside.decoder, inside._narrow_kv) == ("generate", torch.bfloat16)
    assert chosen.decoder == "loop"
    assert (after.decoder, after._narrow_kv) == ("loop", None)
