"""params.yaml: the one source of parameters, validated on load.

The sections that configure a trainer (``model``, ``simulator_sft``, ``simulator_rl``, ``agent_sft``,
``coevolution``) are that trainer's own settings type (:mod:`sparring.settings`); the others (ingest, scenarios,
judge, ...) are declared here. Each top-level section holds the `default` profile's values and may carry a
``profiles:`` block of overrides per profile (quick, scale, banking77). Keeping the overrides inside their section
means DVC, which tracks whole sections per stage, reruns a stage exactly when a value it can use changes. Every
profile is validated at load time, so a typo in the `scale` block is caught while running `quick`.
"""

from __future__ import annotations

import copy
import os
from functools import lru_cache
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from sparring.seeds import DRAW_SET
from sparring.settings import (
    AgentRLSettings,
    AgentSFTSettings,
    CoevolutionSettings,
    ModelSpec,
    Opponent,
    PeerRewardSettings,
    SimulatorRLSettings,
    SimulatorSFTSettings,
)

PROFILES = ("quick", "default", "scale", "banking77", "scale_smoke")
PROFILE_ENV = "SPARRING_PROFILE"
# What each profile is for, and how long a whole `sparring run` of it took on a 2-core VM (README, docs/results.md):
# `sparring run --help` says it, and a first run on a profile prints it until its stages have times of their own.
PROFILE_GUIDE = {
    "quick": ("the smoke test: tiny models, checks that every stage runs (its figures are zeros)", "about 70 s"),
    "default": (
        "the main job on the embedded synthetic world; peer_rl adapts its agent to Banking77's real utterances "
        "(../shared/data/banking77, read by path, labels withheld)",
        "about 2 h 20 min (2 h 18 min measured from a fresh clone on 2026-12-07, other work beside its first hour)",
    ),
    "scale": ("a pretrained Hugging Face model with LoRA, for a GPU", "not timed: it needs a GPU"),
    "banking77": (
        "the default on Banking77's real utterances (../shared/data/banking77)",
        "1 h to 1 h 30 min (61.7 and 91.9 min measured from fresh clones; the VMs' speeds ~30% apart)",
    ),
    "scale_smoke": ("the scale path (SmolLM2-135M + LoRA) at quick's budgets, on a CPU", "about 30 min"),
}


class ParamsError(ValueError):
    """A params file that cannot be used; the message names the file and the key's full path."""


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Runtime(_Strict):
    torch_threads: int = Field(1, ge=0, le=256)
    parallel_stages: int = Field(2, ge=1, le=64)  # stages `sparring run` may run at once, one process each


class Tracking(_Strict):
    experiment: str = Field("sparring", min_length=1)


class UtteranceSource(_Strict):
    source: Literal["synthetic", "banking77_csv"] = "synthetic"
    path: str | None = None
    per_intent: int = Field(150, ge=1, le=100_000)
    typo_rate: float = Field(0.05, ge=0.0, le=1.0)
    style_weights: dict[Literal["cooperative", "vague", "multi_part", "camouflaged"], float] = Field(
        default_factory=lambda: {"cooperative": 0.4, "vague": 0.2, "multi_part": 0.2, "camouflaged": 0.2}
    )

    @model_validator(mode="after")
    def _check(self) -> UtteranceSource:
        if self.source != "synthetic" and not self.path:
            raise ValueError(f"source {self.source!r} needs a path")
        if any(w < 0 for w in self.style_weights.values()) or sum(self.style_weights.values()) <= 0:
            raise ValueError("style_weights must be non-negative and not all zero")
        return self


class DialogueSource(_Strict):
    source: Literal["synthetic", "dialogues_jsonl"] = "synthetic"
    path: str | None = None
    count: int = Field(1500, ge=1, le=1_000_000)
    max_turns: int = Field(6, ge=2, le=64)

    @model_validator(mode="after")
    def _check(self) -> DialogueSource:
        if self.source != "synthetic" and not self.path:
            raise ValueError(f"source {self.source!r} needs a path")
        return self


