"""Credit assignment side by side: GRPO's uniform advantage, IAPO's influence graph and MT-GRPO's turn + outcome
advantages, the same budget from the same agent, on the same held-out scenarios.

The starting agent has headroom: a small DA0 warm-started on a fraction of the demonstrations the default uses
(``--demos``), so GRPO has something to learn. Its gym plays scripted customers (the cooperative one and the
camouflaging one, drawn per group), so an episode holds several dependent decisions (verify, look up, act on the
object the customer described, end) and the rewards are the world's (the judge's agent reward; the customer-side
faithfulness and realism terms are fixed, they do not enter the agent's reward). For each seed and each credit
choice the agent trains ``--steps`` GRPO steps; then strict PASS on ``--eval`` held-out scenarios (a second
generator seed's wording) against both scripted customers, greedy as deployed. Learning curves are the gym's
mean reward per step. Side by side from one run; last line JSON.

Usage: ``python benchmarks/credit_assignment.py [--seeds 3] [--steps 20] [--demos 120] [--eval 80]``
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

from sparring.agents.chat import known_intents
from sparring.agents.checkpoints import load_checkpoint, save_checkpoint
from sparring.agents.models import build_model
from sparring.agents.policies import LMPolicy
from sparring.agents.scripted import CamouflagingCustomer, CooperativeCustomer
from sparring.agents.tokenizer import train_tokenizer
from sparring.data.synthetic import utterance_frame
from sparring.evaluate.agent import evaluate_agent
from sparring.judge.rewards import Judge
from sparring.runtime import apply_torch_threads
from sparring.settings import AgentSFTSettings, GRPOSettings, ModelSpec, SFTSettings
from sparring.train.demos import expert_demonstrations, tokenizer_corpus, warm_start
from sparring.train.grpo import train_side
from sparring.world.scenarios import sample_scenarios

CREDITS = ("grpo", "iapo", "mt_grpo")
SPEC = ModelSpec()  # the default agent's architecture


class FixedCustomerTerms:
    """The judge's customer-side models held fixed: the agent's reward is the world's outcome alone."""

    def faithfulness(self, turns: Any, intents: Any) -> np.ndarray:
        return np.full(len(turns), 0.9)

    def realism(self, turns: Any) -> np.ndarray:
        return np.full(len(turns), 0.8)

    def named_outright(self, text: str, intent: str) -> bool:
        return False


def start_agent(args: argparse.Namespace, scratch: Path) -> tuple[Any, Any, list[Any], list[Any]]:
    """Tokenizer, a DA0 with headroom, and the train / held-out scenarios."""
    train_frame, test_frame = utterance_frame(args.per_intent, 0), utterance_frame(4, 1)
    train = sample_scenarios(train_frame, args.demos + 200, seed=0)
    heldout = sample_scenarios(test_frame, args.eval, seed=1)
    demos = expert_demonstrations(train[: args.demos], 0, refs="described")
    tok = train_tokenizer(tokenizer_corpus(train_frame["text"].to_list(), [], demos), 1500, sorted(known_intents()))
    settings = AgentSFTSettings(
        intent=SFTSettings(epochs=args.intent_epochs, batch_size=32, max_length=256, assistant_only_loss=False),
        sft=SFTSettings(epochs=args.demo_epochs, batch_size=4, learning_rate=1e-3, warmup_steps=20),
        intent_rehearsal=200,
    )
    model = build_model(SPEC, tok, seed=0)
    model.config.agent_system_prompt = ""
    texts, intents = train_frame["text"].to_list(), train_frame["intent"].to_list()
    result = warm_start(model, tok, demos, texts, intents, settings, scratch / "da0", seed=0)
    return tok, result.model.eval(), train[args.demos :], heldout


def held_out(model: Any, tok: Any, heldout: list[Any]) -> dict[str, float]:
    agent = LMPolicy(model, tok, "agent", max_new_tokens=96, greedy=True)
    customers = {"coop": CooperativeCustomer(), "camo": CamouflagingCustomer(seed=0)}
    metrics = evaluate_agent(agent, heldout, customers, seed=7)
    return {k: metrics[f"strict_pass_{k}"] for k in customers}


