"""Rollouts one step ahead (#60 item 2): the next step's episodes play in a forked process, with the weights this
step started from, while this step's update runs here, so an RL stage alone on the machine keeps two cores busy.

    call k (the start of rollout k; weights w_k, what k updates have made):
        batch_k  <- the worker's, played with w_{k-1}     (the first call plays its batch here, beside the worker)
        worker   <- w_k copied in; it plays batch_{k+1}
        return batch_k                                     (TRL updates on it while the worker plays)

A batch is one update off-policy. The ratio corrects for it when π_old is the sampler's own log-probabilities
(PPO's behaviour policy): ρ = π_θ / π_sampler, clipped at 1 ± ε as usual
(:func:`~sparring.hf_door.behaviour_logprobs_trainer`; without vLLM TRL would take π_old = π_θ, ρ = 1).

Which scenarios a rollout plays cannot come from TRL's sampler (the next step's prompts are not known when the
worker starts): rollout k plays the pool's k-th step's worth, in an order reshuffled each pass
(:func:`step_scenarios`). A trainer checkpoint keeps the batch played ahead (``rollout_ahead.json`` in it), so a run
resumed there returns the batch an uninterrupted one would and ends with the same weights.

The worker is forked (POSIX): it inherits the gym (pool, opponents, judge) as it is and reads the weights from a
shared-memory copy of the model, which this process writes only while the worker waits for its next call.
"""

from __future__ import annotations

import copy
import json
import multiprocessing
import random
import time
import traceback
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from transformers import TrainerCallback

from sparring.atomic import write_text
from sparring.seeds import derive_seed
from sparring.train.trl import unwrapped
from sparring.world.scenarios import Scenario

AHEAD_FILE = "rollout_ahead.json"  # in a trainer checkpoint: the batch the worker had played for the next step
Batch = tuple[dict[str, list], dict[str, float]]  # TRL's rollout answer and its stats row
BatchFunc = Callable[[list[Scenario], int, Any], Batch]  # (picked, call, model): grpo.make_batch_func's


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


def _serve(conn: Any, batch: BatchFunc, model: Any, pool: Sequence[Scenario], per_step: int, group: int,
           seed: int) -> None:  # fmt: skip
    """The worker: for each call number received, that rollout's batch played with the shared weights."""
    while True:
        call = conn.recv()
        if call is None:
            return
        try:
            picked = [pool[i] for i in step_scenarios(len(pool), call, per_step, seed) for _ in range(group)]
            conn.send(("ok", batch(picked, call, model)))
        except BaseException:  # the trainer raises it with this traceback
            conn.send(("error", traceback.format_exc()))


class RolloutAhead:
    """TRL's ``rollout_func`` over ``batch`` that plays each rollout's successor in a forked worker while the
    update runs (module docstring). ``model`` is the model the trainer will train: copy it before the trainer is
    built (TRL patches its forward). ``record`` gets each rollout's stats row, ``rollout_s`` the time the step
    waited for its batch and ``play_s`` the batch's own play. Use as a context manager: the worker stops on exit."""

    def __init__(
        self, batch: BatchFunc, model: Any, pool: Sequence[Scenario], per_step: int, group: int, num_iterations: int,
        seed: int, record: list[dict[str, float]] | None = None,
    ) -> None:  # fmt: skip
        self.batch, self.pool, self.per_step, self.group = batch, list(pool), per_step, group
        self.num_iterations, self.seed, self.record = num_iterations, seed, record
        self.shadow = copy.deepcopy(model).share_memory()  # the worker's weights, written here between its calls
        self.ready: dict[int, Batch] = {}  # played batches not yet returned, by call
        self.asked: int | None = None  # the call the worker is playing
        self.calls = -1  # the last call returned (-1: none yet)
        self.worker: Any = None
        self.conn: Any = None

    def __enter__(self) -> RolloutAhead:
        context = multiprocessing.get_context("fork")
        self.conn, theirs = context.Pipe()
        args = (theirs, self.batch, self.shadow, self.pool, self.per_step, self.group, self.seed)
        self.worker = context.Process(target=_serve, args=args, daemon=True, name="sparring-rollout-ahead")
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
        if self.worker.is_alive():  # still playing a batch nobody will use
            self.worker.terminate()
            self.worker.join()
        self.conn.close()
        self.worker = None

    def picked(self, call: int) -> list[Scenario]:
        return [self.pool[i] for i in step_scenarios(len(self.pool), call, self.per_step, self.seed)
                for _ in range(self.group)]  # fmt: skip

    def __call__(self, prompts: list[Any], trainer: Any) -> dict[str, list]:
        t0 = time.perf_counter()
        if len(prompts) != self.per_step * self.group:
            raise ValueError(f"rollout_ahead plays {self.per_step} x {self.group} episodes a step, TRL sent "
                             f"{len(prompts)} prompts")  # fmt: skip
        state = getattr(trainer, "state", None)
        call = self.calls + 1 if self.calls >= 0 else getattr(state, "global_step", 0) // self.num_iterations
        model = unwrapped(trainer)
        if self.asked is not None:  # the worker's batch: this call's, or (after a skipped call) one to drop
            played, got = self.asked, self._receive()
            if played == call:
                self.ready[call] = got
        if call in self.ready:
            found = self.ready.pop(call)
            self._ask(call + 1, model, state)
        else:  # the first call (or a resume without the batch played ahead): play it here, beside the worker
            self._ask(call + 1, model, state)
            found = self.batch(self.picked(call), call, model)
        self.calls = call
        output, row = found
        if self.record is not None:
            self.record.append({**row, "rollout_s": time.perf_counter() - t0})
        return output

    def _ask(self, call: int, model: Any, state: Any) -> None:
        """The worker plays ``call`` with ``model``'s weights now, unless no step will use it."""
        last = getattr(state, "max_steps", 0)
        if last and call * self.num_iterations >= last:
            return
        missing = self.shadow.load_state_dict(model.state_dict(), strict=False).missing_keys
        if missing:
            raise RuntimeError(f"rollout_ahead: the trained model has no weights for {missing[:3]}")
        self.conn.send(call)
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
        """Write the batch played for the next call into the checkpoint ``folder`` (waiting for it if need be)."""
        if self.asked is not None:
            played = self.asked  # _receive clears it
            self.ready[played] = self._receive()
        if self.ready:
            call = min(self.ready)
            output, row = self.ready[call]
            write_text(json.dumps({"call": call, "output": output, "row": row}), folder / AHEAD_FILE)

    def resume_from(self, checkpoint: Path) -> bool:
        """Take the batch a checkpoint kept for its next call; False when it has none (that batch plays here)."""
        path = Path(checkpoint) / AHEAD_FILE
        if not path.is_file():
            return False
        kept = json.loads(path.read_text())
        self.ready[int(kept["call"])] = (kept["output"], kept["row"])
        return True


class KeepAhead(TrainerCallback):
    """Writes the batch played ahead into each trainer checkpoint, once the checkpoint's folder is written."""

    def __init__(self, ahead: RolloutAhead) -> None:
        self.ahead = ahead

    def on_save(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        folder = Path(args.output_dir) / f"checkpoint-{state.global_step}"
        if folder.is_dir():
            self.ahead.keep_at(folder)
