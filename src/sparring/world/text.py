"""Finding a value in a customer's words: what the event log's provenance (:mod:`sparring.world.events`) and the
``"described"`` reference (:mod:`sparring.world.described`) both match on.

Strings match case-insensitively at word boundaries, never inside a decimal ("4" is not in "4.50", nor "50" in
"4.50"); numbers (also numeric strings) match any number written in the text by value.
"""

from __future__ import annotations

import math
import re
from typing import Any

NUMBER_RE = re.compile(r"(?<![\w.])(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?(?![\w])")


def as_number(value: Any) -> float | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float):
        return float(value) if math.isfinite(value) else None
    if isinstance(value, str) and NUMBER_RE.fullmatch(value.strip()):
        return float(value.strip().replace(",", ""))
    return None


def find_in_text(value: Any, text: str) -> tuple[int, int] | None:
    """Span of the last occurrence of ``value`` in ``text`` (see the module docstring), or None."""
    if isinstance(value, str) and value.strip():
        needle = value.strip()
        # Word boundaries, and no match inside a decimal ("4" is not in "4.50", nor "50" in "4.50").
        pattern = r"(?<!\w)(?<!\d[.,])" + re.escape(needle) + r"(?!\w)(?![.,]\d)"
        hits = list(re.finditer(pattern, text, re.IGNORECASE))
        if hits:
            return hits[-1].span()
    number = as_number(value)
    if number is not None:
        for m in reversed(list(NUMBER_RE.finditer(text))):
            if math.isclose(float(m.group().replace(",", "")), number, abs_tol=1e-9):
                return m.span()
    return None
