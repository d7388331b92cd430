"""The judge as the pipeline builds it: from the `judge_models` stage's folder and params.yaml's `judge` section."""

from __future__ import annotations

from pathlib import Path

from sparring.judge.rewards import Judge, TrainedBackend
from sparring.params import Judge as JudgeParams


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
    from sparring.judge.oracle import IntentOracle
    from sparring.judge.realism import RealismDiscriminator

    judge_dir = Path(judge_dir)
    backend_ = TrainedBackend(
        IntentOracle.load(judge_dir / "oracle"), RealismDiscriminator.load(judge_dir / "discriminator")
    )
    return Judge(backend_, cfg.reward, max_turns=max_turns)
