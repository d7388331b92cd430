"""RL-ADA's step 1 (../shared/SEEDS.md): "SFT the DA on demonstrations, then GRPO with the judge's reward", before
any arena. DA0 -> DA1, in the order it runs:

0. Self-training on verified successes (``agent_rl.self_training``, :mod:`sparring.train.self_training`; none when
   its ``rounds`` is 0): DA0 fine-tuned on its own world-verified strict passes on the gym, and with
   ``self_training.corrections`` on the expert's turns at the states its failed episodes reached (DAgger); GRPO
   starts from it.
1. The gym: openings no demonstration played (``scenarios``' gym.jsonl, ``agent_rl.gym: unplayed``), each group
   against an opponent drawn from ``coevolution.agent_mix`` as a cycle-0 agent gym draws it: the simulator as the
   first adversary (and so the pool) or as the cooperative customer
   (:func:`~sparring.train.play.agent_opponents`).
2. Multi-turn GRPO (:func:`~sparring.train.grpo.train_side`) with ``coevolution.agent_grpo``'s recipe for
   ``agent_rl.max_steps`` steps: dynamic sampling at lr 3e-4 held constant, the recipe that lifted held-out play
   (docs/results.md, "The first long arm"). The reward is the agent's r_DA from the world's state: the judge's
   learned parts (faithfulness, realism: the adversary's terms) are held constant and never loaded.
3. Every ``eval_every`` steps (:class:`ValidationCheck`, a transformers ``TrainerCallback``): the agent, greedy as
   deployed, plays the validation scenarios (the validation split's, never the held-out set: only ``evaluate``
   reads that) against the pool and the cooperative simulator; its strict PASS is the curve, and the weights are
   kept. DA1 is the last step (``keep: last``, the default: the held-out gain came at the last steps, while 64
   validation scenarios have an SE of ~0.06), or the kept step with the best mean strict PASS (``keep: best``).
   Step 0 is the agent GRPO starts from; with ``max_steps`` 0 it is DA1.
4. Resumable in either part: each self-training round's agent is kept; the trainer checkpoints at the same steps
   (model, optimizer, scheduler, RNG: Trainer's own), the rollouts' draws follow the optimizer step, and the curve
   and kept weights sit beside the checkpoints, so a run killed at any point and started again ends with the
   weights an uninterrupted run ends with.
"""

from __future__ import annotations

import json
import shutil
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from transformers import TrainerCallback

from sparring.atomic import MANIFEST, replace_dir, write_json
from sparring.judge.rewards import Judge
from sparring.lm.checkpoints import load_checkpoint, save_checkpoint
from sparring.lm.policies import LMPolicy
from sparring.metrics import episode_metrics
from sparring.progress import LOGGER
from sparring.rollout import run_episodes
from sparring.seeds import derive_seed
from sparring.settings import AgentRLSettings, CoevolutionSettings, GRPOSettings
from sparring.train.cycle_state import CycleState
from sparring.train.grpo import GRPOResult, train_side
from sparring.train.play import GameModels, against_pool, agent_opponents, cooperative_customer, turn_limits
from sparring.train.self_training import NO_TEACHER, Teacher, self_train
from sparring.train.world_reward import ConstantStyle
from sparring.world.scenarios import Scenario, as_cooperative

CURVE_FILE = "curve.json"  # the validation curve, in the scratch folder while training and in DA1's folder after
STEPS_DIR = "kept"  # kept/step_<n>: the weights at each validated step
TRAINER_DIR = "trainer"  # the GRPO trainer's checkpoints (checkpoint-<n>), what a resumed run starts from
SELF_TRAINING_DIR = "self_training"  # each self-training round's agent and the rounds' log
SELECT = ("strict_pass_advpool", "strict_pass_coop")  # DA1's validation score: their mean


def agent_rl_grpo(co: CoevolutionSettings, rl: AgentRLSettings) -> GRPOSettings:
    """The agent's recipe (``coevolution.agent_grpo``: its group, turns, learning rate, schedule) for agent_rl's
    steps. One recipe: the episodes agent_rl trains on are shaped as every arena's and evaluation's."""
    return co.agent_grpo.replace(max_steps=rl.max_steps)


def world_judge(co: CoevolutionSettings, reward: Any) -> Judge:
    """The judge as the agent's reward reads it: the world's state alone (the learned parts are the adversary's)."""
    return Judge(ConstantStyle(), reward, max_turns=co.agent_grpo.max_turns)


