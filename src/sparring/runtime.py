"""Process-wide start-up settings: where the project is, and how many threads torch may use."""

from __future__ import annotations

import os
from pathlib import Path

ROOT_ENV = "SPARRING_ROOT"
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