class UnlabeledSource(_Strict):
    """The unlabeled pool peer-reward RL adapts to; labels in it, if any, are never trained on (only measured)."""

    source: Literal["synthetic", "csv"] = "csv"  # synthetic: the generator's held-out phrasing seed
    path: str | None = "../shared/data/banking77/train.csv"  # csv: a `text` CSV, or Banking77-style `text,category`
    count: int = Field(2000, ge=1, le=1_000_000)  # synthetic: utterances generated, before deduplication

    @model_validator(mode="after")
    def _check(self) -> UnlabeledSource:
        if self.source != "synthetic" and not self.path:
            raise ValueError(f"source {self.source!r} needs a path")
        return self


class Split(_Strict):
    validation: float = Field(0.1, ge=0.0, lt=0.5)
    test: float = Field(0.1, gt=0.0, lt=0.5)


class Ingest(_Strict):
    utterances: UtteranceSource = UtteranceSource()
    dialogues: DialogueSource = DialogueSource()
    unlabeled: UnlabeledSource = UnlabeledSource()
    max_text_chars: int = Field(1000, ge=16, le=100_000)
    split: Split = Split()


class Scenarios(_Strict):
    n_train: int = Field(600, ge=1, le=1_000_000)  # from the train split
    n_heldout: int = Field(600, ge=1, le=1_000_000)  # from the test split; metrics are computed on these
    n_customers: int = Field(6, ge=2, le=1000)  # customers per world: the others are what an attacker targets
    n_gym: int = Field(1000, ge=0, le=1_000_000)  # from train-split openings no train scenario has: gym.jsonl
    n_validation: int = Field(96, ge=1, le=1_000_000)  # from the validation split: agent_rl picks DA1 on these
    n_arena: int = Field(48, ge=1, le=1_000_000)  # from the validation split, disjoint: the cycles' arenas
    personas: dict[Literal["cooperative", "vague", "impatient", "camouflaging", "social_engineering"], float] = Field(
        default_factory=lambda: {
            "cooperative": 0.4,
            "vague": 0.15,
            "impatient": 0.15,
            "camouflaging": 0.15,
            "social_engineering": 0.15,
        }
    )

    @model_validator(mode="after")
    def _check(self) -> Scenarios:
        if any(w < 0 for w in self.personas.values()) or sum(self.personas.values()) <= 0:
            raise ValueError("personas weights must be non-negative and not all zero")
        return self


class RewardWeights(_Strict):
    """Weights of the world-feedback rewards (sparring.judge.rewards gives the formulas)."""

    resolution: float = 1.0
    correct_tool: float = 0.5
    lookup_first: float = 0.25
    clean_end: float = 0.25
    format: float = 0.25
    strict_pass: float = 1.0
    turns: float = Field(0.25, ge=0.0)
    security: float = Field(0.5, ge=0.0)
    false_report: float = Field(0.0, ge=0.0)  # a "done" report or a close where the world shows the goal undone
    wrong_act: float = Field(0.0, ge=0.0)  # an accepted act the goal contradicts (reward v2: below every other ending)
    gate_partial_credit: bool = False  # no partial credit (tool, lookup, end, format) in an episode with a wrong act
    name_penalty: float = Field(1.0, ge=0.0)
    faithfulness: float = Field(0.5, ge=0.0)  # the adversary's faithfulness term, won or not
    faithful_min: float = Field(0.5, ge=0, le=1)  # an adversary win needs at least this faithfulness


class Judge(_Strict):
    backend: Literal["trained", "llm"] = "trained"  # llm: a causal LM with a rubric prompt (scale profile)
    llm_model: str = "smollm2-135m-instruct"
    max_train: int = Field(6000, ge=20, le=10_000_000)
    reward: RewardWeights = RewardWeights()


class Tokenizer(_Strict):
    vocab_size: int = Field(4000, ge=300, le=200_000)  # includes the special, intent and tool tokens
    demo_episodes: int = Field(300, ge=0)  # expert episodes rendered into the corpus, so tool JSON tokenizes well


class Evaluate(_Strict):
    eval_scenarios: int = Field(600, ge=1)  # held-out scenarios every agent plays per opponent
    draws: int = Field(2, ge=1, le=DRAW_SET)  # customer draws per scenario against each sampled opponent (K)
    opponents: list[Opponent] = Field(["coop", "camo", "ref", "advpool"], min_length=1)  # whom every agent plays
    expert_draws: int = Field(1, ge=1, le=DRAW_SET)  # of those K, how many the expert (the ceiling) plays
    strategy_clusters: int = Field(6, ge=2, le=50)  # most clusters strategy discovery tries
    workers: int = Field(5, ge=1, le=64)  # processes the agents are dealt to (evaluate runs alone: use the cores)


