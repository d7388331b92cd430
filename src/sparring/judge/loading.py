"""The trained judge's models on disk: the `judge_models` stage's folder, one subfolder per model. The judge the
pipeline plays with is built from it and params.yaml's `judge` section by :func:`sparring.catalog.load_judge`."""

from __future__ import annotations

from pathlib import Path
from typing import Any

# The judge_models stage's folder: one subfolder per model.
ORACLE, DISCRIMINATOR = "oracle", "discriminator"


def save_judge_models(folder: Path, oracle: Any, discriminator: Any) -> None:
    oracle.save(folder / ORACLE)
    discriminator.save(folder / DISCRIMINATOR)


def load_judge_models(judge_dir: Path) -> tuple[Any, Any]:
    """The intent oracle and realism discriminator ``save_judge_models`` wrote under ``judge_dir``."""
    from sparring.judge.oracle import IntentOracle
    from sparring.judge.realism import RealismDiscriminator

    judge_dir = Path(judge_dir)
    return IntentOracle.load(judge_dir / ORACLE), RealismDiscriminator.load(judge_dir / DISCRIMINATOR)
