"""Co-evolution cycles as files, for the pipeline: one finished cycle per folder, resumable.

``models/cycles/cycle_k`` holds what :func:`sparring.train.coevolution.run_cycle` writes (state.json,
transcripts.jsonl, metrics.json, the trained ``agent/`` or ``adversary/`` checkpoint) plus ``inputs.json``: a
fingerprint of what the cycle was made from (its params and a content digest of its input folders).

- **Atomic**: a cycle runs into a hidden sibling folder that is renamed into place only when complete, so a
  process killed mid-cycle (kill -9) leaves no ``cycle_k`` at all, only a ``.cycle_k.tmp-<pid>`` that the next
  attempt removes (:func:`~sparring.atomic.replace_dir`).
- **Portable**: paths in state.json are relative to the project root (``models/cycles/cycle_1/adversary``), so a
  cycle folder means the same after a copy, a DVC checkout or a rename of its temporary folder.
- **Resumable**: :func:`is_finished` tells whether a folder was made from exactly these inputs; a rerun skips
  such a cycle and continues from its state, and every draw is seeded from (seed, cycle), so a run resumed at
  cycle k equals an uninterrupted one.
- **Stopped**: once the stop rule fired, later cycles copy the state forward, record why, and train nothing.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sparring.atomic import replace_dir, write_json
from sparring.judge import Scorer
from sparring.settings import CoevolutionSettings
from sparring.train.coevolution import METRICS_FILE, run_cycle
from sparring.train.cycle_state import STATE_FILE, CycleState
from sparring.world.scenarios import Scenario

if TYPE_CHECKING:
    from sparring.train.self_training import Teacher

INPUTS_FILE = "inputs.json"


def folder_digest(path: Path) -> str:
    """sha256 over a file, or over a folder's files (relative names and contents, sorted); hidden names and
    Python's byte-code caches skipped."""
    path = Path(path)
    h = hashlib.sha256()
    files = [path] if path.is_file() else sorted(p for p in path.rglob("*") if p.is_file())
    for f in files:
        rel = f.relative_to(path).as_posix() if f != path else f.name
        if any(part.startswith(".") or part == "__pycache__" for part in Path(rel).parts) or rel.endswith(".pyc"):
            continue
        h.update(rel.encode() + b"\0")
        with f.open("rb") as stream:
            for chunk in iter(lambda: stream.read(1 << 20), b""):
                h.update(chunk)
        h.update(b"\0")
    return h.hexdigest()


def fingerprint(params: Mapping[str, Any], inputs: Mapping[str, Path]) -> dict[str, Any]:
    """What a cycle is made from: its params (any JSON) and a digest of each input path, plus one hash of both."""
    digests = {name: folder_digest(Path(p)) for name, p in sorted(inputs.items())}
    blob = json.dumps({"params": params, "inputs": digests}, sort_keys=True, default=str)
    return {"fingerprint": hashlib.sha256(blob.encode()).hexdigest(), "inputs": digests, "params": params}


def is_finished(folder: Path, print_: Mapping[str, Any]) -> bool:
    """Whether ``folder`` is a complete cycle made from exactly these inputs (``fingerprint``'s result)."""
    folder = Path(folder)
    try:
        stored = json.loads((folder / INPUTS_FILE).read_text())
    except (OSError, ValueError):
        return False
    complete = all((folder / name).is_file() for name in (STATE_FILE, METRICS_FILE))
    return complete and stored.get("fingerprint") == print_["fingerprint"]


def _map_paths(state: CycleState, fn: Callable[[str], str]) -> CycleState:
    return replace(
        state,
        agent_dir=fn(state.agent_dir),
        simulator_dir=fn(state.simulator_dir),
        adversary_dirs=[fn(d) for d in state.adversary_dirs],
    )


def absolute(state: CycleState, root: Path) -> CycleState:
    """The state with its (root-relative) checkpoint paths resolved against ``root``."""
    return _map_paths(state, lambda p: str((Path(root) / p).resolve()))


def portable(state: CycleState, root: Path, written: Path | None = None, final: Path | None = None) -> CycleState:
    """The state with paths relative to ``root``; paths inside ``written`` (a temporary folder) moved to ``final``."""
    root = Path(root).resolve()

    def fix(p: str) -> str:
        path = Path(p).resolve()
        if written is not None and final is not None and path.is_relative_to(Path(written).resolve()):
            path = Path(final).resolve() / path.relative_to(Path(written).resolve())
        return path.relative_to(root).as_posix() if path.is_relative_to(root) else str(path)

    return _map_paths(state, fix)


def load_metrics(folder: Path) -> dict[str, Any]:
    return json.loads((Path(folder) / METRICS_FILE).read_text())


