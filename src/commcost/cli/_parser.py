"""argparse plumbing shared by every subcommand: one-line errors and warnings, the parser, the flags' bounds
and the output paths checked before any work (the value types are :mod:`commcost.cli._args`'s).

:class:`Parser` turns any parse error into one line on stderr and exit 2 (:func:`fail`).
"""

from __future__ import annotations

import argparse
import os
import sys

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (start-up time)
if TYPE_CHECKING:
    from typing import NoReturn

__all__ = [
    "PROG", "Parser", "fail", "warn", "hold_warnings", "release_warnings", "given_flags", "MAX_INT", "FLAG_BOUNDS",
    "check_bounds", "signal_exit_status", "OUTPUT_FLAGS", "check_output_path",
]

PROG = "commcost"


def fail(message: str) -> NoReturn:
    """Print ``commcost: error: message`` as one line on stderr and exit 2."""
    one_line = " ".join(str(message).split())
    print(f"{PROG}: error: {one_line}", file=sys.stderr)
    raise SystemExit(2)


def warn(message: str) -> None:
    """Print ``commcost: warning: message`` as one line on stderr (the run goes on); while the
    dispatcher holds warnings (:func:`hold_warnings`), the line waits for the run to succeed, so a
    refusal is one line, never a caution followed by the error."""
    line = f"{PROG}: warning: {' '.join(str(message).split())}"
    held = _HELD_WARNINGS[0]
    if held is not None:
        held.append(line)
    else:
        print(line, file=sys.stderr)


_HELD_WARNINGS: list = [None]


def hold_warnings() -> None:
    """Hold :func:`warn`'s lines until :func:`release_warnings` (the dispatcher does, around a run)."""
    _HELD_WARNINGS[0] = []


def release_warnings(emit: bool) -> None:
    """Print the held warnings (``emit``: the run succeeded) or drop them (it failed: its one line is
    the error), and stop holding."""
    held, _HELD_WARNINGS[0] = _HELD_WARNINGS[0], None
    if emit and held:
        print("\n".join(held), file=sys.stderr)


def _terminal_columns() -> int:
    """Terminal width as ``shutil.get_terminal_size`` finds it (COLUMNS, then the tty, then 80),
    without importing shutil, which pulls in bz2 and lzma on every start (~7M instructions)."""
    try:
        return int(os.environ["COLUMNS"])
    except (KeyError, ValueError):
        pass
    try:
        return os.get_terminal_size(sys.__stdout__.fileno()).columns
    except (AttributeError, ValueError, OSError):
        return 80


class _HelpFormatter(argparse.HelpFormatter):
    """argparse's formatter with the width given, so argparse never imports shutil."""

    def __init__(self, prog: str, indent_increment: int = 2, max_help_position: int = 24,
                 width: int | None = None) -> None:
        super().__init__(prog, indent_increment, max_help_position,
                         _terminal_columns() - 2 if width is None else width)

    def _fill_text(self, text: str, width: int, indent: str) -> str:
        """Paragraphs are wrapped as argparse does; lines that start with spaces (the examples
        an epilog ends with) are kept as they are."""
        if "\n  " not in text:
            return super()._fill_text(text, width, indent)
        return "\n".join(indent + line for line in text.splitlines())


class Parser(argparse.ArgumentParser):
    """An ArgumentParser whose errors are one line on stderr and exit code 2, and which holds
    every flag named in :data:`FLAG_BOUNDS` to its bounds."""

    def __init__(self, *args, **kwargs) -> None:
        kwargs.setdefault("formatter_class", _HelpFormatter)
        super().__init__(*args, **kwargs)

    def error(self, message: str) -> NoReturn:  # noqa: D102 - argparse hook
        fail(message)

    def parse_args(self, args=None, namespace=None):  # noqa: D102 - argparse hook
        ns = super().parse_args(args, namespace)
        ns.given_flags = given_flags(self, sys.argv[1:] if args is None else args)
        for action in self._actions:
            for flag in action.option_strings:
                if flag in FLAG_BOUNDS:
                    check_bounds(flag, getattr(ns, action.dest, None))
                if flag in OUTPUT_FLAGS and isinstance(getattr(ns, action.dest, None), str):
                    check_output_path(flag, getattr(ns, action.dest))
        return ns


def given_flags(parser: argparse.ArgumentParser, argv) -> frozenset:
    """The destinations of the flags typed on the command line ``argv`` (an abbreviation counts as its flag), so
    ``--from`` can tell a flag the user gave from its default."""
    options = {o: a.dest for a in parser._actions for o in a.option_strings}
    out = set()
    for token in argv:
        if token == "--":
            break
        if not token.startswith("--"):
            continue
        key = token.split("=", 1)[0]
        hits = {d for o, d in options.items() if o == key} or {d for o, d in options.items() if o.startswith(key)}
        if len(hits) == 1:
            out |= hits
    return frozenset(out)


MAX_INT = 10**12
"""Largest integer any flag accepts (flags with a tighter sane bound are in :data:`FLAG_BOUNDS`);
a 309-digit integer would otherwise overflow the first float it meets."""

