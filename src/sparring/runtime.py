"""Process-wide start-up settings: where the project is, which code it runs, and how many threads torch may use."""

from __future__ import annotations

import os
import subprocess
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

ROOT_ENV = "SPARRING_ROOT"
DOMAIN_ENV = "SPARRING_DOMAIN"  # the domain sparring.world binds at import (sparring.world.vocab)
_applied_threads: int | None = None


def project_root() -> Path:
    """The project folder: $SPARRING_ROOT if set, else the nearest folder upward holding params.yaml."""
    if os.environ.get(ROOT_ENV):
        return Path(os.environ[ROOT_ENV]).resolve()
    here = Path.cwd().resolve()
    for folder in (here, *here.parents):
        if (folder / "params.yaml").is_file():
            return folder
    raise FileNotFoundError(f"no params.yaml in {here} or above; run from the project folder or set {ROOT_ENV}")


def bind_domain(domain: str, root: Path) -> Path:
    """Make params.yaml's ``domain`` (a packaged name, or a file's path relative to ``root``) the one this process
    and the stages it starts play: $SPARRING_DOMAIN, set before sparring.world binds its tables. An unknown domain
    is named; a process whose world already bound another domain is refused rather than mixing two."""
    import sys

    from sparring.domains import HERE, domain_path

    path = (root / domain_path(domain)).resolve()
    if not path.is_file():
        packaged = ", ".join(sorted(p.stem for p in HERE.glob("*.yaml")))
        raise ValueError(f"domain: no domain {domain!r} (packaged: {packaged}; or a domain file's path)")
    vocab = sys.modules.get("sparring.world.vocab")
    if vocab is not None and vocab.DOMAIN.path != path:
        raise ValueError(f"domain: this process already plays {vocab.DOMAIN.name}, not {domain!r}")
    os.environ[DOMAIN_ENV] = str(path)
    return path


def apply_torch_threads(n: int) -> int:
    """Set torch's intra-op threads once per process (0 keeps torch's default) and return the count in force.

    On the 2-core VMs this project grew on, 2 threads ran elementwise ops ~80x slower than 1 (benchmarks/
    threads.py measures it): the default is 1 thread, and parallelism comes from processes. The environment
    variables cover libraries that read them at import; torch.set_num_threads covers torch already imported.
    """
    global _applied_threads
    if n > 0:
        for var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
            os.environ[var] = str(n)
    import torch  # deferred: stages without torch should not pay for its import

    if n > 0 and torch.get_num_threads() != n:
        torch.set_num_threads(n)
    if n > 0 and _applied_threads is None:
        try:  # interop threads can be set only before the first parallel op in the process
            torch.set_num_interop_threads(n)
        except RuntimeError:
            pass
    _applied_threads = torch.get_num_threads()
    return _applied_threads


def git_commit(folder: Path) -> str | None:
    """The commit checked out at ``folder`` (with ``-dirty`` when tracked files differ from it), or None outside
    git or without git: what tells two runs of different code apart."""
    try:
        head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=folder, capture_output=True, text=True, timeout=10)
        if head.returncode != 0:
            return None
        dirty = subprocess.run(["git", "diff", "--quiet", "HEAD", "--"], cwd=folder, capture_output=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return head.stdout.strip() + ("-dirty" if dirty.returncode == 1 else "")


def sparring_version() -> str:
    """The installed package's version, with the commit of the checkout its code comes from when there is one."""
    try:
        installed = version("sparring")
    except PackageNotFoundError:
        installed = "unknown"
    commit = git_commit(Path(__file__).resolve().parent)
    return f"{installed} ({commit[:12]}{'-dirty' * commit.endswith('-dirty')})" if commit else installed
