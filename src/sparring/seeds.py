"""Seeds derived from named parts, so every random draw of a run is fixed by (seed, cycle, what it is for)."""

from __future__ import annotations

import hashlib
from typing import Any

# Held-out play's customer draws: a run takes draws 0..K-1 of these (evaluate.draws), a seed each; an A/A check
# compares two disjoint halves, so K is at most 16.
DRAW_SET = 16


def derive_seed(*parts: Any) -> int:
    """A 31-bit seed from any parts (seed, cycle, tag, ...): stable across processes, unlike ``hash``."""
    return int(hashlib.sha1(":".join(map(str, parts)).encode()).hexdigest()[:8], 16) & 0x7FFFFFFF
