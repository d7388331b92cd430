"""The report's plots, drawn from reports/metrics.json alone (matplotlib, no display): one PNG per question a
user asks at the end of a run. Every figure is always drawn (an empty one says what is missing), so the set of
files DVC tracks as plots is the same in every profile."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")  # files only: no display on a server or in CI
import matplotlib.pyplot as plt  # noqa: E402

FIGURES = ("strict_pass_by_cycle", "w_da", "cross_play", "ceiling", "strategies", "fidelity")
OPPONENTS = {
    "ref": "reference opponent",
    "advpool": "adversary pool",
    "coop": "cooperative simulator",
    "camo": "camouflaging customer",
}
FIDELITY = (
    "outcome_f1", "group_outcome_rate_error", "trajectory_distance", "sim_faithfulness", "discriminator_auc",
    "false_negative_rate",
)  # fmt: skip


def generations(metrics: dict[str, Any]) -> list[str]:
    """The agent generations in order: DA0, DA1, each cycle that ran, the final agent (whatever of them exists)."""
    agents = metrics.get("agents", {})
    cycles = sorted((a for a in agents if a.startswith("cycle_")), key=lambda a: int(a.split("_")[1]))
    return [a for a in ["da0", "da1", *cycles, "final"] if a in agents]


def _empty(ax: Any, what: str) -> None:
    ax.text(0.5, 0.5, what, ha="center", va="center", transform=ax.transAxes, color="grey")
    ax.set_xticks([])
    ax.set_yticks([])


def _strict_pass_by_cycle(ax: Any, metrics: dict[str, Any]) -> None:
    gens, agents = generations(metrics), metrics.get("agents", {})
    if not gens:
        return _empty(ax, "no agents evaluated")
    for key, label in OPPONENTS.items():
        ax.plot(gens, [agents[g].get(f"strict_pass_{key}", float("nan")) for g in gens], marker="o", label=label)
        best = metrics.get("ceiling", {}).get(f"strict_pass_{key}")
        if best is not None:
            ax.axhline(best, linestyle=":", linewidth=1, color=ax.lines[-1].get_color())
    ax.set_ylim(0, 1.02)
    ax.set_ylabel("strict PASS (held-out)")
    ax.set_title("strict PASS per generation (dotted: the expert's ceiling)")
    ax.legend(fontsize=8)


def _w_da(ax: Any, metrics: dict[str, Any]) -> None:
    cycles = metrics.get("cycles", [])
    if not cycles:
        return _empty(ax, "no co-evolution cycle ran")
    xs = [c.get("cycle", i + 1) for i, c in enumerate(cycles)]
    ax.plot(xs, [c.get("w_da", float("nan")) for c in cycles], marker="o")
    for x, c in zip(xs, cycles, strict=True):
        ax.annotate(str(c.get("trained", "")), (x, c.get("w_da", 0)), textcoords="offset points", xytext=(0, 6),
                    ha="center", fontsize=8)  # fmt: skip
    ax.set_xticks(xs)
    ax.set_ylim(0, 1.02)
    ax.set_xlabel("cycle (label: the side that trained)")
    ax.set_ylabel("W_DA (arena)")
    ax.set_title("the agent's win rate in each cycle's arena")


def _cross_play(ax: Any, metrics: dict[str, Any]) -> None:
    cp = metrics.get("cross_play") or {}
    if not cp.get("agents"):
        return _empty(ax, "no cross-play (no agent played the pool)")
    grid = [[float("nan") if v is None else v for v in row] for row in cp["strict_pass"]]
    image = ax.imshow(grid, vmin=0, vmax=1, cmap="viridis", aspect="auto")
    ax.set_xticks(range(len(cp["opponents"])), cp["opponents"], rotation=30, ha="right")
    ax.set_yticks(range(len(cp["agents"])), cp["agents"])
    for i, row in enumerate(grid):
        for j, v in enumerate(row):
            if v == v:  # not NaN
                ax.text(j, i, f"{v:.2f}", ha="center", va="center", color="white" if v < 0.6 else "black", fontsize=8)
    ax.figure.colorbar(image, ax=ax, label="strict PASS")
    ax.set_title("cross-play: agent generation x opponent")


def _ceiling(ax: Any, metrics: dict[str, Any]) -> None:
    gens, agents, ceiling = generations(metrics), metrics.get("agents", {}), metrics.get("ceiling", {})
    if not gens:
        return _empty(ax, "no agents evaluated")
    rows = [*gens, "expert"] if ceiling else gens
    width = 0.8 / len(OPPONENTS)
    for k, (key, label) in enumerate(OPPONENTS.items()):
        values = [(ceiling if g == "expert" else agents[g]).get(f"strict_pass_{key}", 0.0) for g in rows]
        ax.bar([i + k * width for i in range(len(rows))], values, width, label=label)
    ax.set_xticks([i + width for i in range(len(rows))], rows)
    ax.set_ylim(0, 1.02)
    ax.set_ylabel("strict PASS")
    ax.set_title("each agent beside the goal-knowing expert (the ceiling)")
    ax.legend(fontsize=8)


def _strategies(ax: Any, metrics: dict[str, Any]) -> None:
    strategies = metrics.get("strategies") or []
    if not strategies:
        return _empty(ax, "no adversary generation to study yet")
    n = max(len(s.get("share_by_cycle", [])) for s in strategies)
    bottom = [0.0] * n
    for s in strategies:
        shares = list(s.get("share_by_cycle", [])) + [0.0] * (n - len(s.get("share_by_cycle", [])))
        ax.bar([f"gen {g + 1}" for g in range(n)], shares, bottom=bottom, label=s["name"])
        bottom = [b + v for b, v in zip(bottom, shares, strict=True)]
    ax.set_ylim(0, 1.02)
    ax.set_ylabel("share of the adversary's messages")
    ax.set_title("strategies per adversary generation")
    ax.legend(fontsize=7)


def _fidelity(ax: Any, metrics: dict[str, Any]) -> None:
    sims = {k: v for k, v in (metrics.get("simulator") or {}).items() if v}
    if not sims:
        return _empty(ax, "no simulator fidelity measured")
    names = [m for m in FIDELITY if any(m in v for v in sims.values())]
    width = 0.8 / len(sims)
    for k, (stage, values) in enumerate(sims.items()):
        ax.bar([i + k * width for i in range(len(names))], [values.get(m, 0.0) for m in names], width, label=stage)
    ax.set_xticks([i + width * (len(sims) - 1) / 2 for i in range(len(names))], names, rotation=20, ha="right")
    ax.set_title("simulator fidelity (error and distance: lower is better)")
    ax.legend(fontsize=8)


DRAW = {
    "strict_pass_by_cycle": _strict_pass_by_cycle,
    "w_da": _w_da,
    "cross_play": _cross_play,
    "ceiling": _ceiling,
    "strategies": _strategies,
    "fidelity": _fidelity,
}


def draw_figures(metrics: dict[str, Any], folder: Path, names: Sequence[str] = FIGURES) -> dict[str, Path]:
    """Draw each figure of ``names`` from ``metrics`` into ``folder``/<name>.png; returns name -> path."""
    folder.mkdir(parents=True, exist_ok=True)
    paths = {}
    for name in names:
        fig, ax = plt.subplots(figsize=(7, 4), dpi=100)
        DRAW[name](ax, metrics)
        fig.tight_layout()
        paths[name] = folder / f"{name}.png"
        fig.savefig(paths[name])
        plt.close(fig)
    return paths
