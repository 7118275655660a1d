"""The one exception type for bad input.

Every validation in the library raises :class:`InputError` with a message that
names the offending quantity and shows its value; the CLI prints that message as
one line on stderr and exits with status 2.
"""

from __future__ import annotations

__all__ = ["InputError", "long_integer_field"]


class InputError(ValueError):
    """A user-supplied value is out of range, malformed or inconsistent."""


def long_integer_field(text: str, start: int = 0) -> str:
    """Where a JSON text holds an integer past Python's 4,300-digit limit for ``int(str)``
    (``sys.get_int_max_str_digits``; ``json`` raises ValueError there): ``field 'ts'`` for the first
    key whose value is such an integer, else ``a value``, for an error message naming the field."""
    import re

    m = re.compile(r'"((?:[^"\\]|\\.){0,200})"\s*:\s*-?[0-9]{4300}').search(text, start)
    if m is not None:
        return f"field {m.group(1)!r}"
    return "a value"
