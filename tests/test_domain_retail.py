"""The retail domain's tests run in a process of their own: ``sparring.world`` binds one domain per process
(``$SPARRING_DOMAIN``), and this one plays banking."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_the_retail_domain_passes_its_own_tests():
    env = {**os.environ, "SPARRING_DOMAIN": "retail"}
    # --noconftest: tests/conftest.py builds banking fixtures at import; pyproject's -q alone keeps the summary line
    cmd = [
        sys.executable,
        "-m",
        "pytest",
        "--noconftest",
        "-p",
        "no:cacheprovider",
        str(ROOT / "tests" / "retail_domain"),
    ]
    done = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
    assert " passed" in done.stdout and "skipped" not in done.stdout and "deselected" not in done.stdout
