"""The ``commcost`` command line: a thin layer of subcommands over the public API.

Each subcommand lives in its own module exposing ``HELP``, ``EXAMPLES`` (the command lines
its ``--help`` ends with), ``add_arguments(parser)`` and ``run(args) -> int``, and is listed once in :data:`SUBCOMMANDS`. Modules here
import only the standard library at import time; heavy imports happen in ``run``.
"""

from __future__ import annotations

import importlib
import os
import sys
from collections.abc import Sequence

import re

from commcost.cli._args import (PROG, Parser, clear_interrupt_notes, fail, hold_warnings, interrupt_note,
                                release_warnings, signal_exit_status)
from commcost.core.errors import InputError

__all__ = ["main", "budget_main", "SUBCOMMANDS", "NON_FINITE_PATTERN", "find_non_finite_token"]

SUBCOMMANDS: dict[str, str] = {
    "budget": "commcost.cli.budget",
    "collective": "commcost.cli.collective",
    "presets": "commcost.cli.presets",
    "scaling": "commcost.cli.scaling",
    "timeline": "commcost.cli.timeline",
    "measure": "commcost.cli.measure",
    "fit": "commcost.cli.fit",
    "validate": "commcost.cli.validate",
    "plan": "commcost.cli.plan",
    "trace": "commcost.cli.trace",
    "search": "commcost.cli.search",
}
"""Subcommand name -> module implementing it."""

NON_FINITE_PATTERN = r"(?<![A-Za-z_])[-+]?(?:nan|inf)(?![a-wyzA-Z_])"
"""How Python prints a non-finite float (``inf``, ``-inf``, ``nan``, also as ``infx`` or ``inf%``),
and not a word such as info, InfiniBand or nanoGPT (compiled on first use: none at start-up)."""


_PATH_NEIGHBOURS = frozenset("/\\.")
"""A token touching one of these (``inf.json``, ``nan/p.json``, ``runs/inf``) is part of a file name:
a float never prints beside a slash, and a '.' after it is the end of a sentence only when no letter
or digit follows."""


def find_non_finite_token(text: str, names: Sequence[str] = ()):
    """The first match of :data:`NON_FINITE_PATTERN` in ``text`` that is a number, or None.

    A match inside a file name is not a number: inside one of ``names`` (the strings the user typed,
    which a report may echo), or touching a path separator or a file extension (a file found in a
    directory the user named: ``traces/inf.json``)."""
    if "inf" not in text and "nan" not in text:  # the common case, without compiling the pattern
        return None
    spans = []
    for name in names:
        if name and ("inf" in name or "nan" in name):
            start = text.find(name)
            while start >= 0:
                spans.append((start, start + len(name)))
                start = text.find(name, start + 1)
    for m in re.finditer(NON_FINITE_PATTERN, text):
        a, b = m.span()
        if any(lo <= a and b <= hi for lo, hi in spans):
            continue
        before = text[a - 1] if a else ""
        after = text[b:b + 2]
        if before in _PATH_NEIGHBOURS or after[:1] in ("/", "\\") \
                or (after[:1] == "." and len(after) == 2 and after[1].isalnum()):
            continue
        return m
    return None


_BAD_PATH_ERRNOS = frozenset({1, 2, 13, 17, 20, 21, 30, 36, 40})
"""EPERM, ENOENT, EACCES, EEXIST, ENOTDIR, EISDIR, EROFS, ENAMETOOLONG, ELOOP: a path the user gave is
wrong (exit 2); any other OSError (a full disk, an I/O error) is a failure while running (exit 1)."""


def _dispatch(module_name: str, prog: str, argv: Sequence[str]) -> int:
    """Parse, run, and turn every way a run can end into its exit status (docs/exit-codes.md):
    0 done, 1 a failure while running, 2 bad input, 130 interrupted (Ctrl-C; 143 for SIGTERM).
    Whatever happens, stderr gets at most one line and stdout a whole report or nothing."""
    clear_interrupt_notes()  # a note belongs to one run (main may be called many times in one process)
    previous = _terminate_as_interrupt()
    hold_warnings()  # printed once the run succeeds; a failure's one line is its error
    try:
        return _parse_and_run(module_name, prog, argv)
    except KeyboardInterrupt as exc:
        signum = getattr(exc, "signum", 2)
        _say_interrupted(signum)
        return signal_exit_status(signum)
    except BrokenPipeError:
        # the reader (head, less) went away: not an error of ours
        sys.stdout = open(os.devnull, "w")
        return 0
    except InputError as exc:
        fail(str(exc))
    except RecursionError:
        fail("input nested too deeply to read (a file of thousands of nested brackets?)")
    except OSError as exc:
        message = f"{exc.filename or ''}: {exc.strerror or exc}".lstrip(": ")
        if exc.errno in _BAD_PATH_ERRNOS:
            fail(message)
        _one_line(message)
        return 1
    except (SystemExit, GeneratorExit):
        raise
    except Exception as exc:  # noqa: BLE001 - the last resort: one line, never a traceback
        if os.environ.get("COMMCOST_TRACEBACK"):
            raise
        _one_line(f"internal error: {type(exc).__name__}: {str(exc)[:300]} (set COMMCOST_TRACEBACK=1 to see where; "
                  "please report it with the command line)")
        return 1
    finally:
        release_warnings(False)  # a run that got here without succeeding drops them
        _restore_sigterm(previous)