class Params(_Strict):
    profile: Literal[PROFILES] = "default"  # type: ignore[valid-type]  # the names above, declared once
    seed: int = Field(0, ge=0)
    domain: str = Field("banking", min_length=1)  # a packaged domain (banking, retail) or a domain file's path
    runtime: Runtime = Runtime()
    tracking: Tracking = Tracking()
    ingest: Ingest = Ingest()
    scenarios: Scenarios = Scenarios()
    judge: Judge = Judge()
    tokenizer: Tokenizer = Tokenizer()
    model: ModelSpec = ModelSpec()
    simulator_sft: SimulatorSFTSettings = SimulatorSFTSettings()
    simulator_rl: SimulatorRLSettings = SimulatorRLSettings()
    agent_sft: AgentSFTSettings = AgentSFTSettings()
    agent_rl: AgentRLSettings = AgentRLSettings()
    coevolution: CoevolutionSettings = CoevolutionSettings()
    peer_rl: PeerRewardSettings = PeerRewardSettings()
    evaluate: Evaluate = Evaluate()

    @model_validator(mode="after")
    def _check(self) -> Params:
        if self.agent_rl.validation_scenarios > self.scenarios.n_validation:
            raise ValueError(
                f"agent_rl.validation_scenarios ({self.agent_rl.validation_scenarios}) exceeds the validation set "
                f"(scenarios.n_validation: {self.scenarios.n_validation})"
            )
        if self.coevolution.arena_scenarios > self.scenarios.n_arena:
            raise ValueError(
                f"coevolution.arena_scenarios ({self.coevolution.arena_scenarios}) exceeds the arena set "
                f"(scenarios.n_arena: {self.scenarios.n_arena})"
            )
        return self

    def flat(self) -> dict[str, Any]:
        """Dotted-name view for MLflow: stable names across runs so runs compare column by column."""
        out: dict[str, Any] = {}

        def walk(prefix: str, value: Any) -> None:
            if isinstance(value, dict):
                for k, v in value.items():
                    walk(f"{prefix}.{k}" if prefix else str(k), v)
            else:
                out[prefix] = value

        walk("", self.model_dump())
        return out


def _deep_merge(base: dict, override: dict) -> dict:
    merged = copy.deepcopy(base)
    for key, value in override.items():
        if isinstance(value, dict) and isinstance(merged.get(key), dict):
            merged[key] = _deep_merge(merged[key], value)
        else:
            merged[key] = copy.deepcopy(value)
    return merged


def _resolve(raw: dict, profile: str, source: str) -> dict:
    """The values of one profile: every section's base values with its `profiles.<profile>` block merged in."""
    resolved: dict[str, Any] = {}
    for section, value in raw.items():
        if isinstance(value, dict) and "profiles" in value:
            blocks = value["profiles"]
            if not isinstance(blocks, dict):
                raise ParamsError(f"{source}: {section}.profiles: expected a mapping of profile name to overrides")
            unknown = sorted(set(blocks) - set(PROFILES))
            if unknown:
                raise ParamsError(
                    f"{source}: {section}.profiles.{unknown[0]}: unknown profile (expected one of {list(PROFILES)})"
                )
            base = {k: v for k, v in value.items() if k != "profiles"}
            override = blocks.get(profile) or {}
            if not isinstance(override, dict):
                raise ParamsError(f"{source}: {section}.profiles.{profile}: expected a mapping of overrides")
            resolved[section] = _deep_merge(base, override)
        else:
            resolved[section] = value
    resolved["profile"] = profile
    return resolved


def _sets_leaf(tree: Any, loc: tuple) -> bool:
    """Whether `tree` sets the value at `loc` itself (not merely a mapping above it)."""
    for part in loc:
        if not isinstance(tree, dict) or part not in tree:
            return False
        tree = tree[part]
    return not isinstance(tree, dict)


