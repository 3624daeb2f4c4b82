"""The one exception type for mistakes a user can make (bad input, missing files, bad options).

A `UserError` is structured so that every face can word it for its reader:

- `message`: what went wrong, one line, readable on its own (no terminal advice);
- `where`: the file or folder on this machine it is about, if any (the CLI shows it, a Space visitor does not);
- `hint`: which flag or setting fixes it, if there is one to name.

>>> error = UserError("holds no rows", hint="remove the file or fill it", where="data/Art/test.jsonl")
>>> str(error)
'data/Art/test.jsonl: holds no rows'
>>> print(error.render())
prbench: error: data/Art/test.jsonl: holds no rows
  hint: remove the file or fill it
>>> error.message
'holds no rows'
"""

from __future__ import annotations

from os import PathLike


class UserError(Exception):
    """A problem the user can fix: a message (what, where), optionally the place it is about and a hint."""

    def __init__(self, message: str, hint: str | None = None, *, where: str | PathLike[str] | None = None) -> None:
        self.message = message
        self.hint = hint
        self.where = str(where) if where is not None else None
        super().__init__(f"{self.where}: {message}" if self.where else message)

    def render(self, prog: str = "prbench") -> str:
        """The terminal form: `<prog>: error: <where>: <message>` and, when there is one, `  hint: <hint>`."""
        line = f"{prog}: error: {self}"
        return f"{line}\n  hint: {self.hint}" if self.hint else line
