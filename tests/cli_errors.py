"""Read a rendered `UserError` from stderr: `<prog>: error: <message>`, optionally `  hint: <hint>`."""

from __future__ import annotations


def user_error(err: str, prog: str = "prbench") -> tuple[str, str | None]:
    """(error line, hint or None); fails on a traceback, extra lines or anything but one rendered error."""
    lines = err.strip().splitlines()
    assert lines and lines[0].startswith(f"{prog}: error: ") and "Traceback" not in err, err
    assert len(lines) == 1 or (len(lines) == 2 and lines[1].startswith("  hint: ")), err
    return lines[0], lines[1].removeprefix("  hint: ") if len(lines) == 2 else None
