"""The pipeline's data catalog: where every stage's inputs and outputs live, relative to the project root, each
path written once here, and the loaders that read them. (Not to be confused with `sparring.world.catalog`, the
bank's products.)

The Stage declarations (assets/, hence dvc.yaml) name their outs from these constants and the assets read their
inputs through `Catalog`, so a folder moves by changing one line. Loaders import their libraries when called:
`sparring stage ingest` starts without torch.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import polars as pl

    from sparring.judge.rewards import Judge
    from sparring.params import Judge as JudgeParams
    from sparring.world.scenarios import Scenario

# Each stage's outputs (the folders DVC caches, the files it tracks).
INGEST = "data/ingest"  # {,dialogues_}{train,validation,test}.parquet (sparring.data.ingest writes them)
SCENARIOS = "data/scenarios"  # train, heldout, gym, validation and arena .jsonl
JUDGE = "models/judge"  # the intent oracle and the realism discriminator (sparring.judge.loading's layout)
TOKENIZER = "models/tokenizer"
SIMULATOR_SFT = "models/simulator_sft"
SIMULATOR_RL = "models/simulator_rl"
AGENT_SFT = "models/agent_sft"  # DA0
AGENT_RL = "models/agent_rl"  # DA1: DA0 after agent_rl's GRPO, with its validation curve
PEER_MEMBERS = "models/peer_members"  # one checkpoint folder per member of another model family
CYCLES = "models/cycles"  # cycle_<k>/: state, metrics, checkpoints (sparring.train.cycles's layout)
PEER_RL = "models/peer_rl"  # one checkpoint folder per member, played by evaluate as `peer_<member>`
# Results a later stage reads, saved by their stage inside its output folder (never read from reports/).
FIDELITY = "fidelity.json"  # in a simulator's folder: {"sft"} (stage 1), {"sft", "rl", "ceiling"} (stage 2)
COHORT = "cohort.json"  # in models/peer_rl: each member's before/after, the cohort's kappa/c/w and reward
SIMULATOR_SFT_FIDELITY = f"{SIMULATOR_SFT}/{FIDELITY}"
SIMULATOR_RL_FIDELITY = f"{SIMULATOR_RL}/{FIDELITY}"
PEER_COHORT = f"{PEER_RL}/{COHORT}"
REPORTS = "reports"  # <stage>.json for every stage, headline/ and plots/ beside them
METRICS = f"{REPORTS}/metrics.json"  # evaluate's document, ../shared/METRICS.md's layout
FIGURES = f"{REPORTS}/figures"
REPORT_MD = f"{REPORTS}/report.md"
REPORT_HTML = f"{REPORTS}/report.html"
SCRATCH = "scratch"  # trainers' working folders and the stages' logs: not tracked
# The scenario sets `scenarios` writes: train (demos, gyms), heldout (every measurement), gym (unplayed openings),
# validation (agent_rl's checkpoint choice) and arena (the cycles' arenas).
SCENARIO_SETS = ("train", "heldout", "gym", "validation", "arena")
# The simulator checkpoint `coevolution.simulator` (sft | rl) names.
SIMULATORS = {"sft": SIMULATOR_SFT, "rl": SIMULATOR_RL}


def cycle_dir(k: int) -> str:
    """Co-evolution cycle k's folder."""
    return f"{CYCLES}/cycle_{k}"


def stage_report(stage: str) -> str:
    """reports/<stage>.json: every stage's metrics and the detail beside them."""
    return f"{REPORTS}/{stage}.json"


def load_judge(judge_dir: Path, cfg: JudgeParams, max_turns: int) -> Judge:
    """The judge as the pipeline builds it, from the judge_models stage's folder and params.yaml's `judge` section.

    ``backend: trained`` reads the intent oracle and realism discriminator under ``judge_dir``; ``backend: llm``
    loads ``cfg.llm_model`` (a local folder, a hub id or the offline SmolLM2 alias) as a rubric judge. Here, above
    the judge, because resolving that alias is the agents' model store's (the judge depends on the world only)."""
    from sparring.judge.rewards import Judge, TrainedBackend

    if cfg.backend == "llm":
        from transformers import AutoModelForCausalLM, AutoTokenizer

        from sparring.judge.llm import LLMJudgeBackend
        from sparring.lm.pretrained import resolve_model_path

        path = resolve_model_path(cfg.llm_model)
        backend = LLMJudgeBackend(AutoModelForCausalLM.from_pretrained(path), AutoTokenizer.from_pretrained(path))
        return Judge(backend, cfg.reward, max_turns=max_turns)
    from sparring.judge.loading import load_judge_models

    return Judge(TrainedBackend(*load_judge_models(judge_dir)), cfg.reward, max_turns=max_turns)


def scenario_file(folder: Path, name: str) -> Path:
    """Scenario set ``name`` (one of SCENARIO_SETS) in a scenarios folder: the one being written, or SCENARIOS."""
    return folder / f"{name}.jsonl"


@dataclass(frozen=True)
class Catalog:
    """The catalog under one project root: its paths and what they hold, loaded."""

    root: Path

    def path(self, relative: str) -> Path:
        return self.root / relative

    def scratch(self, *parts: str) -> Path:
        return self.root.joinpath(SCRATCH, *parts)

    def utterances(self, split: str) -> pl.DataFrame:
        """Ingested utterances of one split (train, validation, test): id, text, intent, tool, style, source."""
        import polars as pl

        return pl.read_parquet(self.root / INGEST / f"{split}.parquet")

    def dialogues(self, split: str) -> pl.DataFrame:
        """Ingested dialogues of one split: id, intent, persona, outcome, turns."""
        import polars as pl

        return pl.read_parquet(self.root / INGEST / f"dialogues_{split}.parquet")

    def scenarios(self, name: str, limit: int | None = None) -> list[Scenario]:
        """Scenario set ``name`` (SCENARIO_SETS), its first ``limit`` if given."""
        from sparring.world.scenarios import load_scenarios

        return load_scenarios(scenario_file(self.root / SCENARIOS, name))[:limit]

    def tokenizer(self) -> Any:
        from transformers import AutoTokenizer

        return AutoTokenizer.from_pretrained(self.root / TOKENIZER)

    def judge_models(self) -> tuple[Any, Any]:
        """The judge_models stage's intent oracle and realism discriminator."""
        from sparring.judge.loading import load_judge_models

        return load_judge_models(self.root / JUDGE)

    def checkpoint(self, relative: str) -> tuple[Any, Any]:
        """The model and tokenizer saved under ``relative`` (AGENT_SFT, SIMULATOR_SFT, a cycle's agent...)."""
        from sparring.lm.checkpoints import load_checkpoint

        return load_checkpoint(self.root / relative)

    def results(self, relative: str, profile: str) -> dict[str, Any] | None:
        """A stage's results file (SIMULATOR_SFT_FIDELITY, SIMULATOR_RL_FIDELITY, PEER_COHORT), None when it is absent
        or was written on another profile (stale)."""
        import json

        path = self.root / relative
        if not path.is_file():
            return None
        results = json.loads(path.read_text())
        return results if results.get("profile") == profile else None
