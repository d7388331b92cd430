"""The end-of-run report: reports/report.md and a self-contained reports/report.html (the PNGs inlined), built
from reports/metrics.json alone, so every number in it is one the metrics file holds (rounded to 3 places).

The report answers, in order: did the agent get better and against whom (summary table, strict PASS per
generation, each agent's share of the expert's ceiling), how the co-evolution went (W_DA and the side that
trained per cycle), who beats whom (cross-play with 95% intervals), why agents fail (failure kinds), what tricks
the adversaries found (strategies), how realistic the simulated customers are (fidelity), what peer-reward RL
changed, and where the time went. A part whose stage has not run is left out.
"""

from __future__ import annotations

import base64
import html
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sparring.evaluate.crossplay import FAILURE_KINDS
from sparring.evaluate.figures import FIDELITY, OPPONENTS, draw_figures, generations
from sparring.train.cycle_state import dips_and_recovers

# (header, metric key) of the summary table, which `sparring run` prints at the end too: strict PASS against the
# reference opponent, the cooperative simulator, the camouflaging customer and the adversary pool; routing against
# coop; the pool's win rate; strict PASS against the pool as a share of the expert's; pass^k (largest k: all k
# customer draws of a scenario pass) against the pool.
SUMMARY_COLUMNS = (
    ("PASS ref", "strict_pass_ref"),
    ("PASS coop", "strict_pass_coop"),
    ("PASS camo", "strict_pass_camo"),
    ("PASS pool", "strict_pass_advpool"),
    ("routing coop", "routing_acc_coop"),
    ("adv wins", "adv_success_advpool"),
    ("of ceiling", "share_of_ceiling_advpool"),
    ("pass^k pool", "pass_hat_k_advpool"),
)


QUICK_NOTE = (
    "Profile quick: its models are too small to learn anything, so zeros are expected; it checks that the "
    "pipeline runs end to end (`--profile default` for real figures)."
)


@dataclass
class Block:
    """One piece of the report: a heading, a paragraph, a table or a figure; rendered as markdown or HTML."""

    kind: str  # heading | text | table | figure
    text: str = ""
    rows: Sequence[Sequence[str]] = ()  # a table's rows, the first one its header
    path: Path | None = None  # a figure's PNG


def fmt(value: Any) -> str:
    """A number as the report prints it (3 places); anything else as text; None as a dash."""
    if value is None:
        return "–"
    if isinstance(value, bool) or not isinstance(value, int | float):
        return str(value)
    return f"{value:.3f}" if isinstance(value, float) else str(value)


def pass_hat_key(row: dict[str, Any], suffix: str) -> str | None:
    """The largest-k ``pass_hat_<k><suffix>`` a metrics row holds, or None."""
    ks = [int(k.split("_")[2]) for k in row if k.startswith("pass_hat_") and k.endswith(suffix)]
    return f"pass_hat_{max(ks)}{suffix}" if ks else None


def summary_rows(metrics: dict[str, Any]) -> list[list[str]]:
    """The summary table (header first): the expert's row, then every agent in generation order."""
    agents = metrics.get("agents", {})
    order = generations(metrics) + (["peer_final"] if "peer_final" in agents else [])  # the agent peer_rl adapted
    rows = [["agent", *(header for header, _ in SUMMARY_COLUMNS)]]
    named = [("expert (ceiling)", metrics["ceiling"])] if metrics.get("ceiling") else []
    for name, row in [*named, *((a, agents[a]) for a in order)]:
        cells = [name]
        for _, key in SUMMARY_COLUMNS:
            if key == "pass_hat_k_advpool":
                key = pass_hat_key(row, "_advpool") or key
            cells.append(fmt(row.get(key)))
        rows.append(cells)
    return rows


def _improvement(metrics: dict[str, Any]) -> str:
    agents = metrics.get("agents", {})
    if "final" not in agents or "da0" not in agents:
        return "No final agent to compare with DA0."
    parts = []
    for key, label in OPPONENTS.items():
        d, f = agents["da0"].get(f"strict_pass_{key}"), agents["final"].get(f"strict_pass_{key}")
        if d is not None and f is not None:
            parts.append(f"{label} {fmt(d)} → {fmt(f)} ({f - d:+.3f})")
    return "Strict PASS from DA0 to the final agent: " + "; ".join(parts) + "."


GAIN_LABELS = {
    "da1-da0": "DA1 − DA0 (agent_rl)",
    "final-da1": "final − DA1 (the cycles)",
    "final-da0": "final − DA0",
    "peer_final-final": "peer_final − final (peer_rl, label-free)",
}


