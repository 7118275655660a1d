"""Text that fits the terminal: the width (``COLUMNS``, then the terminal, then 80) and wrapping that
keeps a number with its unit and a command copy-pastable."""

from __future__ import annotations

import os
import re
import sys

__all__ = ["terminal_width", "wrap", "wrap_lines", "wrap_command"]

DEFAULT_WIDTH = 80
"""The width when it cannot be told (output to a file or a pipe, no ``COLUMNS``)."""
MIN_WIDTH = 40
"""Narrower terminals are wrapped as if this wide."""

_GLUE = (" ms", " us", " ns", " s ", " s)", " s,", " s;", " MiB", " GiB", " KiB", " MB", " GB", " KB", " B ",
         " GB/s", " TB/s", " x ", " GPUs", " %")
"""Phrases whose space must not break: a number and its unit."""


def terminal_width() -> int:
    """``COLUMNS`` when set, else the terminal's width, else :data:`DEFAULT_WIDTH`; at least
    :data:`MIN_WIDTH` (as ``shutil.get_terminal_size``, without its imports)."""
    try:
        width = int(os.environ["COLUMNS"])
    except (KeyError, ValueError):
        try:
            width = os.get_terminal_size(sys.__stdout__.fileno()).columns
        except (AttributeError, ValueError, OSError):
            width = DEFAULT_WIDTH
    return max(MIN_WIDTH, width) if width > 0 else DEFAULT_WIDTH


def wrap(line: str, width: int | None = None, *, hang: str = "  ") -> list[str]:
    """``line`` cut at spaces into lines of at most ``width`` (default :func:`terminal_width`); the
    continuation lines keep the line's indent plus ``hang``. A number stays with its unit; a word
    too long for any line (a path) stays on the line it starts, rather than leave a stub behind. Runs
    of spaces between words on one line are kept (``verdict  HIDES`` stays two spaces, so columns
    stay aligned); a break drops them. A no-break space (``\xa0``) in ``line`` glues what it joins and
    is printed as a space."""
    width = width or terminal_width()
    if len(line) <= width:
        return [line.replace("\xa0", " ")]
    indent = line[:len(line) - len(line.lstrip(" "))]
    glued = line.strip(" ")
    for phrase in _GLUE:
        glued = glued.replace(phrase, phrase.replace(" ", "\xa0"))
    out = [indent]
    fresh = True  # nothing but the indent on the current line
    for gap, word in re.findall(r"( *)([^ ]+)", glued):
        room = width - len(out[-1]) - (0 if fresh else len(gap))
        too_long = len(indent + hang) + len(word) > width
        if fresh or len(word) <= room or too_long:
            out[-1] += ("" if fresh else gap) + word  # the line's own spacing: aligned columns stay aligned
        else:
            out.append(indent + hang + word)
        fresh = False
    return [x.replace("\xa0", " ") for x in out]


def wrap_lines(text: str, width: int | None = None, *, keep=None) -> str:
    """Every line of ``text`` through :func:`wrap`, except those ``keep(line)`` says to leave whole
    (tables, whose columns must stay aligned)."""
    width = width or terminal_width()
    out: list[str] = []
    for line in text.split("\n"):
        out.extend([line] if keep is not None and keep(line) else wrap(line, width))
    return "\n".join(out)


def wrap_command(prefix: str, argv: str, width: int | None = None, *, indent: str = "    ") -> list[str]:
    """``prefix + argv`` as shell lines of at most ``width``, broken before a ``--flag`` with a trailing
    `` \\``: pasted into a shell it is still one command."""
    width = width or terminal_width()
    words = argv.split(" ")
    groups: list[str] = []
    for w in words:  # a flag and its value stay together
        if groups and not w.startswith("--"):
            groups[-1] += " " + w
        else:
            groups.append(w)
    lines = [prefix.rstrip(" ")]
    for g in groups:
        if len(lines[-1]) + 1 + len(g) + 2 <= width or lines[-1].strip() == "":
            lines[-1] += " " + g
        else:
            lines[-1] += " \\"
            lines.append(indent + g)
    return lines