def _explain(err: ValidationError, raw: dict, profile: str, source: str) -> ParamsError:
    lines = []
    for e in err.errors():
        loc = tuple(str(p) for p in e["loc"])
        # Name the key where it is written: inside the section's profile block if the override set it.
        shown = ".".join(loc)
        if loc and _sets_leaf(raw, (loc[0], "profiles", profile, *loc[1:])):
            shown = ".".join((loc[0], "profiles", profile, *loc[1:]))
        got = f" (got {e['input']!r})" if e["type"] != "missing" and not isinstance(e["input"], dict) else ""
        message = "unknown key" if e["type"] == "extra_forbidden" else e["msg"]
        lines.append(f"{source}: {shown or '<top level>'}: {message}{got}")
    return ParamsError("\n".join(lines))


def _repeated_key(node: yaml.Node, path: str = "") -> str | None:
    """The first key written twice in one mapping, anywhere under ``node``, as its full path and lines."""
    if isinstance(node, yaml.MappingNode):
        seen: dict[Any, int] = {}
        for key, value in node.value:
            name = key.value if isinstance(key, yaml.ScalarNode) else None
            where = f"{path}.{name}" if path else str(name)
            if name is not None and name in seen:
                return f"{where}: written twice (lines {seen[name]} and {key.start_mark.line + 1}); keep one"
            if name is not None:
                seen[name] = key.start_mark.line + 1
            found = _repeated_key(value, where)
            if found:
                return found
    elif isinstance(node, yaml.SequenceNode):
        for i, item in enumerate(node.value):
            found = _repeated_key(item, f"{path}[{i}]")
            if found:
                return found
    return None


def _load_unique(text: str, source: str) -> Any:
    """``yaml.safe_load``, refusing a key written twice in one mapping (YAML keeps the last silently)."""
    loader = yaml.SafeLoader(text)
    try:
        node = loader.get_single_node()
        if node is None:
            return None
        repeated = _repeated_key(node)
        if repeated:
            raise ParamsError(f"{source}: {repeated}")
        return loader.construct_document(node)
    finally:
        loader.dispose()


def load_params(path: str | Path = "params.yaml", profile: str | None = None) -> Params:
    """Load, validate and resolve params for `profile` (default: $SPARRING_PROFILE, else the file's `profile`)."""
    path = Path(path)
    source = str(path)
    if not path.is_file():
        raise ParamsError(f"{source}: no such params file")
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise ParamsError(f"{source}: not valid YAML: {exc}") from exc
    return _validated(text, source, profile, os.environ.get(PROFILE_ENV) or None)


@lru_cache(maxsize=16)
def _validated(text: str, source: str, profile: str | None, env_profile: str | None) -> Params:
    """The Params of one file's text (frozen, so shared): every stage of an in-process run loads them, and
    validating every profile costs ~0.1 s a time."""
    try:
        raw = _load_unique(text, source) or {}
    except yaml.YAMLError as exc:
        raise ParamsError(f"{source}: not valid YAML: {exc}") from exc
    if not isinstance(raw, dict):
        raise ParamsError(f"{source}: expected a mapping at the top level")

    chosen = profile or env_profile or raw.get("profile", "default")
    if chosen not in PROFILES:
        where = "--profile" if profile else (PROFILE_ENV if env_profile else "profile")
        raise ParamsError(f"{source}: {where}: unknown profile {chosen!r} (expected one of {list(PROFILES)})")

    result = None
    for name in PROFILES:  # validate every profile, return the chosen one
        resolved = _resolve(raw, name, source)
        try:
            params = Params.model_validate(resolved)
        except ValidationError as err:
            raise _explain(err, raw, name, source) from None
        if name == chosen:
            result = params
    assert result is not None
    return result


def some_profile_plays_rl_simulator(path: str | Path) -> bool:
    """Whether any profile in ``path`` plays the RL simulator (``coevolution.simulator: rl``): then agent_rl and
    cycle_1 wait for simulator_rl, in one graph whatever the active profile."""
    return any(load_params(path, name).coevolution.simulator == "rl" for name in PROFILES)


def run_params(run: Path, profile: str | None = None) -> Params:
    """A finished run's params: its params.yaml under the profile it ran (its reports/metrics.json's) unless
    ``profile`` is given, with its domain bound for this process (before anything imports sparring.world)."""
    import json

    from sparring.runtime import bind_domain

    metrics = run / "reports" / "metrics.json"
    if profile is None and metrics.is_file():
        profile = json.loads(metrics.read_text(encoding="utf-8")).get("profile")
    params = load_params(run / "params.yaml", profile)
    bind_domain(params.domain, run)
    return params
