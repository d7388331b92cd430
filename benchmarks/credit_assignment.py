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

``--dependent`` keeps only the intents whose resolving call quotes the payment's case queue (the disputes and the
transfer cancels, traces and retries): every episode then holds the chain lookup -> payment_details -> act, whose
middle call's result feeds the act's argument (#28, item 4). The ceiling (the scripted expert on the same held-out
episodes) and the mean number of E⁺ edges per episode are printed beside every row.

Usage: ``python benchmarks/credit_assignment.py [--seeds 3] [--steps 20] [--demos 120] [--eval 80] [--dependent]``
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
import polars as pl

from sparring.agents.scripted import CamouflagingCustomer, CooperativeCustomer, ExpertAgent
from sparring.data.synthetic import utterance_frame
from sparring.judge.rewards import Judge
from sparring.lm.chat import known_intents
from sparring.lm.checkpoints import load_checkpoint, save_checkpoint
from sparring.lm.models import build_model
from sparring.lm.policies import LMPolicy
from sparring.lm.tokenizer import train_tokenizer
from sparring.rollout import run_episodes
from sparring.runtime import apply_torch_threads
from sparring.settings import AgentSFTSettings, GRPOSettings, ModelSpec, SFTSettings
from sparring.train.demos import expert_demonstrations, tokenizer_corpus, warm_start
from sparring.train.grpo import train_side
from sparring.train.iapo import influence_graph
from sparring.world.scenarios import as_cooperative, sample_scenarios
from sparring.world.vocab import INTENT_SPECS

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
    if args.dependent:
        keep = sorted(i for i, spec in INTENT_SPECS.items() if spec.quotes_queue)
        train_frame, test_frame = (f.filter(pl.col("intent").is_in(keep)) for f in (train_frame, test_frame))
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


def held_out(agent: Any, tok: Any, heldout: list[Any]) -> dict[str, float]:
    """Strict PASS against each scripted customer (greedy, as evaluate plays), and the mean number of E⁺ edges in
    the agent's influence graphs: how many of its decisions used another's information."""
    customers = {"coop": CooperativeCustomer(), "camo": CamouflagingCustomer(seed=0)}
    out, edges = {}, []
    for key, customer in customers.items():
        scenarios = as_cooperative(heldout) if key == "coop" else heldout
        episodes = run_episodes(scenarios, agent, customer, max_turns=6, seed=7, tokenizer=tok)
        out[key] = float(np.mean([ep.outcome.strict_pass for ep in episodes]))
        edges += [len(influence_graph(ep, "agent", ep.agent_mask).support) for ep in episodes]
    out["edges"] = float(np.mean(edges))
    return out


def lm_agent(model: Any, tok: Any) -> LMPolicy:
    return LMPolicy(model, tok, "agent", max_new_tokens=96, greedy=True)


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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--demos", type=int, default=300, help="expert demos DA0 learns from (the default: 1000)")
    parser.add_argument("--per-intent", type=int, default=30)
    parser.add_argument("--intent-epochs", type=float, default=4)
    parser.add_argument("--demo-epochs", type=float, default=6)
    parser.add_argument("--eval", type=int, default=80)
    parser.add_argument("--dependent", action="store_true", help="only intents with the payment_details chain")
    args = parser.parse_args()
    apply_torch_threads(1)
    t0 = time.perf_counter()
    scratch = Path(tempfile.mkdtemp(prefix="sparring-credit-"))
    tok, da0, train, heldout = start_agent(args, scratch)
    save_checkpoint(da0, tok, scratch / "da0_checkpoint")  # every run starts from these weights, loaded afresh
    ceiling = held_out(ExpertAgent(refs="described"), tok, heldout)
    start = held_out(lm_agent(da0, tok), tok, heldout)
    print(f"ceiling (the scripted expert): strict PASS coop {ceiling['coop']:.3f}, camo {ceiling['camo']:.3f}, "
          f"E+ edges per episode {ceiling['edges']:.2f}")  # fmt: skip
    print(f"DA0 ({args.demos} demos, {time.perf_counter() - t0:.0f} s): strict PASS coop {start['coop']:.3f}, "
          f"camo {start['camo']:.3f}, E+ edges per episode {start['edges']:.2f} on {len(heldout)} held-out",
          flush=True)  # fmt: skip
    rows: dict[str, dict[str, list]] = {
        c: {"strict_pass": [], "coop": [], "camo": [], "edges": [], "curve": []} for c in CREDITS
    }
    for seed in range(args.seeds):
        for credit in CREDITS:
            t = time.perf_counter()
            model, curve = gym(load_checkpoint(scratch / "da0_checkpoint")[0], tok, train, credit, seed, args.steps)
            scores = held_out(lm_agent(model, tok), tok, heldout)
            row = rows[credit]
            for key in ("coop", "camo", "edges"):
                row[key].append(scores[key])
            row["strict_pass"].append((scores["coop"] + scores["camo"]) / 2)
            row["curve"].append(curve)
            took = time.perf_counter() - t
            print(f"seed {seed} {credit:8s} strict PASS coop {scores['coop']:.3f} camo {scores['camo']:.3f}  "
                  f"E+ {scores['edges']:.2f}  gym reward {curve[0]:.3f} -> {curve[-1]:.3f}  ({took:.0f} s)",
                  flush=True)  # fmt: skip
    print(f"\n{'credit':10s}{'strict PASS (mean of coop, camo)':>36s}{'coop':>16s}{'camo':>16s}{'E+ edges':>16s}")
    for name, ref in (("ceiling", ceiling), ("DA0", start)):
        both = (ref["coop"] + ref["camo"]) / 2
        print(f"{name:10s}{both:>36.3f}{ref['coop']:>16.3f}{ref['camo']:>16.3f}{ref['edges']:>16.2f}")
    for credit, row in rows.items():
        keys = ("strict_pass", "coop", "camo", "edges")
        cells = [f"{statistics.mean(row[k]):.3f} ± {statistics.pstdev(row[k]):.3f}" for k in keys]
        print(f"{credit:10s}{cells[0]:>36s}{cells[1]:>16s}{cells[2]:>16s}{cells[3]:>16s}")
    curves = {c: np.mean(np.array(r["curve"]), axis=0).round(3).tolist() for c, r in rows.items()}
    for credit, curve in curves.items():
        print(f"gym reward per step, {credit}: {curve}")
    out: dict[str, Any] = {c: summary(r["strict_pass"]) for c, r in rows.items()}
    out.update(metric="strict_pass", start=start, ceiling=ceiling, curves=curves, n_heldout=len(heldout),
               steps=args.steps, dependent=args.dependent, wall_s=round(time.perf_counter() - t0, 1))  # fmt: skip
    shutil.rmtree(scratch, ignore_errors=True)
    print(json.dumps(out))


if __name__ == "__main__":
    main()