def rl_verdict(metrics: dict[str, Any]) -> str:
    """One line: did RL help, and by how much (final − DA0 against the reference opponent, which no compared agent
    trained against, else the pool; its paired 95% interval over scenarios and draws)."""
    gains = metrics.get("gains", {}).get("final-da0", {})
    opponent = "ref" if gains.get("ref") else "advpool"
    if not gains.get(opponent):
        return "RL's gain: not measured (no DA0 and final agent played on the same episodes)."
    mean, low, high = gains[opponent]
    verdict = "RL helped" if low > 0 else "RL hurt" if high < 0 else "RL's gain is not distinguishable from 0"
    return (f"{verdict}: final − DA0 strict PASS against the {OPPONENTS[opponent]} {mean:+.3f} "
            f"[95% paired interval {low:+.3f}, {high:+.3f}].")  # fmt: skip


def gain_rows(metrics: dict[str, Any]) -> list[list[str]]:
    """The paired gains table (header first): each pair's mean [low, high] against each opponent."""
    gains = metrics.get("gains", {})
    rows = [["", *(OPPONENTS[o] for o in OPPONENTS)]]
    for pair, label in GAIN_LABELS.items():
        if pair in gains:
            cells = [f"{g[0]:+.3f} [{g[1]:+.3f}, {g[2]:+.3f}]" if (g := gains[pair].get(o)) else "–" for o in OPPONENTS]
            rows.append([label, *cells])
    return rows


def _cross_play_rows(cp: dict[str, Any]) -> list[list[str]]:
    rows = [["agent \\ opponent", *cp["opponents"]]]
    for i, agent in enumerate(cp["agents"]):
        cells = [agent]
        for j in range(len(cp["opponents"])):
            v = cp["strict_pass"][i][j]
            lo, hi = cp["ci_low"][i][j], cp["ci_high"][i][j]
            cells.append("–" if v is None else f"{fmt(v)} [{fmt(lo)}, {fmt(hi)}]")
        rows.append(cells)
    return rows


def _failure_rows(metrics: dict[str, Any]) -> list[list[str]]:
    agents = {**({"expert": metrics["ceiling"]} if metrics.get("ceiling") else {}), **metrics.get("agents", {})}
    rows = [["agent", "opponent", *FAILURE_KINDS]]
    for name in ["expert", *generations(metrics)]:
        row = agents.get(name)
        if row is None:
            continue
        for key in OPPONENTS:
            if f"failure_misroute_{key}" in row:
                rows.append([name, key, *(fmt(row.get(f"failure_{kind}_{key}")) for kind in FAILURE_KINDS)])
    return rows


def _coevolution_blocks(cycles: Sequence[dict[str, Any]], figures: Mapping[str, Any]) -> list[Block]:
    columns = ("cycle", "trained", "w_da", "arena_adv_success", "arena_adv_faithfulness")
    return [
        Block("heading", "Co-evolution"),
        Block("table", rows=[["cycle", "trained", "W_DA", "adv wins", "adv faithfulness"]]
              + [[fmt(c.get(k)) for k in columns] for c in cycles]),
        Block("text", _dip_line(cycles)),
        Block("figure", "W_DA per cycle", path=figures.get("w_da")),
    ]  # fmt: skip


def _dip_line(cycles: Sequence[dict[str, Any]]) -> str:
    """Each arena's W_DA is played before its cycle's side trains; RL-ADA's signature read from them."""
    w, trained = [c.get("w_da") for c in cycles], [c.get("trained") for c in cycles]
    if len(cycles) < 3 or any(x is None for x in w):
        return "W_DA and the adversary's wins are each cycle's arena, played before its side trained."
    seen = "shows" if dips_and_recovers(trained, w) else "does not show"
    return (
        "W_DA and the adversary's wins are each cycle's arena, played before its side trained. The trajectory "
        f"{seen} RL-ADA's signature: an adversary gym lowering W_DA and the agent gym after it recovering it."
    )


def _strategy_blocks(strategies: Sequence[dict[str, Any]]) -> list[Block]:
    if not strategies:
        return [Block("text", "No adversary generation has trained yet: nothing to study.")]
    rows = [["strategy", "share per generation", "success rate", "mean words", "names the intent", "concrete detail"]]
    for s in strategies:
        traits = s.get("traits", {})
        rows.append([
            s["name"],
            " / ".join(fmt(v) for v in s.get("share_by_cycle", [])),
            fmt(s.get("success_rate")),
            fmt(traits.get("mean_words")),
            fmt(traits.get("keyword_rate")),
            fmt(traits.get("detail_rate")),
        ])  # fmt: skip
    blocks = [Block("table", rows=rows)]
    for s in strategies:
        examples = "\n".join(f"> {e}" for e in s.get("examples", [])[:3])
        ngrams = ", ".join(s.get("ngrams", [])[:5])
        blocks.append(Block("text", f"**{s['name']}**: {ngrams}\n\n{examples}"))
    return blocks


