"""TRACER stage 1 measured per persona (issue 58): each run's SFT simulator as the simulator_sft stage measures it.

Issue 58's acceptance for the default SFT simulator: ending shares within 0.10 of the real ones for every persona,
outcome F1 >= 0.35 (against the ceiling of persona rates played against the escalating expert, and the
always-resolved bound), faithfulness and discriminator AUC within their 95% intervals of the simulator before it.
This replays each run's ``models/simulator_sft`` on that run's held-out sets as the stage does (the run's seed,
``simulator_sft.eval_scenarios`` sessions), greedy as the simulator_sft stage decodes and sampled as simulator_rl
measures the SFT simulator (``simulator.sft``), so runs trained at different commits are measured by the same code,
and adds what the stage's figures lack: each persona's shares, the intervals (Wilson for faithfulness, a bootstrap
of the discriminator's scores for AUC), the ceiling and one record per replayed session (no texts).

Usage: ``python benchmarks/simulator_sft_endings.py --run before=DIR --run after=DIR [--out FILE.json]``. Prints a
table per run and one JSON object; ``--out`` writes it (per-session records included) to a file.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks.run_folders import parse_runs
from sparring.data.synthetic import OUTCOMES

RESAMPLES = 1000  # bootstrap resamples of the AUC interval
MARGIN = 0.10  # issue 58: each persona's ending shares within this of the real ones
DECODINGS = ("greedy", "sampled")


class RecordingDiscriminator:
    """The realism discriminator, keeping the texts its AUC was computed on (for the bootstrap)."""

    def __init__(self, discriminator: Any) -> None:
        self.discriminator, self.real, self.simulated = discriminator, [], []

    def auc(self, real: Sequence[str], simulated: Sequence[str]) -> float:
        self.real, self.simulated = list(real), list(simulated)
        return self.discriminator.auc(real, simulated)

    def prob_real(self, texts: Sequence[str]) -> Any:
        return self.discriminator.prob_real(texts)


def auc_interval(recorder: RecordingDiscriminator, seed: int = 0) -> list[float]:
    """The 95% percentile interval of the AUC, real and simulated texts resampled separately."""
    from sklearn.metrics import roc_auc_score

    real = np.asarray(recorder.prob_real(recorder.real), dtype=float)
    fake = np.asarray(recorder.prob_real(recorder.simulated), dtype=float)
    rng, labels = np.random.default_rng(seed), np.r_[np.ones(len(real)), np.zeros(len(fake))]
    aucs = [
        roc_auc_score(labels, np.r_[rng.choice(real, len(real)), rng.choice(fake, len(fake))]) for _ in range(RESAMPLES)
    ]
    return [float(q) for q in np.quantile(aucs, [0.025, 0.975])]


def measure(root: Path) -> dict[str, Any]:
    """One run's SFT simulator measured greedy, as the simulator_sft stage does, and sampled at
    ``simulator_rl.eval_temperature``, as simulator_rl measures it (``simulator.sft`` of metrics.json): greedy
    decoding gives each context one ending, so only the sampled figures can show a persona's ending rates."""
    from sparring.catalog import SIMULATOR_SFT, Catalog
    from sparring.evaluate.ending_ceiling import ending_ceiling, simulator_ceiling
    from sparring.params import load_params

    p = load_params(root / "params.yaml")
    data = Catalog(root)
    model, tokenizer = data.checkpoint(SIMULATOR_SFT)
    oracle, discriminator = data.judge_models()
    train, test = data.dialogues("train"), data.dialogues("test").head(p.simulator_sft.eval_scenarios)
    return {
        "seed": p.seed,
        "greedy": decoded(data, p, model, tokenizer, oracle, discriminator, 0.0),
        "sampled": decoded(data, p, model, tokenizer, oracle, discriminator, p.simulator_rl.eval_temperature),
        "ceiling": simulator_ceiling(train, test, seed=p.seed),
        "always_resolved": ending_ceiling(train, test, draws=1)["always_resolved"],
        "sampler_gaps": sampler_gaps(train, test),
    }


def decoded(data: Any, p: Any, model: Any, tokenizer: Any, oracle: Any, discriminator: Any, t: float) -> dict:
    """The fidelity of one decoding (``t`` 0: greedy), its intervals and its per-session records."""
    from sparring.evaluate.crossplay import wilson_interval
    from sparring.evaluate.fidelity import simulator_fidelity
    from sparring.lm.policies import LMPolicy

    cfg = p.simulator_sft
    policy = LMPolicy(
        model, tokenizer, role="customer", max_new_tokens=cfg.max_new_tokens, temperature=t or 1.0, greedy=t == 0
    )
    recorder, sessions = RecordingDiscriminator(discriminator), []
    metrics = simulator_fidelity(
        policy, data.scenarios("heldout", cfg.eval_scenarios), data.dialogues("test"), oracle, recorder,
        seed=p.seed, max_dialogues=cfg.eval_scenarios, sessions=sessions,
    )  # fmt: skip
    n = int(metrics["n_sim_episodes"])
    return {
        "temperature": t,
        "metrics": metrics,
        "faithfulness_interval": list(wilson_interval(round(metrics["sim_faithfulness"] * n), n)),
        "auc_interval": auc_interval(recorder, p.seed),
        "sessions": sessions,
    }


