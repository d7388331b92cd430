"""Model building (from config, pretrained, LoRA) and LMPolicy's batched generation contract."""

from __future__ import annotations

import pytest
import torch
from transformers import AutoTokenizer

from sparring.agents.scripted import CooperativeCustomer, ExpertAgent, RandomAgent
from sparring.data.synthetic import generate_utterances
from sparring.lm.added_rows import BASE_ROWS_ATTR, trained_row_weights
from sparring.lm.chat import END_OF_TURN, known_intents
from sparring.lm.models import ModelSpec, build_model, count_parameters
from sparring.lm.policies import LMPolicy, Policy, TurnRequest
from sparring.lm.tokenizer import train_tokenizer

torch.set_num_threads(1)
TINY = ModelSpec(
    hidden_size=64, num_layers=2, num_heads=2, num_kv_heads=1, intermediate_size=128, tie_word_embeddings=False
)


@pytest.mark.parametrize("arch", ["llama", "qwen2"])
def test_default_spec_builds_a_small_model_wired_to_the_tokenizer(tok, arch):
    model = build_model(ModelSpec(arch=arch, tie_word_embeddings=False), tok)
    assert model.config.model_type == arch
    assert 1_000_000 <= count_parameters(model) <= 5_000_000
    assert model.get_input_embeddings().num_embeddings == len(tok)
    end = tok.convert_tokens_to_ids(END_OF_TURN)
    assert model.config.eos_token_id == model.generation_config.eos_token_id == end
    assert model.config.pad_token_id == tok.pad_token_id and not model.training
    same = build_model(
        ModelSpec(arch=arch, tie_word_embeddings=False), tok
    )  # the init seed makes building deterministic
    assert all(torch.equal(a, b) for a, b in zip(model.parameters(), same.parameters(), strict=True))


def test_tied_embeddings_survive_save_and_reload(tok, tmp_path):
    from sparring.lm.checkpoints import load_checkpoint, save_checkpoint

    model = build_model(ModelSpec(hidden_size=32, num_layers=1, num_heads=2, tie_word_embeddings=True), tok)
    untied = build_model(ModelSpec(hidden_size=32, num_layers=1, num_heads=2, tie_word_embeddings=False), tok)
    assert model.get_output_embeddings().weight is model.get_input_embeddings().weight
    assert count_parameters(untied) - count_parameters(model) == len(tok) * 32
    save_checkpoint(model, tok, tmp_path / "tied")
    loaded, _ = load_checkpoint(tmp_path / "tied")
    assert loaded.get_output_embeddings().weight is loaded.get_input_embeddings().weight
    assert torch.equal(loaded.get_input_embeddings().weight, model.get_input_embeddings().weight)


def test_bad_specs_are_refused(tok):
    with pytest.raises(ValueError, match="num_heads"):
        build_model(ModelSpec(hidden_size=64, num_heads=3), tok)
    with pytest.raises(ValueError, match="dtype"):
        build_model(ModelSpec(dtype="float8"), tok)