def _peer_blocks(peer: dict[str, Any]) -> list[Block]:
    """Peer-reward RL's section: each member's routing before and after, how it was labelled, the cohort's diversity."""
    rows = [["member", "is", "routing before", "after", "gain 95% CI", "collapsed"]]
    for name, m in peer["members"].items():
        ci = m.get("gain_ci")
        ci_text = f"[{ci[0]:+.3f}, {ci[1]:+.3f}]" if ci else "-"
        role = "the agent (played as peer_final)" if name == "final" else "a router"
        rows.append([name, role, fmt(m.get("before")), fmt(m.get("after")), ci_text, fmt(m.get("collapsed"))])
    reward, estimate, teacher = peer.get("reward", "-"), peer.get("estimate", "sampled"), peer.get("teacher")
    measured = f"Intent accuracy on {peer.get('n_measure', '?')} labelled utterances never trained on"
    measured += " (held out of the unlabeled pool)." if peer.get("measure_from") == "pool" else " (the test split)."
    if reward == "cohort":
        learners = ", ".join(peer.get("learners") or ["every member"])
        how = f"{measured} Labels: the members' joint vote, its {peer.get('keep', 1.0):.0%} most confident share, "
        how += f"learned by {learners} ({peer.get('loss', '-')})."
    else:
        how = f"{measured} Reward {reward} ({estimate}), teacher {teacher or '-'}."
    diversity = f"κ {fmt(peer.get('kappa'))}, c {fmt(peer.get('c'))}, w {fmt(peer.get('w'))}"
    return [
        Block("heading", "Peer-reward RL"),
        Block("table", rows=rows),
        Block("text", f"{how} Cohort diversity before training: {diversity}."),
    ]


def report_blocks(
    metrics: dict[str, Any], figures: dict[str, Path], wall: Mapping[str, float | str | None] | None = None
) -> list[Block]:
    """The report's content, top to bottom, from ``metrics`` (metrics.json) and the drawn ``figures``; ``wall``,
    every stage's wall time in run order (the pipeline's timings, kept out of metrics.json), ends it."""
    b = [
        Block("heading", "sparring: end-of-run report"),
        Block("text", f"Profile `{metrics.get('profile')}`, seed {metrics.get('seed')}, "
                      f"{metrics.get('n_heldout')} held-out scenarios per opponent, "
                      f"{metrics.get('draws', 1)} customer draws each against a sampled one. "
                      f"Co-evolution stopped: {metrics.get('stop_reason')}."),  # fmt: skip
        *([Block("text", QUICK_NOTE)] if metrics.get("profile") == "quick" else []),
        Block("heading", "Did RL help?"),
        Block("text", rl_verdict(metrics)),
        *([Block("table", rows=gain_rows(metrics))] if metrics.get("gains") else []),
        Block("text", "Paired differences of strict PASS on the same held-out scenarios and customer draws (every "
                      "agent meets draw j of a scenario with the same seed), with 95% bootstrap intervals that "
                      "resample scenarios and keep each one's draws together; the reference opponent is adversary "
                      "generation 0, which no compared agent trained against. The expert's row in the summary is "
                      "the ceiling."),
        Block("heading", "Summary"),
        Block("table", rows=summary_rows(metrics)),
        Block("text", "PASS: strict PASS (the right tool, lookup first, the world's state as the goal needs, a "
                      "clean end) over every scenario and draw against the reference opponent, the cooperative "
                      "simulator, the camouflaging customer and the adversary pool (every generation, the "
                      "simulator included); adv wins: the pool's win rate; of ceiling: PASS pool over the "
                      "expert's; pass^k: all k customer draws of a scenario pass, the agent greedy (τ-bench)."),
        Block("text", _improvement(metrics)),
        Block("figure", "strict PASS per generation", path=figures.get("strict_pass_by_cycle")),
        Block("figure", "each agent beside the ceiling", path=figures.get("ceiling")),
        *_coevolution_blocks(metrics.get("cycles", []), figures),
    ]  # fmt: skip
    if metrics.get("cross_play", {}).get("agents"):
        b += [
            Block("heading", "Cross-play"),
            Block("text", "Strict PASS [95% interval over scenarios, draws kept together] of each agent "
                          "against the cooperative simulator, the camouflaging customer and each adversary "
                          "generation (`adv_0`: the simulator) on the held-out scenarios the pool dealt it."),
            Block("table", rows=_cross_play_rows(metrics["cross_play"])),
            Block("figure", "cross-play heatmap", path=figures.get("cross_play")),
        ]  # fmt: skip
    if len(_failure_rows(metrics)) > 1:
        b += [Block("heading", "Why episodes fail"), Block("table", rows=_failure_rows(metrics))]
    b += [Block("heading", "Strategies the adversaries found"), *_strategy_blocks(metrics.get("strategies", []))]
    b.append(Block("figure", "strategy shares per generation", path=figures.get("strategies")))
    sims = {k: v for k, v in (metrics.get("simulator") or {}).items() if v}
    if sims:
        rows = [["simulator", *FIDELITY]] + [[k, *(fmt(v.get(m)) for m in FIDELITY)] for k, v in sims.items()]
        b += [Block("heading", "Simulator fidelity"), Block("table", rows=rows)]
        b.append(Block("figure", "simulator fidelity", path=figures.get("fidelity")))
    peer = metrics.get("peer") or {}
    if peer.get("members"):
        b += _peer_blocks(peer)
    if wall:  # in the order given (the run's), every stage: a dash where none ran, text for the one running
        rows = [[name, fmt(float(v)) if isinstance(v, int | float) else fmt(v)] for name, v in wall.items()]
        b += [Block("heading", "Wall time per stage"), Block("table", rows=[["stage", "seconds"], *rows])]
    return [block for block in b if block.kind != "figure" or block.path is not None]


