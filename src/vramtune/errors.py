"""The one user-facing error type.

Anything the user can fix (bad flag, bad file, unknown profile) raises UserError with a
one-line message; the CLI catches it once at the top, prints it and exits 2. Everything
else is a bug and keeps its traceback.
"""


class UserError(Exception):
    """A problem with the user's input, reported as one line with exit code 2."""

    exit_code = 2