def test_pretrained_path_resizes_and_lora_wraps(tok, tmp_path):
    small = train_tokenizer(generate_utterances(2, 1)["text"].to_list(), 500, sorted(known_intents()))
    build_model(TINY, small).save_pretrained(tmp_path)  # a "pretrained" checkpoint and its own tokenizer
    small.save_pretrained(tmp_path)
    spec = ModelSpec(name_or_path=str(tmp_path), lora={"r": 4, "lora_alpha": 8, "target_modules": ["q_proj", "v_proj"]})
    with pytest.raises(ValueError, match="not .*own"):
        build_model(spec, tok)  # another BPE: its ids would read the checkpoint's embeddings as other tokens
    tok = AutoTokenizer.from_pretrained(tmp_path)
    tok.add_tokens(["<extra_a>", "<extra_b>"])  # the checkpoint's vocabulary + tokens of the pipeline's own
    model = build_model(spec, tok)
    assert model.get_input_embeddings().num_embeddings == len(tok) == len(small) + 2
    # LoRA trains, and of the embeddings only the two added rows (a gradient mask holds the base's: added_rows.py)
    embeddings = trained_row_weights(model)
    assert [getattr(w, BASE_ROWS_ATTR) for w in embeddings] == [len(small)] * len(embeddings) and embeddings
    lora = sum(p.numel() for n, p in model.named_parameters() if "lora_" in n)
    added = 2 * sum(w.shape[1] for w in embeddings)
    assert count_parameters(model, trainable_only=True) == lora + added and 0 < lora < count_parameters(model) // 10
    policy = LMPolicy(model, tok, "agent", max_new_tokens=4)
    system = {"role": "system", "content": "You are a helpful support agent for a bank, be kind and brief."}
    prompts = [
        tok.encode(
            tok.apply_chat_template(
                [system, {"role": "user", "content": u}], add_generation_prompt=True, tokenize=False
            ),
            add_special_tokens=False,
        )
        for u in ("hi", "my card is lost")
    ]
    outs = policy.act([TurnRequest("agent", p, [], None, key=i) for i, p in enumerate(prompts)])  # type: ignore[arg-type]
    assert all(1 <= len(o.token_ids) <= 4 and len(o.logprobs) == len(o.token_ids) for o in outs)
    assert policy._prefixes and policy.prefill_tokens[0] < sum(map(len, prompts)) / 2  # the system prompt, once


def test_policies_satisfy_the_protocol(tok):
    model = build_model(TINY, tok)
    for policy in (LMPolicy(model, tok, "customer"), ExpertAgent(), RandomAgent(0), CooperativeCustomer()):
        assert isinstance(policy, Policy)
    with pytest.raises(ValueError):
        LMPolicy(model, tok, "judge")
    with pytest.raises(ValueError):
        LMPolicy(model, tok, "agent", temperature=0)


def test_one_decode_per_act_with_left_padding_and_stop(tok, monkeypatch):
    from sparring.lm import policies

    model = build_model(TINY, tok)
    calls = []
    original = policies.decode

    def counting(model, input_ids, *args):
        calls.append(input_ids.shape)
        return original(model, input_ids, *args)

    monkeypatch.setattr(policies, "decode", counting)
    policy = LMPolicy(model, tok, "agent", max_new_tokens=12, temperature=0.7, top_p=0.9)
    end = tok.convert_tokens_to_ids(END_OF_TURN)
    prompts = [tok.encode(t, add_special_tokens=False) for t in ("hello", "my card never arrived at all, help")]
    requests = [TurnRequest("agent", [*p, end], [], None, key=i) for i, p in enumerate(prompts)]  # type: ignore[arg-type]
    torch.manual_seed(0)
    outs = policy.act(requests)
    assert len(calls) == 1 and calls[0] == (2, max(len(p) + 1 for p in prompts))
    assert policy.batch_sizes == [2] and set(policy._kv) == {0, 1}
    for o in outs:
        assert end not in o.token_ids[:-1] and (o.token_ids[-1] == end or len(o.token_ids) == 12)
        assert all(lp <= 0 for lp in o.logprobs) and o.text == o.text.strip()
        assert tok.decode(o.token_ids[:-1] if o.token_ids[-1] == end else o.token_ids) == o.text
    policy.release([0])
    assert set(policy._kv) == {1}
    policy.release()
    assert not policy._kv and not policy._prefixes and policy.act([]) == []


def test_sampling_draws_each_token_with_its_softmax_probability():
    from sparring.lm.sampling import InverseCdfSampler

    torch.manual_seed(0)
    scores = torch.tensor([[0.0, 1.0, float("-inf"), 2.0, -1.0]]).repeat(100_000, 1)
    out = InverseCdfSampler()(torch.zeros((100_000, 1), dtype=torch.long), scores.clone())
    assert ((out == 0).sum(-1) == 1).all() and torch.isinf(out).sum() == out.numel() - 100_000  # one pick per row
    freq = torch.bincount(out.argmax(-1), minlength=5).float() / 100_000
    expected = torch.softmax(scores[0], -1)
    assert freq[2] == 0 and torch.allclose(freq, expected, atol=0.005)  # a banned token is never drawn
