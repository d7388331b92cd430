"""Rollouts ahead (#60 item 2): part of the next step's episodes play in a forked process, with the weights this
step started from, while this step plays the rest and updates, so an RL stage alone on the machine keeps two cores
busy. With ``rollout_ahead`` = a of a step's S groups:

    call k (the start of rollout k; weights w_k, what k updates have made):
        ahead_k  <- the worker's a groups of rollout k, played with w_{k-1}   (first call: played here)
        worker   <- w_k copied in; it plays rollout k+1's a groups           (through this play and the update)
        here_k   <- the other S - a groups, played here with w_k (on-policy)
        return ahead_k + here_k                                              (TRL updates on it)

The worker's groups are one update off-policy. The ratio corrects for it when π_old is the sampler's own
log-probabilities (PPO's behaviour policy): ρ = π_θ / π_sampler, clipped at 1 ± ε as usual
(:func:`~sparring.hf_door.behaviour_logprobs_trainer`; without vLLM TRL would take π_old = π_θ, ρ = 1). The split
balances the cores when the worker's a groups take as long as the other S - a groups and the update together
(the agent gym: play ~5.6 s for 4 groups, update ~2.8 s, so a = 3; docs/results.md).

Which scenarios a rollout plays cannot come from TRL's sampler (the next step's prompts are not known when the
worker starts): rollout k plays the pool's k-th step's worth, in an order reshuffled each pass
(:func:`step_scenarios`). A trainer checkpoint keeps the groups played ahead (``rollout_ahead.json`` in it), so a
run resumed there returns the batch an uninterrupted one would and ends with the same weights.

The worker is forked (POSIX): it inherits the gym (pool, opponents, judge) as it is and reads the weights from a
shared-memory copy of the model, which this process writes only while the worker waits for its next call.
"""

from __future__ import annotations

import copy
import json
import multiprocessing
import random
import statistics
import time
import traceback
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from transformers import TrainerCallback

from sparring.atomic import write_text
from sparring.seeds import derive_seed
from sparring.train.trl import first_rollout_call, unwrapped
from sparring.world.scenarios import Scenario

AHEAD_FILE = "rollout_ahead.json"  # in a trainer checkpoint: the groups the worker had played for the next call
PARTS = ("ahead", "here")  # a call's two parts: the worker's groups, then this process's (their draws differ)
COUNTS = ("episodes", "episodes_played", "update_tokens", "trained_tokens", "play_s")  # a call's stats that add up
Batch = tuple[dict[str, list], dict[str, float]]  # TRL's rollout answer and its stats row
BatchFunc = Callable[..., Batch]  # (picked, call, model, part): grpo.make_batch_func's


def step_scenarios(pool_size: int, call: int, per_step: int, seed: int) -> list[int]:
    """The pool indices rollout ``call`` plays: its step's worth of a pass through the pool, each pass in its own
    seeded order (every scenario once per pass, as TRL's sampler draws them)."""
    picked = []
    for j in range(call * per_step, (call + 1) * per_step):
        rounds, at = divmod(j, pool_size)
        order = list(range(pool_size))
        random.Random(derive_seed(seed, "rollout_ahead", rounds)).shuffle(order)
        picked.append(order[at])
    return picked


def joined(first: Batch, second: Batch | None) -> Batch:
    """One call's batch from its two parts, each of whole groups: outputs end to end, counts added, the reward's
    mean and spread over both, the other stats weighted by episodes."""
    if second is None:
        return first
    (out_a, row_a), (out_b, row_b) = first, second
    out = {k: list(out_a[k]) + list(out_b[k]) for k in out_a}
    n_a, n_b = row_a["episodes"], row_b["episodes"]
    row = {k: (v + row_b[k]) if k in COUNTS else (v * n_a + row_b[k] * n_b) / (n_a + n_b) for k, v in row_a.items()
           if k in row_b}  # fmt: skip
    row.update(reward_mean=statistics.fmean(out["side_reward"]), reward_std=statistics.pstdev(out["side_reward"]))
    return out, row


def shared_copy(model: Any) -> Any:
    """A copy of ``model`` whose tensors live in shared memory (``/dev/shm``), or a clear error where it is too
    small for them (containers often give it 64 MB)."""
    try:
        return copy.deepcopy(model).share_memory()
    except (RuntimeError, OSError) as err:
        size = sum(t.numel() * t.element_size() for t in model.state_dict().values()) / 2**20
        raise RuntimeError(
            f"rollout_ahead shares the model's {size:.0f} MB of weights with its worker through shared memory and "
            f"could not ({err}); enlarge /dev/shm or set the gym's rollout_ahead to 0"
        ) from err


def _serve(conn: Any, batch: BatchFunc, model: Any) -> None:
    """The worker: for each (call, picked) received, that call's ahead part played with the shared weights."""
    while True:
        job = conn.recv()
        if job is None:
            return
        try:
            call, picked = job
            conn.send(("ok", batch(picked, call, model, PARTS[0])))
        except BaseException:  # the trainer raises it with this traceback
            conn.send(("error", traceback.format_exc()))