FLAG_BOUNDS: dict[str, tuple[float, float, str]] = {
    "--gpus": (1, 10**6, "GPUs"),
    "--nodes": (1, 10**5, "nodes"),
    "--gpus-per-node": (1, 1024, "GPUs per node"),
    "--grad-accum": (1, 10**6, "micro-batches"),
    "--fix-grad-accum": (1, 10**6, "micro-batches"),
    "--micro-batch": (1, 10**6, "sequences"),
    "--hidden": (1, 10**6, ""),
    "--seq": (1, 10**8, "tokens"),
    "--layers": (1, 10_000, "layers"),  # workload.shape.MAX_LAYERS (the timeline's guard)
    "--vocab": (1, 10**8, "tokens"),
    "--max-regimes": (1, 100, "regimes"),
    "--nproc": (1, 1024, "ranks"),
    "--warmup": (0, 10**5, "calls"),
    "--iters": (1, 10**6, "calls"),
    "--params": (1e-9, 1e6, "billion parameters"),  # params_billions refuses >= 1e6 as a raw count first
    "--step-ms": (1e-6, 1e9, "ms"),
    "--compute-ms": (1e-6, 1e9, "ms"),
    "--optimizer-ms": (0, 1e9, "ms"),
    "--overhead-ms": (0, 1e9, "ms"),
    "--tflops": (1e-6, 1e6, "TFLOP/s"),
    "--oversubscription": (0, 1e6, ""),  # >= 1 is the topology's own check
    "--bucket": (2.0**-20, 2.0**40, "MiB"),
    "--first-bucket": (2.0**-20, 2.0**40, "MiB"),
    "--buckets": (1, 2.0**60, "bytes"),
    "--factor": (1, 1e6, ""),
    "--timeout": (1, 1e7, "s"),
    "--max-latency-share": (1e-6, 1, ""),
    "--tail-budget": (1e-6, 1, ""),
    "--threshold": (1e-6, 1, ""),
    "--backward-fraction": (1e-6, 1, ""),
    # commcost.core.limits, the library's own bounds (tests/core/test_limits.py checks they agree)
    "--global-batch": (1, 10**7, "sequences"),
    "--train-tokens": (1, 1e16, "tokens"),
    "--price-per-gpu-hour": (0, 1e4, "dollars"),
}
"""Flag -> (smallest, largest, unit): sane bounds, in the flag's own unit, that keep every result
finite (a step of 1e-308 ms or 10**309 GPUs overflows the arithmetic). Rates, latencies and sizes
are bounded by their types (:func:`rate_gb_per_s`, :func:`latency_us`, :func:`size`)."""


def check_bounds(flag: str, value) -> None:
    """Refuse ``value`` (a number or a tuple of them; None is "not given") outside ``FLAG_BOUNDS[flag]``."""
    if value is None or isinstance(value, str):
        return
    lo, hi, unit = FLAG_BOUNDS[flag]
    for v in value if isinstance(value, tuple) else (value,):
        if not lo <= v <= hi:
            shown = f"{v:,}" if isinstance(v, int) and v < 10**30 else (f"{v:.4g}" if isinstance(v, float)
                                                                       else f"an integer of {len(str(v))} digits")
            bound = lambda x: f"{x:,}" if isinstance(x, int) else f"{x:g}"  # noqa: E731
            fail(f"{flag} must be between {bound(lo)} and {bound(hi)}{' ' + unit if unit else ''}, got {shown}")


def signal_exit_status(signum: int) -> int:
    """``128 + signum``: the exit status of a run a signal ended, as a shell reports it (130 for
    Ctrl-C, 143 for SIGTERM; docs/exit-codes.md)."""
    return 128 + signum


OUTPUT_FLAGS = ("-o", "--output", "--plot", "--csv", "--save-measurement", "--save-calibration", "--trace-out")
"""Flags that name a file to write: :class:`Parser` checks each with :func:`check_output_path`
right after parsing, before any work (a measurement must not run for minutes into an unwritable path)."""


def check_output_path(flag: str, path: str, suffixes: tuple[str, ...] = ()) -> None:
    """Refuse, before any work, an output path that cannot be written as asked: an empty name, a
    directory, a missing parent directory, a directory where no file can be created (read-only,
    immutable), or (with ``suffixes``) a file name with another ending. An existing device or FIFO
    (``/dev/null``, ``/dev/stdout``) is written through, so it only needs to be writable."""
    import stat
    from pathlib import Path

    if not path.strip():
        fail(f"{flag} {path!r}: expected a file name, got an empty one")
    target = Path(path)
    if target.is_dir():
        fail(f"{flag} {path!r} is a directory, expected a file name")
    if suffixes and target.suffix.lower() not in suffixes:
        fail(f"{flag} {path!r}: the file name must end in {' or '.join(suffixes)}")
    try:
        st = os.stat(target)
    except OSError:
        st = None
    if st is not None and not stat.S_ISREG(st.st_mode):
        if not os.access(target, os.W_OK):
            fail(f"{flag} {path!r}: not writable")
        return
    parent = target.resolve().parent if target.is_symlink() else target.parent
    if not parent.is_dir():
        fail(f"{flag} {path!r}: directory {str(parent)!r} does not exist")
    import tempfile

    try:  # what write_atomic will do: create a file beside the target (os.access misses immutable dirs)
        fd, probe = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".probe", dir=parent)
    except OSError as exc:
        fail(f"{flag} {path!r}: cannot create a file in {str(parent)!r}: {exc.strerror or exc}")
    os.close(fd)
    os.unlink(probe)