def gym(model: Any, tok: Any, scenarios: list[Any], credit: str, seed: int, steps: int) -> tuple[Any, list[float]]:
    customers = [CooperativeCustomer(), CamouflagingCustomer(seed=seed)]
    settings = GRPOSettings(num_generations=8, scenarios_per_step=2, max_steps=steps, learning_rate=3e-4, credit=credit)
    result = train_side(
        model, tok, "agent", lambda sc, draw: customers[draw % 2], scenarios, Judge(FixedCustomerTerms()), settings,
        seed=seed,
    )  # fmt: skip
    return result.model.eval(), [s["reward_mean"] for s in result.steps]


def summary(values: list[float]) -> dict[str, Any]:
    return {"mean": statistics.mean(values), "std": statistics.pstdev(values), "seeds": values}


# Over 60 lines: a benchmark's measurements side by side, top to bottom, as the printout reads.
def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--demos", type=int, default=300, help="expert demos DA0 learns from (the default: 1000)")
    parser.add_argument("--per-intent", type=int, default=30)
    parser.add_argument("--intent-epochs", type=float, default=4)
    parser.add_argument("--demo-epochs", type=float, default=6)
    parser.add_argument("--eval", type=int, default=80)
    args = parser.parse_args()
    apply_torch_threads(1)
    t0 = time.perf_counter()
    scratch = Path(tempfile.mkdtemp(prefix="sparring-credit-"))
    tok, da0, train, heldout = start_agent(args, scratch)
    save_checkpoint(da0, tok, scratch / "da0_checkpoint")  # every run starts from these weights, loaded afresh
    start = held_out(da0, tok, heldout)
    print(f"DA0 ({args.demos} demos, {time.perf_counter() - t0:.0f} s): strict PASS coop {start['coop']:.3f}, "
          f"camo {start['camo']:.3f} on {len(heldout)} held-out", flush=True)  # fmt: skip
    rows: dict[str, dict[str, list]] = {c: {"strict_pass": [], "coop": [], "camo": [], "curve": []} for c in CREDITS}
    for seed in range(args.seeds):
        for credit in CREDITS:
            t = time.perf_counter()
            model, curve = gym(load_checkpoint(scratch / "da0_checkpoint")[0], tok, train, credit, seed, args.steps)
            scores = held_out(model, tok, heldout)
            row = rows[credit]
            row["coop"].append(scores["coop"])
            row["camo"].append(scores["camo"])
            row["strict_pass"].append((scores["coop"] + scores["camo"]) / 2)
            row["curve"].append(curve)
            took = time.perf_counter() - t
            print(f"seed {seed} {credit:8s} strict PASS coop {scores['coop']:.3f} camo {scores['camo']:.3f}  "
                  f"gym reward {curve[0]:.3f} -> {curve[-1]:.3f}  ({took:.0f} s)", flush=True)  # fmt: skip
    print(f"\n{'credit':10s}{'strict PASS (mean of coop, camo)':>36s}{'coop':>16s}{'camo':>16s}")
    print(f"{'DA0':10s}{(start['coop'] + start['camo']) / 2:>36.3f}{start['coop']:>16.3f}{start['camo']:>16.3f}")
    for credit, row in rows.items():
        cells = [
            f"{statistics.mean(row[k]):.3f} ± {statistics.pstdev(row[k]):.3f}" for k in ("strict_pass", "coop", "camo")
        ]
        print(f"{credit:10s}{cells[0]:>36s}{cells[1]:>16s}{cells[2]:>16s}")
    curves = {c: np.mean(np.array(r["curve"]), axis=0).round(3).tolist() for c, r in rows.items()}
    for credit, curve in curves.items():
        print(f"gym reward per step, {credit}: {curve}")
    out: dict[str, Any] = {c: summary(r["strict_pass"]) for c, r in rows.items()}
    out.update(metric="strict_pass", start=start, curves=curves, n_heldout=len(heldout), steps=args.steps,
               wall_s=round(time.perf_counter() - t0, 1))  # fmt: skip
    shutil.rmtree(scratch, ignore_errors=True)
    print(json.dumps(out))


if __name__ == "__main__":
    main()
