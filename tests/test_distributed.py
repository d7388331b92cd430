"""Data parallelism through `accelerate launch`: two processes run one SFT step and one GRPO step of sparring's own
trainers (sparring.train.distributed_check) and end with the same weights, changed by each step."""

from __future__ import annotations

import json
import math
import os
import socket
import subprocess
import sys
from pathlib import Path

BIN = Path(sys.executable).parent


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_two_processes_train_one_sft_and_one_grpo_step_in_lockstep(tmp_path: Path) -> None:
    # --multi_gpu on a machine without GPUs is torchrun over gloo on the CPU (accelerate's --cpu runs one process)
    command = [
        str(BIN / "accelerate"), "launch", "--multi_gpu", "--num_processes", "2", "--num_machines", "1",
        "--mixed_precision", "no", "--dynamo_backend", "no", "--main_process_port", str(free_port()),
        "-m", "sparring.train.distributed_check", "--out", str(tmp_path / "ddp"),
    ]  # fmt: skip
    env = {**os.environ, "OMP_NUM_THREADS": "1", "CUDA_VISIBLE_DEVICES": ""}
    result = subprocess.run(command, capture_output=True, text=True, timeout=600, env=env, cwd=tmp_path)
    assert result.returncode == 0, result.stderr[-3000:]
    ranks = [json.loads((tmp_path / "ddp" / f"rank{k}.json").read_text()) for k in (0, 1)]
    assert [r["rank"] for r in ranks] == [0, 1] and {r["world_size"] for r in ranks} == {2}
    first, second = ranks
    assert first["start"] == second["start"]  # the same seeded model on both ranks
    for step in ("after_sft", "after_grpo"):  # all-reduced gradients: the ranks' weights agree after each step
        assert math.isclose(first[step], second[step], rel_tol=0, abs_tol=1e-6), step
    assert first["after_sft"] != first["start"] and first["after_grpo"] != first["after_sft"]
    assert first["sft_loss"] and all(math.isfinite(v) for v in first["sft_loss"] + first["grpo_loss"])
    assert first["grpo_episodes"] > 0 and second["grpo_episodes"] > 0


def test_gpu_check_says_so_and_exits_0_without_a_gpu(tmp_path: Path) -> None:
    env = {**os.environ, "CUDA_VISIBLE_DEVICES": "", "OUT": str(tmp_path / "out")}
    script = Path(__file__).resolve().parents[1] / "benchmarks" / "gpu_check.py"
    result = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=300, env=env)
    assert result.returncode == 0, result.stderr[-2000:]
    assert "no CUDA device" in result.stdout
    assert json.loads(result.stdout.strip().splitlines()[-1]) == {"cuda": False}
    assert json.loads((tmp_path / "out" / "gpu_check.json").read_text()) == {"cuda": False}