def largest_gaps(shares: dict[str, float]) -> dict[str, float]:
    """Per persona, the largest |simulated - real| ending share of :func:`ending_shares_by_persona`'s figures."""
    split = (key.removeprefix("real_rate_").partition("_") for key in shares if key.startswith("real_rate_"))
    personas = {persona for _, _, persona in split if persona}  # real_rate_<ending> alone is the overall share
    return {
        persona: max(abs(shares[f"sim_rate_{o}_{persona}"] - shares[f"real_rate_{o}_{persona}"]) for o in OUTCOMES)
        for persona in sorted(personas)
    }


def persona_gaps(d: dict[str, Any]) -> dict[str, float]:
    """Per persona of one decoding's replayed sessions, the largest |simulated - real| ending share."""
    return largest_gaps(d["metrics"])


def sampler_gaps(train: Any, test: Any, draws: int = 500) -> dict[str, float]:
    """Per persona, the mean over draws of the persona-rate sampler's largest |drawn - real| ending share: what the
    0.10 margin costs a simulator that ends exactly at the training rates, on cohorts of 15-35 sessions."""
    from sparring.evaluate.ending_ceiling import persona_draws
    from sparring.evaluate.fidelity import ending_shares_by_persona

    real, personas = test["outcome"].to_list(), test["persona"].to_list()
    gaps = [largest_gaps(ending_shares_by_persona(real, d, personas)) for d in persona_draws(train, test, draws)]
    return {persona: float(np.mean([g[persona] for g in gaps])) for persona in sorted(set(personas))}


def print_run(label: str, r: dict[str, Any], decoding: str) -> None:
    d = r[decoding]
    m = d["metrics"]
    print(f"\n{label}, {decoding} (seed {r['seed']}, n = {m['n_replayed']} sessions, {m['n_sim_episodes']} scenarios)")
    print(f"{'persona':20s} {'n':>4s}  real r/e/a            simulated r/e/a       max gap  sampler's")
    gaps = persona_gaps(d)
    for persona, gap in gaps.items():
        count = sum(s["persona"] == persona for s in d["sessions"])
        real = " / ".join(f"{m[f'real_rate_{o}_{persona}']:.2f}" for o in OUTCOMES)
        sim = " / ".join(f"{m[f'sim_rate_{o}_{persona}']:.2f}" for o in OUTCOMES)
        print(f"{persona:20s} {count:4d}  {real:20s}  {sim:20s}  {gap:.2f}     {r['sampler_gaps'][persona]:.2f}")
    f, a = d["faithfulness_interval"], d["auc_interval"]
    print(
        f"outcome F1 {m['outcome_f1']:.3f} (ceiling {r['ceiling']['outcome_f1']:.3f}, always resolved "
        f"{r['always_resolved']['outcome_f1']:.3f}), group error {m['group_outcome_rate_error']:.3f}, trajectory "
        f"{m['trajectory_distance']:.3f}, faithfulness {m['sim_faithfulness']:.3f} [{f[0]:.3f}, {f[1]:.3f}], AUC "
        f"{m['discriminator_auc']:.3f} [{a[0]:.3f}, {a[1]:.3f}], perplexity {m.get('heldout_perplexity', 0):.2f}, "
        f"identity given {m['identity_given_rate']:.3f}, left {m['left_rate']:.3f}, shares r/e/a "
        + " / ".join(f"{m[f'sim_rate_{o}']:.3f}" for o in OUTCOMES)
    )
    print(f"  every persona within {MARGIN}: {all(g <= MARGIN for g in gaps.values())}")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--run", action="append", default=[], help="LABEL=DIR: a project folder with simulator_sft")
    parser.add_argument("--out", type=Path, help="write the JSON (per-session records included) here")
    args = parser.parse_args(argv)
    if not args.run:
        parser.error("give --run LABEL=DIR at least once")
    results = {label: measure(root) for label, root in parse_runs(parser, args.run).items()}
    for label, r in results.items():
        for decoding in DECODINGS:
            print_run(label, r, decoding)
    if args.out:
        args.out.write_text(json.dumps(results, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    brief = {
        label: {
            k: ({kk: vv for kk, vv in v.items() if kk != "sessions"} if k in DECODINGS else v) for k, v in r.items()
        }
        for label, r in results.items()
    }
    print(json.dumps(brief))
    return 0


if __name__ == "__main__":
    sys.exit(main())
