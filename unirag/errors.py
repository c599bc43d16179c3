"""The one exception type users see.

Anything raised as `UniragError` is a user-facing problem (bad path, unknown model, wrong
adapter...). The CLI prints its message on one line, without a traceback, and exits non-zero.
Everything else is a bug and keeps its traceback.
"""


class UniragError(Exception):
    """A problem the user can fix; the message says what happened and what to do."""