def run_cycle_folder(
    previous: CycleState,
    cycle: int,
    root: Path,
    out_dir: Path,
    train_scenarios: Sequence[Scenario],
    eval_scenarios: Sequence[Scenario],
    judge: Scorer,
    settings: CoevolutionSettings,
    inputs: Mapping[str, Any],
    *,
    seed: int = 0,
    agent_gym: Sequence[Scenario] | None = None,
    arena_scenarios: Sequence[Scenario] | None = None,
    teacher: Teacher | None = None,
    log: Callable[[str], None] = lambda _: None,
) -> tuple[CycleState, dict[str, Any]]:
    """Run cycle ``cycle`` after ``previous`` (root-relative paths) into ``out_dir``, atomically (``agent_gym``,
    ``arena_scenarios``, ``teacher``: :func:`~sparring.train.coevolution.run_cycle`'s).

    If ``previous`` already stopped, the folder records that (its metrics say ``stopped``, the state is copied
    forward) and nothing trains. ``inputs`` (:func:`fingerprint`) is written last, as ``inputs.json``."""
    root, out_dir, done = Path(root).resolve(), Path(out_dir).resolve(), {}
    if not previous.stopped and cycle != previous.cycle + 1:
        raise ValueError(f"cycle {cycle} cannot follow a state after cycle {previous.cycle}")

    def fill(tmp: Path) -> None:
        if previous.stopped:
            state = previous
            metrics: dict[str, Any] = {
                "cycle": cycle,
                "trained": "none",
                "stopped": True,
                "stop_reason": previous.stopped,
                "last_cycle": previous.cycle,
            }
            log(f"co-evolution already stopped after cycle {previous.cycle} ({previous.stopped}): nothing to train")
        else:
            new, metrics = run_cycle(
                absolute(previous, root),
                train_scenarios,
                eval_scenarios,
                judge,
                settings,
                tmp,
                seed=seed,
                agent_gym=agent_gym,
                arena_scenarios=arena_scenarios,
                teacher=teacher,
                log=log,
            )
            state = portable(new, root, tmp, out_dir)
            metrics = {**metrics, "stopped": False}
        state.save(tmp)  # run_cycle wrote temporary paths: rewrite the state with the final ones
        write_json(metrics, tmp / METRICS_FILE)
        write_json(dict(inputs), tmp / INPUTS_FILE)
        done.update(state=state, metrics=metrics)

    replace_dir(out_dir, fill)
    return done["state"], done["metrics"]


EVAL_SUFFIXES = ("_coop", "_adv", "_advpool")  # evaluate_cycle's opponents


def cycle_phases(metrics: Mapping[str, Any]) -> dict[str, dict[str, float]]:
    """Where a cycle's time went, from the figures :func:`~sparring.train.coevolution.run_cycle` measured:
    loading checkpoints, the arena's episodes, the GRPO trainer's set-up, rollouts (episodes) and updates
    (tokens forward/backward) or the agent's self-training rounds (sampling, fine-tuning), the rest of training the
    side (its gym, opponents, checkpoint), the evaluation's episodes. Empty for a cycle that trained nothing because
    co-evolution had stopped."""
    m, out = metrics, {}

    def put(name: str, seconds_key: str, unit: str | None = None, count: float | None = None) -> None:
        if seconds_key in m:
            out[name] = {"seconds": float(m[seconds_key]), **({unit: int(count or 0)} if unit else {})}

    put("load_models", "load_seconds")
    put("arena", "arena_seconds", "episodes", m.get("arena_episodes"))
    put("grpo_setup", "grpo_setup_seconds")
    put("grpo_rollouts", "grpo_rollout_seconds", "episodes", m.get("grpo_rollout_episodes"))
    put("grpo_updates", "grpo_update_seconds", "tokens", m.get("grpo_update_tokens"))
    rounds = sorted((k.removeprefix("self_training_sample_seconds_round") for k in m if k.startswith(
        "self_training_sample_seconds_round")), key=int)  # fmt: skip
    for r in rounds:  # the agent's self-training gym: each round's sampling (with corrections) and fine-tuning
        put(f"self_training_sampling_round{r}", f"self_training_sample_seconds_round{r}", "episodes",
            m.get(f"self_training_episodes_round{r}"))  # fmt: skip
        put(f"self_training_sft_round{r}", f"self_training_sft_seconds_round{r}")
    if "train_side_seconds" in m and "grpo_seconds" in m:
        rest = float(m["train_side_seconds"]) - float(m["grpo_seconds"]) - float(m.get("grpo_setup_seconds", 0.0))
        out["train_side_other"] = {"seconds": max(rest, 0.0)}
    put("eval", "eval_seconds", "episodes", sum(m.get(f"n_episodes{s}", 0) for s in EVAL_SUFFIXES))
    return out
