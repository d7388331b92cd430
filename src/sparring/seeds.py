"""Seeds derived from named parts, so every random draw of a run is fixed by (seed, cycle, what it is for)."""

from __future__ import annotations

import hashlib
from typing import Any


def derive_seed(*parts: Any) -> int:
    """A 31-bit seed from any parts (seed, cycle, tag, ...): stable across processes, unlike ``hash``."""
    return int(hashlib.sha1(":".join(map(str, parts)).encode()).hexdigest()[:8], 16) & 0x7FFFFFFF