class ValidationPlay:
    """The agent's greedy play of the validation scenarios against the pool (before any adversary trained: the
    simulator as the first generation) and the cooperative simulator, with one seed for every step."""

    def __init__(self, models: GameModels, simulator_dir: str, scenarios: Sequence[Scenario], seed: int) -> None:
        co = models.settings
        self.models, self.scenarios = models, list(scenarios)
        self.play = {**turn_limits(co), "seed": derive_seed(seed, "validation")}
        self.coop = cooperative_customer(models.customer(simulator_dir, co.coop_temperature), co.coop_opening)
        self.pool = [models.adversary(simulator_dir)]

    def __call__(self, model: Any) -> dict[str, Any]:
        a = self.models.settings.agent_grpo
        agent = LMPolicy(model, self.models.tokenizer, "agent", max_new_tokens=a.max_new_tokens, greedy=True)
        pool = against_pool(self.scenarios, agent, self.pool, **self.play)
        coop = run_episodes(as_cooperative(self.scenarios), agent, self.coop, **self.play)
        row = {**episode_metrics(pool, "_advpool"), **episode_metrics(coop, "_coop")}
        row = {k: float(v) for k, v in row.items() if k.startswith(("strict_pass", "routing_acc"))}
        row["score"] = sum(row[k] for k in SELECT) / len(SELECT)
        return row


class ValidationCheck(TrainerCallback):
    """Every ``every`` optimizer steps, and at the last: the validation play of the live weights, which are kept
    under ``folder/kept/step_<n>``; the curve goes to ``folder/curve.json``. Runs in ``on_step_end``, before the
    trainer's checkpoint of the same step, so a resumed run validates again what a kill cut short."""

    def __init__(
        self, play: Callable[[Any], dict[str, Any]], every: int, last: int, tokenizer: Any, folder: Path,
        log: Callable[[str], None] = LOGGER.info,
    ) -> None:  # fmt: skip
        self.play, self.every, self.last, self.log = play, every, last, log
        self.tokenizer, self.folder = tokenizer, folder
        self.curve: list[dict[str, Any]] = []

    def resume_at(self, step: int) -> None:
        """Keep the curve up to ``step`` (the checkpoint a run resumes from); later points are played again."""
        path = self.folder / CURVE_FILE
        saved = json.loads(path.read_text())["curve"] if path.is_file() else []
        self.curve = [row for row in saved if row["step"] <= step]

    def check(self, step: int, model: Any) -> None:
        t0 = time.perf_counter()
        model.eval()
        try:
            row = {"step": step, **self.play(model)}
        finally:
            model.train()
        seconds = time.perf_counter() - t0  # logged, not kept: DA1's folder holds the same bytes on a rerun
        if step > 0:
            save_checkpoint(model, self.tokenizer, self.folder / STEPS_DIR / f"step_{step}")
        self.curve = [r for r in self.curve if r["step"] != step] + [row]
        write_json({"curve": self.curve}, self.folder / CURVE_FILE)
        self.log(
            f"validation at step {step}: strict PASS pool {row['strict_pass_advpool']:.3f}, "
            f"coop {row['strict_pass_coop']:.3f} ({seconds:.0f} s)"
        )

    def on_step_end(self, args: Any, state: Any, control: Any, model: Any = None, **kwargs: Any) -> None:
        step = state.global_step
        if step % self.every == 0 or step == self.last:
            self.check(step, getattr(model, "module", model))


def chosen_step(curve: Sequence[dict[str, Any]], keep: str) -> int:
    """DA1's step: the trained step with the best validation score (the earliest of equals), or the last; 0 when
    no GRPO step ran (``max_steps`` 0)."""
    trained = [row for row in curve if row["step"] > 0]
    if not trained:
        if any(row["step"] == 0 for row in curve):
            return 0
        raise ValueError("no step was validated")
    if keep == "last":
        return max(row["step"] for row in trained)
    return max(trained, key=lambda row: (row["score"], -row["step"]))["step"]


@dataclass
class AgentRLResult:
    curve: list[dict[str, Any]]  # validation per checked step, the start (step 0) first
    step: int  # DA1's step
    grpo: GRPOResult | None  # None when every step had run before (a finished run reread)
    resumed_from: int = 0  # the trainer checkpoint's step a killed run resumed from (0: a fresh start)
    seconds: float = 0.0
    self_training: list[dict[str, Any]] = field(default_factory=list)  # per round (self_training.SelfTrainingResult)
    da0: dict[str, Any] | None = None  # DA0's validation when self-training moved the start (else: step 0's row)


def last_checkpoint(folder: Path) -> tuple[Path | None, int]:
    """The trainer's last complete checkpoint under ``folder`` and its step, or (None, 0)."""
    from transformers.trainer_utils import get_last_checkpoint

    found = get_last_checkpoint(str(folder)) if folder.is_dir() else None
    return (Path(found), int(Path(found).name.split("-")[-1])) if found else (None, 0)


