"""One door to TRL (#45): the private names of TRL and transformers sparring touches appear in one module of
src/sparring only, sparring.hf_door, each use beside a check of the version it was written for; a version outside
that series fails loudly, naming it; a trainer frozen by train.trl.FreezeWhen steps with lr 0 from then on."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

import sparring.hf_door as hf_door

SRC = Path(__file__).resolve().parents[1] / "src" / "sparring"
PRIVATE = ("_use_triton", "_name_or_path", "_attn_implementation", "_generate_and_score_completions", "base_lrs")
DOOR = "hf_door.py"
# the door's other touches: TRL's switch and "ref" adapter by name, SFTTrainer's token count, SDPA's GQA switch
ALSO_TOUCHED = ("TRL_SWITCH", "TRL_REFERENCE_ADAPTER", "_total_train_tokens", "SDPA_FORCE_GQA")


@pytest.mark.parametrize("name", (*PRIVATE, "_total_train_tokens", "TRANSFORMERS_SDPA_FORCE_GQA"))
def test_each_private_name_appears_in_the_door_only(name):
    word = re.compile(rf"(?<![A-Za-z0-9]){re.escape(name)}")  # peft's public base_model_name_or_path is no match
    found = sorted(str(p.relative_to(SRC)) for p in SRC.rglob("*.py") if word.search(p.read_text(encoding="utf-8")))
    assert found == [DOOR]


def test_every_private_touch_checks_its_version_first():
    """Each top-level function of the door that names a private checks a version before it touches anything."""
    import ast

    tree = ast.parse((SRC / DOOR).read_text(encoding="utf-8"))
    touching = []
    for node in tree.body:
        if isinstance(node, ast.FunctionDef) and node.name not in ("written_for", "installed_version"):
            text = ast.unparse(node)
            if any(name in text for name in (*PRIVATE, *ALSO_TOUCHED)):
                touching.append(node)
    assert len(touching) >= 11
    for node in touching:
        body = [s for s in node.body if not (isinstance(s, ast.Expr) and isinstance(s.value, ast.Constant))]
        first = ast.unparse(body[0])
        assert first.startswith(("_trl(", "_transformers(")), (node.name, first)


@pytest.mark.parametrize(
    ("package", "touch"),
    [
        ("trl", lambda: hf_door.token_advantage_trainer(object, lambda a, c: [a])),
        ("trl", lambda: hf_door.score_labelled_positions_only().__enter__()),
        ("transformers", lambda: hf_door.attention_implementation(object())),
        ("transformers", lambda: hf_door.zero_learning_rates(object(), object())),
    ],
)
def test_a_version_outside_the_series_fails_loudly_naming_it(monkeypatch, package, touch):
    real = hf_door.installed_version
    monkeypatch.setattr(hf_door, "installed_version", lambda p: "9.99.1" if p == package else real(p))
    with pytest.raises(
        hf_door.LibraryVersionError, match=rf"written for {package} \d+\.\d+\.\*, but {package} 9\.99\.1"
    ):
        touch()


def test_the_installed_versions_are_the_series_and_patch_releases_pass(monkeypatch):
    hf_door.written_for("trl", hf_door.TRL_SERIES, "test")
    hf_door.written_for("transformers", hf_door.TRANSFORMERS_SERIES, "test")
    monkeypatch.setattr(hf_door, "installed_version", lambda p: "1.16.7")
    hf_door.written_for("trl", "1.16", "test")
    with pytest.raises(hf_door.LibraryVersionError):
        hf_door.written_for("trl", "1.1", "test")  # 1.16 is not in the 1.1 series


def test_token_advantages_come_from_what_the_rollout_returned():
    import torch

    class Scored:
        def _generate_and_score_completions(self, inputs):
            return {"advantages": torch.tensor([2.0, -1.0]), "completion_ids": torch.zeros(2, 3)}

    trainer = hf_door.token_advantage_trainer(Scored, lambda a, c: [a * w for w in c])()
    rows = [{hf_door.TOKEN_CREDIT: [1.0, 0.5]}, {hf_door.TOKEN_CREDIT: [2.0, 2.0, 2.0, 9.0]}]
    assert trainer._generate_and_score_completions(rows)["advantages"].tolist() == [[2.0, 1.0, 2.0], [-2.0] * 3]
    assert trainer._generate_and_score_completions([{}, {}])["advantages"].dim() == 1  # no credit: TRL's Â


def test_freeze_when_holds_the_learning_rate_at_zero_from_that_step(tmp_path):
    import torch
    from transformers import Trainer, TrainingArguments

    from sparring.train.trl import FreezeWhen

    class Line(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.w = torch.nn.Parameter(torch.ones(1))

        def forward(self, x, labels=None):
            return {"loss": ((self.w * x - labels) ** 2).mean()}

    data = [{"x": torch.tensor([1.0]), "labels": torch.tensor([3.0])}] * 8
    steps: list[tuple[int, float, float]] = []

    class Watch(FreezeWhen):
        def on_step_end(self, args, state, control, **kwargs):
            steps.append((state.global_step, kwargs["optimizer"].param_groups[0]["lr"], model.w.item()))

    model = Line()
    args = TrainingArguments(
        output_dir=str(tmp_path), max_steps=6, per_device_train_batch_size=1, learning_rate=0.1,
        warmup_steps=2, use_cpu=True, report_to=[], save_strategy="no", disable_tqdm=True,
    )  # fmt: skip
    trainer = Trainer(model=model, args=args, train_dataset=data, callbacks=[Watch(lambda: len(steps) >= 3)])
    trainer.train()
    assert [s for s, _, _ in steps] == [1, 2, 3, 4, 5, 6]
    assert all(lr > 0 for _, lr, _ in steps[:3]) and all(lr == 0 for _, lr, _ in steps[3:])
    assert steps[2][2] != steps[1][2]  # moving until the freeze
    assert steps[2][2] == steps[3][2] == steps[4][2] == steps[5][2]  # frozen from step 4 (AdamW's step scales with lr)
