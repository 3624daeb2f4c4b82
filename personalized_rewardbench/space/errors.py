"""What a Space visitor may read of an error: one line, no server paths, no command-line advice.

Library errors (`UserError`) are written for someone at a terminal: they name folders on disk and
suggest CLI flags. The Space logs them whole and shows the visitor `public_message(...)` instead.

>>> public_message("/srv/results/m/run-1 holds a run with a different model_revision; pass another --output, or delete that folder")
'a folder on the server holds a run with a different model_revision'
>>> public_message("model 'someone/else' is not on this Space's allowlist; choose one of: baseline:length")
"model 'someone/else' is not on this Space's allowlist; choose one of: baseline:length"
"""

from __future__ import annotations

import re

# An absolute or home/relative path: starts with /, ~/, ./ or ../ not glued to a word, URL or fraction.
_PATH = re.compile(r"(?<![\w:/.~-])(?:~|\.{1,2})?/[^\s,;'\"()\[\]]+")
# Clauses that advise a terminal user: CLI flags, the prbench command, reruns, deleting folders.
_CLI_ADVICE = re.compile(
    r"(?<![\w-])--[a-z]|\bprbench\b|\brerun\b|\bdelete\b|\bhf auth\b|\bsave_pretrained\b", re.IGNORECASE
)
SERVER_PATH = "a folder on the server"


def public_message(text: str) -> str:
    """`text` on one line with server paths replaced and command-line advice dropped."""
    line = " ".join(str(text).split())
    line = _PATH.sub(SERVER_PATH, line)
    clauses = line.split("; ")
    kept = [clauses[0]] + [clause for clause in clauses[1:] if not _CLI_ADVICE.search(clause)]
    return "; ".join(kept).strip() or "the request failed"


def failed_run_message(text: str) -> str:
    """A library error raised while running an evaluation, as the visitor sees it."""
    return f"the run could not be completed: {public_message(text)}; it was logged for the Space's maintainers. Try other settings or try again later"
