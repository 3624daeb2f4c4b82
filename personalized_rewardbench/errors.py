"""The one exception type for mistakes a user can make (bad input, missing files, bad options).

The CLI prints such an error as a single line and exits non-zero; the Space shows it as a gr.Error.
"""


class UserError(Exception):
    """A problem the user can fix; its message is one line: what, where, what to do."""
