"""The one user-facing error type.

Anything the user can fix (bad flag, bad file, unknown profile) raises UserError with a
one-line message; the CLI catches it once at the top, prints it and exits 2. Everything
else is a bug and keeps its traceback.
"""


import re

# C0 and C1 control characters and lone surrogates: a terminal acts on them (ESC [ 31 m
# colours it, ESC ] 0 ; retitles the window), YAML refuses them, a newline splits one line.
CONTROL = re.compile("[\x00-\x1f\x7f-\x9f\ud800-\udfff]")


def printable(text: str) -> str:
    """``text`` on one line with every control character spelled out ('\\x1b', '\\n'):
    what a file said, shown without letting it act on the terminal or split the line."""
    return CONTROL.sub(lambda m: repr(m.group())[1:-1], text)


class UserError(Exception):
    """A problem with the user's input, reported as one line with exit code 2. The message
    is made one line here, once: a path or a name it quotes may hold a newline or an escape."""

    exit_code = 2

    def __init__(self, message: object = "") -> None:
        super().__init__(printable(str(message)))


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
