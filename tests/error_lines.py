"""What a user-facing CLI error must look like: one `prbench: error: ...` line, optionally one `  hint: ...` line."""

from __future__ import annotations


def one_error(text: str) -> bool:
    """True when `text` is one error line (plus at most one hint line) and no traceback."""
    lines = text.strip().splitlines()
    if not lines or "Traceback" in text or not lines[0].startswith("prbench: error: "):
        return False
    return len(lines) == 1 or (len(lines) == 2 and lines[1].startswith("  hint: "))
