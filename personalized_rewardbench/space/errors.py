"""What a Space visitor may read of an error: its message, without server paths or terminal advice.

A `UserError` keeps the place it is about (`where`, a path on the server) and the fix for a terminal user
(`hint`, a CLI flag or setting) apart from its message, so the visitor's line is simply the message;
the Space's log keeps the whole error for its maintainers.

>>> from personalized_rewardbench.errors import UserError
>>> error = UserError(
...     "the run folder holds a run with a different model_revision",
...     "pass another --output, or delete that folder to start over",
...     where="/srv/results/m/run-1",
... )
>>> public_message(error)
'the run folder holds a run with a different model_revision'
>>> public_message(UserError("model 'someone/else' is not on this Space's allowlist; choose one of: baseline:length"))
"model 'someone/else' is not on this Space's allowlist; choose one of: baseline:length"
>>> public_message("shared prefix: off --\\n 2 of 8 pairs scored in full")  # a notice: our own words, one line
'shared prefix: off -- 2 of 8 pairs scored in full'
"""

from __future__ import annotations

from personalized_rewardbench.errors import UserError


def public_message(error: UserError | str) -> str:
    """The visitor's one line: a `UserError`'s message (no `where`, no `hint`), or a notice's text on one line."""
    text = error.message if isinstance(error, UserError) else str(error)
    return " ".join(text.split()) or "the request failed"


def failed_run_message(error: UserError | str) -> str:
    """A library error raised while running an evaluation, as the visitor sees it."""
    return (
        f"the run could not be completed: {public_message(error)}; it was logged for the Space's maintainers. "
        "Try other settings or try again later"
    )