def train_agent_rl(
    da0_dir: Path,
    simulator_dir: Path,
    gym: Sequence[Scenario],
    validation: Sequence[Scenario],
    co: CoevolutionSettings,
    rl: AgentRLSettings,
    reward: Any,
    out_dir: Path,
    scratch: Path,
    *,
    seed: int = 0,
    report_to: Sequence[str] = (),
    callbacks: Sequence[Any] = (),
    log: Callable[[str], None] = LOGGER.info,
    teacher: Teacher = NO_TEACHER,
    demos: Callable[[int], list[list[dict[str, Any]]]] | None = None,
) -> AgentRLResult:
    """DA0 (``da0_dir``) -> DA1 in ``out_dir`` (DA1's checkpoint with ``curve.json``), training in ``scratch``
    (kept across a kill: a second call resumes there). ``reward``: params' ``judge.reward`` weights. ``log`` gets a
    line per validation (default: the progress lines the pipeline shows in the terminal and Dagster's log).
    ``teacher``: what self-training reads (:class:`~sparring.train.self_training.Teacher`; the validation ids are
    added to those it must never sample); ``demos(n)``: n expert demonstrations for ``self_training.mix_demos``.

    Over 60 lines: the stage's steps in the order the module docstring gives them."""
    if len(validation) < rl.validation_scenarios:
        raise ValueError(f"agent_rl: {len(validation)} validation scenarios, {rl.validation_scenarios} asked")
    t0 = time.perf_counter()
    scratch = Path(scratch)
    state = CycleState(agent_dir=str(da0_dir), simulator_dir=str(simulator_dir))
    st = self_train(
        Path(da0_dir), Path(simulator_dir), gym, co, rl.self_training, scratch / SELF_TRAINING_DIR, seed=seed,
        teacher=replace(teacher, forbidden={*teacher.forbidden, *(s.scenario_id for s in validation)}), demos=demos,
        log=log,
    )  # fmt: skip
    models = GameModels(co)
    model, _ = load_checkpoint(st.agent_dir)
    models.model(simulator_dir)  # the vocabulary every view is built with: DA0's and the simulator's are one
    tokenizer = models.tokenizer
    play = ValidationPlay(models, str(simulator_dir), validation[: rl.validation_scenarios], seed)
    check = ValidationCheck(play, rl.eval_every, rl.max_steps, tokenizer, scratch, log)
    resume, done = last_checkpoint(scratch / TRAINER_DIR)
    check.resume_at(done)
    if not any(row["step"] == 0 for row in check.curve):
        check.check(0, model)  # the start (DA0, or DA0 self-trained) on the same validation play
    da0 = play(load_checkpoint(Path(da0_dir))[0]) if st.rounds else None  # what DA1 is measured against
    result = None
    if done < rl.max_steps and rl.max_steps:
        if resume:
            log(f"resuming from step {done} ({resume})")
        opponent = agent_opponents(state, co.agent_mix, models.customer, co.coop_opening, co.adversary_opening)
        result = train_side(
            model,
            tokenizer,
            "agent",
            opponent,
            list(gym),
            world_judge(co, reward),
            agent_rl_grpo(co, rl),
            scratch / TRAINER_DIR,
            seed=derive_seed(seed, "agent_rl"),
            report_to=report_to,
            callbacks=[check, *callbacks],
            save_every=rl.eval_every,
            resume_from=resume,
        )
    curve = sorted(check.curve, key=lambda row: row["step"])
    step = chosen_step(curve, rl.keep)
    kept = scratch / STEPS_DIR / f"step_{step}" if step else st.agent_dir

    def fill(folder: Path) -> None:  # DA1's checkpoint as kept, with the curve that chose it
        shutil.copytree(kept, folder, dirs_exist_ok=True, ignore=shutil.ignore_patterns(MANIFEST))
        (folder / CURVE_FILE).write_text(json.dumps({"curve": curve, "chosen_step": step}, indent=2) + "\n")

    replace_dir(Path(out_dir), fill)
    return AgentRLResult(
        curve=curve,
        step=step,
        grpo=result,
        resumed_from=done,
        seconds=time.perf_counter() - t0,
        self_training=st.rounds,
        da0=da0,
    )


def clear_scratch(scratch: Path) -> None:
    """Remove a finished run's trainer checkpoints and kept weights (DA1 and its curve are in the output)."""
    shutil.rmtree(scratch, ignore_errors=True)
