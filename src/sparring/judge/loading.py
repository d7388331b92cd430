"""The judge as the pipeline builds it: from the `judge_models` stage's folder and params.yaml's `judge` section."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from sparring.judge.rewards import Judge, TrainedBackend
from sparring.params import Judge as JudgeParams

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


def load_judge(judge_dir: Path, cfg: JudgeParams, max_turns: int) -> Judge:
    """``backend: trained`` reads the intent oracle and realism discriminator under ``judge_dir``; ``backend: llm``
    loads ``cfg.llm_model`` (a local folder, a hub id or the offline SmolLM2 alias) as a rubric judge."""
    if cfg.backend == "llm":
        from transformers import AutoModelForCausalLM, AutoTokenizer

        from sparring.agents.pretrained import resolve_model_path
        from sparring.judge.llm import LLMJudgeBackend

        path = resolve_model_path(cfg.llm_model)
        backend = LLMJudgeBackend(AutoModelForCausalLM.from_pretrained(path), AutoTokenizer.from_pretrained(path))
        return Judge(backend, cfg.reward, max_turns=max_turns)
    return Judge(TrainedBackend(*load_judge_models(judge_dir)), cfg.reward, max_turns=max_turns)
