"""Two finished runs' outputs compared file by file, timings aside: the check a refactor's "before and after"
acceptance asks for (issues 80 and 81).

Every file under ``data/``, ``models/`` and ``reports/`` of both runs (``reports/timings/`` left out: wall times
only) is compared: JSON by value with the keys that hold a time dropped (``*seconds*``, ``*_per_s``, a phase
record, a cycle's fingerprint and the hash of its predecessor, which hash those times, and the hashes of the code
that ran, which a refactor changes by design), the rendered report with
its decimals masked (its figures are report.json's, compared by value), every other file (checkpoints, parquet,
tokenizers) byte for byte. Prints each file that differs (the first keys where JSON does), then a JSON last line;
exit 1 when any differs.

Usage: ``python benchmarks/same_outputs.py RUN_A RUN_B``.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import re
import sys
from pathlib import Path
from typing import Any

FOLDERS = ("data", "models", "reports")
SKIPPED = ("reports/timings/",)
# what holds a time, or the hash of the code that ran (a cycle's inputs: a refactor changes it by design)
TIME_KEY = re.compile(r"seconds|_per_s$|^phases$|^fingerprint$|^previous$|^timings?$|^wall|^code:")
DECIMAL = re.compile(r"\d+\.\d+")


def files(run: Path) -> set[str]:
    found = {str(p.relative_to(run)) for f in FOLDERS if (run / f).is_dir() for p in (run / f).rglob("*")}
    return {f for f in found if (run / f).is_file() and not f.startswith(SKIPPED)}


def timeless(value: Any) -> Any:
    """``value`` with every key that holds a time dropped, at any depth."""
    if isinstance(value, dict):
        return {k: timeless(v) for k, v in value.items() if not TIME_KEY.search(str(k))}
    if isinstance(value, list):
        return [timeless(v) for v in value]
    return value


def first_differences(a: Any, b: Any, at: str = "", limit: int = 5) -> list[str]:
    if isinstance(a, dict) and isinstance(b, dict):
        out = []
        for k in sorted(set(a) | set(b), key=str):
            out += first_differences(a.get(k), b.get(k), f"{at}.{k}", limit)
            if len(out) >= limit:
                break
        return out[:limit]
    if isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        out = []
        for i, (x, y) in enumerate(zip(a, b, strict=True)):
            out += first_differences(x, y, f"{at}[{i}]", limit)
            if len(out) >= limit:
                break
        return out[:limit]
    return [] if a == b else [f"{at or '.'}: {a!r:.60} != {b!r:.60}"]


def compare(a: Path, b: Path) -> list[str] | None:
    """Why the file at ``a`` differs from the one at ``b`` (an empty list: it does not); None when the same."""
    if a.suffix in (".json", ".jsonl"):
        try:
            load = json.loads if a.suffix == ".json" else lambda t: [json.loads(x) for x in t.splitlines() if x]
            x, y = timeless(load(a.read_text())), timeless(load(b.read_text()))
        except (ValueError, UnicodeDecodeError):
            pass
        else:
            return None if x == y else first_differences(x, y)
    if a.suffix in (".md", ".html"):
        x, y = (DECIMAL.sub("#", p.read_text()) for p in (a, b))
        return None if x == y else []
    digest = [hashlib.sha256(p.read_bytes()).hexdigest() for p in (a, b)]
    return None if digest[0] == digest[1] else []


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("run_a", type=Path)
    ap.add_argument("run_b", type=Path)
    args = ap.parse_args(argv)
    for run in (args.run_a, args.run_b):
        if not any((run / f).is_dir() for f in FOLDERS):
            print(f"error: {run} holds none of {', '.join(FOLDERS)}: not a run's folder", file=sys.stderr)
            return 2
    in_a, in_b = files(args.run_a), files(args.run_b)
    differ = []
    for name in sorted(in_a & in_b):
        why = compare(args.run_a / name, args.run_b / name)
        if why is not None:
            differ.append(name)
            print(f"differs: {name}" + "".join(f"\n    {w}" for w in why))
    for name in sorted(in_a ^ in_b):
        print(f"only in {'the first' if name in in_a else 'the second'}: {name}")
    summary = {"files": len(in_a | in_b), "same": len(in_a & in_b) - len(differ), "differ": len(differ)}
    summary["only_one"] = len(in_a ^ in_b)
    print(json.dumps(summary))
    return 0 if not differ and not (in_a ^ in_b) else 1


if __name__ == "__main__":
    sys.exit(main())
