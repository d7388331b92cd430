"""Checkpoints load offline on any device: transformers 5 kernelizes every ``from_pretrained`` model with hub
kernels, which it fetches from the hub on CUDA at the first ``model.train()`` (a lent GPU failed there); importing
sparring turns hub kernels off unless the user set ``USE_HUB_KERNELS`` themselves."""

import os
import subprocess
import sys

from sparring.data.synthetic import utterance_frame
from sparring.lm.chat import known_intents
from sparring.lm.checkpoints import load_checkpoint, same_checkpoint, save_checkpoint
from sparring.lm.models import build_model
from sparring.lm.tokenizer import train_tokenizer
from sparring.train.distributed_check import SPEC


def test_a_loaded_checkpoint_does_not_use_hub_kernels(tmp_path):
    frame = utterance_frame(2, seed=0)
    tokenizer = train_tokenizer(frame["text"].to_list(), 700, sorted(known_intents()))
    save_checkpoint(build_model(SPEC, tokenizer, seed=0), tokenizer, tmp_path / "ckpt")
    model, _ = load_checkpoint(tmp_path / "ckpt")
    assert model.use_kernels is False


def test_a_model_saved_twice_is_the_same_checkpoint_and_a_changed_weight_is_not(tmp_path):
    """What lets evaluate play a frozen peer teacher once: its folder equals the final agent's byte for byte."""
    import torch

    frame = utterance_frame(2, seed=0)
    tokenizer = train_tokenizer(frame["text"].to_list(), 700, sorted(known_intents()))
    model = build_model(SPEC, tokenizer, seed=0)
    for name in ("final", "teacher"):
        save_checkpoint(model, tokenizer, tmp_path / name)
    assert same_checkpoint(tmp_path / "final", tmp_path / "teacher")
    with torch.no_grad():
        next(model.parameters()).view(-1)[0] += 1e-3
    save_checkpoint(model, tokenizer, tmp_path / "learner")
    assert not same_checkpoint(tmp_path / "final", tmp_path / "learner")
    (tmp_path / "teacher" / "notes.json").write_text("{}")  # a file the other lacks
    assert not same_checkpoint(tmp_path / "final", tmp_path / "teacher")
    assert not same_checkpoint(tmp_path / "final", tmp_path / "missing")


def test_importing_sparring_defaults_hub_kernels_off_and_keeps_a_users_choice():
    show = "import os, sparring; print(os.environ['USE_HUB_KERNELS'])"
    env = {k: v for k, v in os.environ.items() if k != "USE_HUB_KERNELS"}
    unset = subprocess.run([sys.executable, "-c", show], env=env, capture_output=True, text=True, check=True)
    chosen = subprocess.run(
        [sys.executable, "-c", show], env={**env, "USE_HUB_KERNELS": "YES"}, capture_output=True, text=True, check=True
    )
    assert unset.stdout.strip() == "NO" and chosen.stdout.strip() == "YES"