class RolloutAhead:
    """TRL's ``rollout_func`` over ``batch`` (:func:`~sparring.train.grpo.make_batch_func`) whose first ``ahead``
    groups of each call a forked worker plays during the call before (module docstring). ``model`` is the model the
    trainer will train: build this before the trainer (TRL patches its forward). ``record`` gets each call's stats
    row, ``rollout_s`` the time the step spent in it and ``play_s`` both parts' play. A context manager: the worker
    starts on entry and stops on exit."""

    def __init__(
        self, batch: BatchFunc, model: Any, pool: Sequence[Scenario], per_step: int, group: int, ahead: int,
        num_iterations: int, seed: int, record: list[dict[str, float]] | None = None,
    ) -> None:  # fmt: skip
        if not 0 < ahead <= per_step:
            raise ValueError(f"rollout_ahead plays 1..{per_step} groups of a step ahead, not {ahead}")
        self.batch, self.pool, self.per_step, self.group, self.ahead = batch, list(pool), per_step, group, ahead
        self.num_iterations, self.seed, self.record = num_iterations, seed, record
        self.shadow = shared_copy(model)  # the worker's weights, written here between its calls
        self.ready: dict[int, Batch] = {}  # ahead parts played and not yet returned, by call
        self.asked: int | None = None  # the call whose ahead part the worker is playing
        self.calls = -1  # the last call returned (-1: none yet)
        self.worker: Any = None
        self.conn: Any = None

    def __enter__(self) -> RolloutAhead:
        context = multiprocessing.get_context("fork")
        self.conn, theirs = context.Pipe()
        self.worker = context.Process(
            target=_serve, args=(theirs, self.batch, self.shadow), daemon=True, name="sparring-rollout-ahead"
        )
        self.worker.start()
        theirs.close()
        return self

    def __exit__(self, *exc: Any) -> None:
        if self.worker is None:
            return
        try:
            if self.worker.is_alive():
                self.conn.send(None)
        except (BrokenPipeError, OSError):
            pass
        self.worker.join(timeout=30 if self.asked is None else 0)
        if self.worker.is_alive():  # still playing groups nobody will use
            self.worker.terminate()
            self.worker.join()
        self.conn.close()
        self.worker = None

    def picked(self, call: int) -> tuple[list[Scenario], list[Scenario]]:
        """Rollout ``call``'s ahead groups and the rest, each scenario repeated ``group`` times."""
        chosen = [self.pool[i] for i in step_scenarios(len(self.pool), call, self.per_step, self.seed)]
        repeat = [[sc] * self.group for sc in chosen]
        return sum(repeat[: self.ahead], []), sum(repeat[self.ahead :], [])

    def __call__(self, prompts: list[Any], trainer: Any) -> dict[str, list]:
        t0 = time.perf_counter()
        if len(prompts) != self.per_step * self.group:
            raise ValueError(f"rollout_ahead plays {self.per_step} x {self.group} episodes a step, TRL sent "
                             f"{len(prompts)} prompts")  # fmt: skip
        state = getattr(trainer, "state", None)
        call = self.calls + 1 if self.calls >= 0 else first_rollout_call(trainer, self.num_iterations)
        model = unwrapped(trainer)
        if self.asked is not None:  # the worker's part: this call's, or (after a skipped call) one to drop
            played, got = self.asked, self._receive()
            if played == call:
                self.ready[call] = got
        ahead_part = self.ready.pop(call, None)
        self._ask(call + 1, model, state)  # the worker plays on while this process plays and updates
        ahead_groups, here_groups = self.picked(call)
        if ahead_part is None:  # the first call (or a resume without the groups played ahead): played here
            ahead_part = self.batch(ahead_groups, call, model, PARTS[0])
        here_part = self.batch(here_groups, call, model, PARTS[1]) if here_groups else None
        output, row = joined(ahead_part, here_part)
        self.calls = call
        if self.record is not None:
            self.record.append({**row, "rollout_s": time.perf_counter() - t0})
        return output

    def _ask(self, call: int, model: Any, state: Any) -> None:
        """The worker plays ``call``'s ahead part with ``model``'s weights now, unless no step will use it."""
        last = getattr(state, "max_steps", 0)
        if last and call * self.num_iterations >= last:
            return
        missing = self.shadow.load_state_dict(model.state_dict(), strict=False).missing_keys
        if missing:
            raise RuntimeError(f"rollout_ahead: the trained model has no weights for {missing[:3]}")
        self.conn.send((call, self.picked(call)[0]))
        self.asked = call

    def _receive(self) -> Batch:
        try:
            status, payload = self.conn.recv()
        except EOFError:
            raise RuntimeError(f"the rollout_ahead worker exited (code {self.worker.exitcode})") from None
        self.asked = None
        if status != "ok":
            raise RuntimeError(f"the rollout_ahead worker failed:\n{payload}")
        return payload

    def keep_at(self, folder: Path) -> None:
        """Write the ahead part played for the next call into the checkpoint ``folder`` (waiting for it)."""
        if self.asked is not None:
            played = self.asked  # _receive clears it
            self.ready[played] = self._receive()
        if self.ready:
            call = min(self.ready)
            output, row = self.ready[call]
            write_text(json.dumps({"call": call, "output": output, "row": row}), folder / AHEAD_FILE)

    def resume_from(self, checkpoint: Path) -> bool:
        """Take the ahead part a checkpoint kept for its next call; False when it has none (then played here)."""
        path = Path(checkpoint) / AHEAD_FILE
        if not path.is_file():
            return False
        kept = json.loads(path.read_text())
        self.ready[int(kept["call"])] = (kept["output"], kept["row"])
        return True


class KeepAhead(TrainerCallback):
    """Writes the groups played ahead into each trainer checkpoint, once the checkpoint's folder is written."""

    def __init__(self, ahead: RolloutAhead) -> None:
        self.ahead = ahead

    def on_save(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        folder = Path(args.output_dir) / f"checkpoint-{state.global_step}"
        if folder.is_dir():
            self.ahead.keep_at(folder)