def _parse_and_run(module_name: str, prog: str, argv: Sequence[str]) -> int:
    """Import subcommand ``module_name``, parse ``argv`` with its flags and run it; the exit status."""
    module = importlib.import_module(module_name)
    examples = getattr(module, "EXAMPLES", ())
    epilog = "examples:\n" + "\n".join(f"  {prog} {e}".rstrip() for e in examples) if examples else None
    parser = Parser(prog=prog, description=module.HELP, epilog=epilog)
    module.add_arguments(parser)
    args = parser.parse_args(list(argv))
    code = _run_checked(module.run, args, names=argv)
    for signum in (2, 15):  # a command that kept its best so far (search) still says why it stopped
        if code == signal_exit_status(signum):
            _say_interrupted(signum)
    return code


def _say_interrupted(signum: int) -> None:
    """The one line on stderr of a run a signal ended (docs/exit-codes.md), with what it kept."""
    note = interrupt_note()
    what = "terminated (SIGTERM)" if signum == 15 else "interrupted"
    print(f"{PROG}: {what}{'; ' + note if note else ''}", file=sys.stderr)


def _terminate_as_interrupt():
    """SIGTERM raises :class:`commcost.cli._args.Terminated` (a KeyboardInterrupt) for every subcommand,
    so ``finally`` blocks run (temporary files are removed, ``measure``'s ranks reaped), ``search``
    prints its best so far, and the run ends in one line and exit 143 (docs/exit-codes.md). Returns
    the handler it replaced (None off the main thread, where no handler can be set)."""
    import signal
    import threading

    if threading.current_thread() is not threading.main_thread():
        return None

    def handler(signum, frame):  # type: ignore[no-untyped-def]
        from commcost.cli._args import Terminated

        raise Terminated()
    try:
        return signal.signal(signal.SIGTERM, handler)
    except (ValueError, OSError):
        return None


def _restore_sigterm(previous) -> None:
    if previous is not None:
        import signal

        signal.signal(signal.SIGTERM, previous)


def _run_checked(run, args, names: Sequence[str] = ()) -> int:
    """``run(args)`` with stdout held until it returns, so a report is printed whole or not at all,
    and never with a non-finite number in it (the guard behind the library's own input bounds;
    ``names``, the command line, are what the user typed: a file named ``inf`` is not a number)."""
    import io

    real, held = sys.stdout, io.StringIO()
    sys.stdout = held
    try:
        code = run(args)
    finally:
        sys.stdout = real
    text = held.getvalue()
    bad = find_non_finite_token(text, names)
    if bad is not None:
        line = text[text.rfind("\n", 0, bad.start()) + 1:].split("\n", 1)[0].strip()
        fail(f"a result is not a finite number ({line[:160]!r}): an input is outside the range the model "
             "can price (an extreme bandwidth, latency, size or step time)")
    release_warnings(code == 0)
    real.write(text)
    real.flush()
    return code


def _one_line(message: str) -> None:
    print(f"{PROG}: error: {' '.join(str(message).split())}", file=sys.stderr)


def main(argv: Sequence[str] | None = None) -> int:
    """``commcost SUBCOMMAND ...``; returns the exit status."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] in ("-h", "--help"):
        lines = ["usage: commcost SUBCOMMAND [options]   (commcost SUBCOMMAND --help for its flags)", ""]
        for name, module_name in SUBCOMMANDS.items():
            lines.append(f"  {name:<12} {importlib.import_module(module_name).HELP}")
        print("\n".join(lines), file=sys.stdout if argv else sys.stderr)
        return 0 if argv else 2
    if argv[0] == "--version":
        from commcost import __version__

        print(f"commcost {__version__}")
        return 0
    name, rest = argv[0], argv[1:]
    if name not in SUBCOMMANDS:
        fail(f"unknown subcommand {name!r} (valid: {', '.join(SUBCOMMANDS)})")
    return _dispatch(SUBCOMMANDS[name], f"commcost {name}", rest)


def budget_main(argv: Sequence[str] | None = None, prog: str = "python tools/collective_cost.py") -> int:
    """The drill's ``tools/collective_cost.py``: the budget subcommand without its name."""
    argv = list(sys.argv[1:] if argv is None else argv)
    return _dispatch(SUBCOMMANDS["budget"], prog, argv)
