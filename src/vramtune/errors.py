"""The one user-facing error type.

Anything the user can fix (bad flag, bad file, unknown profile) raises UserError with a
one-line message; the CLI catches it once at the top, prints it and exits 2. Everything
else is a bug and keeps its traceback.
"""


class UserError(Exception):
    """A problem with the user's input, reported as one line with exit code 2."""

    exit_code = 2


QUOTE_MAX_CHARS = 60


def quoted(text: object, limit: int = QUOTE_MAX_CHARS) -> str:
    """``text`` as ``repr`` quotes it, for an error line: cut to its first and last characters
    past ``limit`` (a 5,000-digit size pasted by mistake is named, not echoed whole)."""
    try:
        shown, length = repr(text), len(str(text))
    except ValueError:  # an int past Python's digit limit for str()
        return "(an integer of thousands of digits)"
    if len(shown) <= limit:
        return shown
    keep = (limit - 5) // 2
    return f"{shown[:keep]}...{shown[-keep:]} ({length:,} characters)"
