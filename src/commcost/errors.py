"""The one exception type for bad input.

Every validation in the library raises :class:`InputError` with a message that
names the offending quantity and shows its value; the CLI prints that message as
one line on stderr and exits with status 2.
"""

from __future__ import annotations

__all__ = ["InputError"]


class InputError(ValueError):
    """A user-supplied value is out of range, malformed or inconsistent."""