def to_markdown(blocks: Sequence[Block], figures_link: str = "figures/") -> str:
    """The blocks as markdown; a figure links to ``figures_link`` + its file name."""
    out = []
    for block in blocks:
        if block.kind == "heading":
            out.append(("# " if not out else "## ") + block.text)
        elif block.kind == "text":
            out.append(block.text)
        elif block.kind == "table":
            header, *body = block.rows
            out.append("\n".join(["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
                                 + ["| " + " | ".join(r) + " |" for r in body]))  # fmt: skip
        elif block.kind == "figure" and block.path is not None:
            out.append(f"![{block.text}]({figures_link}{block.path.name})")
    return "\n\n".join(out) + "\n"


def _inline(text: str) -> str:
    """Markdown's ``code``, **bold** and > quote lines of a text block, as HTML."""
    lines = []
    for line in html.escape(text).split("\n"):
        quoted = line.startswith("&gt; ")
        line = line.removeprefix("&gt; ")
        while line.count("**") >= 2:
            line = line.replace("**", "<b>", 1).replace("**", "</b>", 1)
        while line.count("`") >= 2:
            line = line.replace("`", "<code>", 1).replace("`", "</code>", 1)
        lines.append(f"<blockquote>{line}</blockquote>" if quoted else line)
    return "<br>".join(lines)


def to_html(blocks: Sequence[Block]) -> str:
    """The same blocks as one self-contained HTML page: the PNGs inlined as base64, no external file."""
    out = ["<!doctype html><html><head><meta charset='utf-8'><title>sparring report</title><style>"
           "body{font-family:sans-serif;max-width:980px;margin:2em auto;padding:0 1em}"
           "table{border-collapse:collapse;margin:1em 0}td,th{border:1px solid #ccc;padding:4px 8px;"
           "text-align:right}td:first-child,th:first-child{text-align:left}img{max-width:100%}"
           "blockquote{color:#444;margin:0.3em 1em}</style></head><body>"]  # fmt: skip
    for i, block in enumerate(blocks):
        if block.kind == "heading":
            tag = "h1" if i == 0 else "h2"
            out.append(f"<{tag}>{html.escape(block.text)}</{tag}>")
        elif block.kind == "text":
            out.append(f"<p>{_inline(block.text)}</p>")
        elif block.kind == "table":
            header, *body = block.rows
            out.append("<table><tr>" + "".join(f"<th>{html.escape(h)}</th>" for h in header) + "</tr>"
                       + "".join("<tr>" + "".join(f"<td>{html.escape(c)}</td>" for c in r) + "</tr>" for r in body)
                       + "</table>")  # fmt: skip
        elif block.kind == "figure" and block.path is not None:
            data = base64.b64encode(block.path.read_bytes()).decode()
            out.append(f"<figure><img alt='{html.escape(block.text)}' src='data:image/png;base64,{data}'>"
                       f"<figcaption>{html.escape(block.text)}</figcaption></figure>")  # fmt: skip
    return "\n".join(out) + "</body></html>\n"


def build_report(
    metrics: dict[str, Any], figures_dir: Path, wall: Mapping[str, float | str | None] | None = None
) -> tuple[str, str, list[Block]]:
    """Draw the figures into ``figures_dir`` and return the report as (markdown, html, blocks); the markdown
    links to the figures as ``figures/<name>.png`` (report.md sits beside that folder). ``wall``: see
    :func:`report_blocks`."""
    figures = draw_figures(metrics, figures_dir)
    blocks = report_blocks(metrics, figures, wall)
    return to_markdown(blocks), to_html(blocks), blocks
