"""Reading a measurement, or the log a series comes from, line by line: the file opened (gzip or plain), the lines
named for error messages, progress on large files, and the pool that merges repeated rows of one size (refusing two
that disagree by more than :data:`CONFLICT_RATIO`). :func:`commcost.calibrate.data.load_series` reads through them
(moved from there unchanged).
"""

from __future__ import annotations

import os
from pathlib import Path

from commcost.calibrate.fit import Sample
from commcost.core.errors import InputError
import stat
import statistics
import sys

__all__ = ["PROGRESS_MIN_BYTES", "CONFLICT_RATIO"]


def _open_lines(p: Path):
    """``p``'s lines, streamed (UTF-8, undecodable bytes replaced); a read error names the file."""

    try:
        mode = os.stat(p).st_mode  # before open(): opening a FIFO blocks until someone writes to it
    except OSError as exc:
        raise OSError(exc.errno, exc.strerror, str(p)) from None
    if stat.S_ISDIR(mode):
        raise InputError(f"{p}: is a directory, expected a measurement file or nccl-tests log")
    if not stat.S_ISREG(mode):
        raise InputError(f"{p}: not a regular file (a FIFO or a device), expected a measurement file or "
                         "nccl-tests log")
    try:
        return open(p, encoding="utf-8", errors="replace", newline=None)
    except OSError as exc:
        raise OSError(exc.errno, exc.strerror, str(p)) from None


def _read_all(fh, p: Path) -> str:
    try:
        return fh.read()
    except OSError as exc:  # EIO from /proc/self/mem: the error carries no file name of its own
        raise OSError(exc.errno, exc.strerror, str(p)) from None


PROGRESS_MIN_BYTES = 50_000_000
"""Logs above this size (50 MB) show a progress line on stderr while read (on a terminal)."""


def _named_lines(fh, p: Path):
    """``fh``'s lines (a plain loop: ``yield from fh`` would close the file with the generator), with
    a progress line on a terminal for a log over :data:`PROGRESS_MIN_BYTES`."""

    try:
        total = os.fstat(fh.fileno()).st_size
        show = total > PROGRESS_MIN_BYTES and sys.stderr.isatty()
        n = 0
        for line in fh:
            yield line
            n += 1
            if show and n % 65536 == 0:
                sys.stderr.write(f"\rreading {p.name}: {min(100, 100 * fh.buffer.tell() // total):3d}%  "
                                 f"{n:,} lines")
                sys.stderr.flush()
        if show and n >= 65536:
            sys.stderr.write("\r" + " " * 60 + "\r")  # erased: the report or the error follows
    except OSError as exc:
        raise OSError(exc.errno, exc.strerror, str(p)) from None


def _is_measurement_head(fh, p: Path) -> tuple[bool, list[str]]:
    """Whether the file is a commcost measurement (JSON, or CSV whose first line that is not a comment
    starts with ``op,``), and the lines read to tell."""
    head: list[str] = []
    for line in _named_lines(fh, p):
        head.append(line)
        stripped = line.strip()
        if not stripped or stripped.startswith("#"):
            if len(head) > 10_000:  # a log's comment header is short
                break
            continue
        return stripped.startswith("{") or stripped.startswith("op,"), head
    return False, head


class _Pool:
    """The rows of one series, pooled by size as they stream in: per size the times (a float each,
    for the median) and the rows of the smallest and largest time (for the conflict warning)."""

    __slots__ = ("times", "lo", "hi", "rows")

    def __init__(self) -> None:
        self.times: dict[float, list[float]] = {}
        self.lo: dict[float, tuple[float, str]] = {}
        self.hi: dict[float, tuple[float, str]] = {}
        self.rows = 0

    def add(self, size_bytes: float, time_s: float, row: str) -> None:
        self.rows += 1
        ts = self.times.get(size_bytes)
        if ts is None:
            self.times[size_bytes] = [time_s]
            self.lo[size_bytes] = self.hi[size_bytes] = (time_s, row)
            return
        ts.append(time_s)
        if time_s < self.lo[size_bytes][0]:
            self.lo[size_bytes] = (time_s, row)
        if time_s > self.hi[size_bytes][0]:
            self.hi[size_bytes] = (time_s, row)

    def samples(self) -> tuple[Sample, ...]:
        """One sample per size, ``T`` the median of its rows (nccl-tests' one time per size)."""

        return tuple(Sample(size_bytes=size, time_s=statistics.median(ts)) for size, ts in self.times.items())

    def conflicts(self) -> list[str]:
        """A warning per size whose times are more than :data:`CONFLICT_RATIO` apart."""
        out = []
        for size, ts in self.times.items():
            (t_lo, r_lo), (t_hi, r_hi) = self.lo[size], self.hi[size]
            if len(ts) > 1 and t_hi > CONFLICT_RATIO * t_lo:
                out.append(f"{size:.0f} B measured {len(ts)} times with conflicting times ({t_lo * 1e6:.4g} us in "
                           f"{r_lo}, {t_hi * 1e6:.4g} us in {r_hi}); their median is fitted")
        return out


CONFLICT_RATIO = 1.5
"""Times of one size that differ by more than this factor conflict (one of them was disturbed)."""
