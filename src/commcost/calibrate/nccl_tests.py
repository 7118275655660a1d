"""Reader for nccl-tests (and rccl-tests) ``*_perf`` output.

What a log looks like (nccl-tests ``src/common.cu``, doc/PERFORMANCE.md)::

    # nThread 1 nGpus 1 minBytes 8 maxBytes 8589934592 step: 2(factor) warmup iters: 5 ...
    #
    # Using devices
    #  Rank  0 Group  0 Pid  29262 on bm-h100-01 device  0 [0000:19:00] NVIDIA H100 80GB HBM3
    ...
    #                                                   out-of-place                       in-place
    #       size         count      type   redop    root     time   algbw   busbw #wrong     time ...
    #        (B)    (elements)                               (us)  (GB/s)  (GB/s)            (us) ...
               8             2     float     sum      -1    68.52    0.00    0.00      0    24.70 ...
    # Out of bounds values : 0 OK
    # Avg bus bandwidth    : 139.56

The column header names the columns, so older layouts (no ``root``, no
``redop``, ``error`` instead of ``#wrong``) read the same way. Time is in
microseconds and bandwidths in GB/s (1e9 bytes/s); they are converted to
seconds and bytes/s here. Several runs may be concatenated: every
``# nThread`` line (or a column header after a finished table) starts a new
run. The number of ranks is the number of ``Rank`` lines under
``# Using devices``; nodes are the distinct host names there.

Launcher chatter (mpirun warnings, ``NCCL INFO`` lines, ``RCCL version :``)
is tolerated between tables; inside a table, a line that is neither a row,
a comment nor ``NCCL INFO/WARN`` chatter is an error naming the line. A file
with no table at all is not nccl-tests output: the error names its first
line that is not a comment.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path

from commcost.comm.collectives import Collective
from commcost.core.errors import InputError
from commcost.core.units import GB, US

__all__ = [
    "NcclTestsTiming", "NcclTestsRow", "NcclTestsRun",
    "parse_nccl_tests", "read_nccl_tests", "collective_from_name", "MAX_LOG_ROWS",
]

_OPS = {
    "all_reduce": Collective.ALL_REDUCE,
    "all_gather": Collective.ALL_GATHER,
    "reduce_scatter": Collective.REDUCE_SCATTER,
    "broadcast": Collective.BROADCAST,
    "reduce": Collective.REDUCE,
    "alltoall": Collective.ALL_TO_ALL,
    "sendrecv": Collective.SEND_RECV,
}
_PERF_RE = re.compile(r"(?<![A-Za-z0-9])(all_reduce|all_gather|reduce_scatter|broadcast|reduce|alltoall|sendrecv)"
                      r"_perf(?:_mpi)?(?![A-Za-z0-9])")
_NAME_RE = re.compile(r"(?<![a-z])(all_?reduce|all_?gather|reduce_?scatter|broadcast|all_?to_?all|send_?recv)(?![a-z])")
_NAME_CANON = {"allreduce": "all_reduce", "allgather": "all_gather", "reducescatter": "reduce_scatter",
               "broadcast": "broadcast", "alltoall": "alltoall", "sendrecv": "sendrecv"}
_NTHREAD_RE = re.compile(r"^#\s*nThread\s+(\d+)\s+nGpus\s+(\d+)")
_RANK_RE = re.compile(r"^#\s*Rank\s+(\d+)\s+(?:Group\s+\d+\s+)?Pid\s+\d+\s+on\s+(\S+)"
                      r"\s+device\s+\d+\s+\[[^\]]*\]\s*(.*)$")
_AVG_RE = re.compile(r"^#\s*Avg bus bandwidth\s*:\s*([0-9.eE+-]+)")
_CHATTER_RE = re.compile(r"NCCL (INFO|WARN)|RCCL (INFO|WARN)")
_VERSION_RE = re.compile(r"^(?:NCCL|RCCL) version\s*:?\s*(\S+)")
_TABLE_END = ("# Out of bounds", "# Avg bus bandwidth", "# Errors with asterisks", "# Collective test concluded")


def collective_from_name(text: str) -> Collective | None:
    """The collective named in ``text`` (``all_reduce_perf``, ``allreduce``, ``all_gather`` ...), or None."""
    match = _PERF_RE.search(text)
    if match:
        return _OPS[match.group(1)]
    match = _NAME_RE.search(text.lower())
    if match:
        return _OPS[_NAME_CANON[match.group(1).replace("_", "")]]
    return None


@dataclass(frozen=True, slots=True, kw_only=True)
class NcclTestsTiming:
    """One placement (out-of-place or in-place) of one row."""

    time_s: float
    """Average time of one collective, seconds (nccl-tests prints microseconds)."""
    algbw_bytes_per_s: float
    """Algorithm bandwidth ``size / time``, bytes/s (printed in GB/s, 1e9)."""
    busbw_bytes_per_s: float
    """Bus bandwidth ``algbw * factor(op, n)``, bytes/s."""
    wrong: str
    """The ``#wrong`` (or older ``error``) column as printed; ``N/A`` when not checked."""


@dataclass(frozen=True, slots=True, kw_only=True)
class NcclTestsRow:
    """One row of a ``*_perf`` table."""

    size_bytes: int
    """The ``size`` column, bytes (for all-gather the whole output, for reduce-scatter the whole input)."""
    count: int
    """The ``count`` column, elements."""
    dtype: str
    """The ``type`` column (``float``, ``bfloat16`` ...)."""
    redop: str | None
    """The ``redop`` column (``sum``, ``none``), None in layouts without it."""
    root: int | None
    """The ``root`` column (-1 when the collective has no root), None in layouts without it."""
    out_of_place: NcclTestsTiming
    """The out-of-place columns."""
    in_place: NcclTestsTiming | None
    """The in-place columns, None when the table has none or prints ``N/A`` times."""
    line: int
    """1-based line number in the log."""


@dataclass(frozen=True, slots=True, kw_only=True)
class NcclTestsRun:
    """One run: a header, its devices and its table."""

    op: Collective | None
    """The collective, from ``Collective test concluded: X_perf``, a command line, or the file name; None if unknown."""
    gpus: int | None
    """Ranks taking part: the ``Rank`` lines under ``# Using devices``; None when the log lists none."""
    nodes: int | None
    """Distinct host names among the ranks; None when the log lists none."""
    hosts: tuple[str, ...]
    """Host names, in rank order of first appearance."""
    devices: tuple[str, ...]
    """Device names, in rank order (e.g. ``NVIDIA H100 80GB HBM3``)."""
    threads: int | None
    """``nThread`` from the header."""
    gpus_per_thread: int | None
    """``nGpus`` from the header (GPUs driven by each thread of each process)."""
    library_version: str | None
    """``NCCL version X`` / ``RCCL version : X`` when the log prints it."""
    avg_busbw_bytes_per_s: float | None
    """``# Avg bus bandwidth`` line, bytes/s."""
    rows: tuple[NcclTestsRow, ...]
    """The table rows, in log order (empty when they were handed to ``on_row`` instead)."""
    first_line: int
    """1-based line where the run starts."""
    row_count: int = 0
    """Rows in its table (kept in :attr:`rows`, or handed to ``on_row``)."""


@dataclass(slots=True)
class _Builder:
    first_line: int
    threads: int | None = None
    gpus_per_thread: int | None = None
    ranks: dict[int, tuple[str, str]] = field(default_factory=dict)
    version: str | None = None
    avg: float | None = None
    op: Collective | None = None
    columns: list[str] | None = None
    rows: list[NcclTestsRow] = field(default_factory=list)
    in_table: bool = False
    row_count: int = 0

    def build(self, op_hint: Collective | None) -> NcclTestsRun:
        order = sorted(self.ranks)
        hosts: list[str] = []
        for r in order:
            if self.ranks[r][0] not in hosts:
                hosts.append(self.ranks[r][0])
        return NcclTestsRun(
            op=self.op or op_hint, gpus=len(order) or None, nodes=len(hosts) or None,
            hosts=tuple(hosts), devices=tuple(self.ranks[r][1] for r in order),
            threads=self.threads, gpus_per_thread=self.gpus_per_thread, library_version=self.version,
            avg_busbw_bytes_per_s=self.avg, rows=tuple(self.rows), first_line=self.first_line,
            row_count=self.row_count)


def _where(source: str, lineno: int) -> str:
    return f"{source}:{lineno}"


def _columns(line: str) -> list[str] | None:
    """The column names of a header line such as ``#  size  count  type  redop  root  time ...``."""
    names = line.lstrip("#").split()
    if "size" in names and "time" in names and "busbw" in names and "algbw" in names:
        return names
    return None


_MAX = {"size": 2.0**60, "count": 2.0**60, "time": 1e12, "algbw": 1e9, "busbw": 1e9}
"""Largest value a column may hold (size/count 1 EiB, time 1e12 us = 11.6 days, bandwidths 1e9 GB/s):
beyond them a row is no measurement, and its numbers would overflow the fit."""


def _number(token: str, what: str, where: str, line: str) -> float:
    try:
        value = float(token)
    except ValueError:
        raise InputError(f"{where}: not nccl-tests output: {what} {_short(token)} is not a number "
                         f"in {_short(line.strip())}") from None
    if not math.isfinite(value) or not 0 <= value <= _MAX[what]:
        raise InputError(f"{where}: {what} must be a finite number in [0, {_MAX[what]:.4g}], got {_short(token)}")
    return value


def _short(text: str) -> str:
    """``repr(text)``, at most ~60 characters (a 180-digit number is shown by its length)."""
    shown = repr(text)
    return shown if len(shown) <= 60 else f"{shown[:40]}... ({len(text)} characters)"


def _timing(tokens: dict[str, str], suffix: str, where: str, line: str) -> NcclTestsTiming | None:
    time_tok = tokens.get("time" + suffix)
    if time_tok is None or time_tok.upper() == "N/A":
        return None
    wrong = tokens.get("#wrong" + suffix, tokens.get("error" + suffix, tokens.get("wrong" + suffix, "")))
    return NcclTestsTiming(
        time_s=_number(time_tok, "time", where, line) * US,
        algbw_bytes_per_s=_number(tokens["algbw" + suffix], "algbw", where, line) * GB,
        busbw_bytes_per_s=_number(tokens["busbw" + suffix], "busbw", where, line) * GB,
        wrong=wrong)


def _is_number(token: str) -> bool:
    try:
        float(token)
    except ValueError:
        return False
    return True


MAX_LOG_ROWS = 10_000_000
"""Most table rows read from one log (10 million, ~1.6 GB of nccl-tests output): past it the log is
refused rather than parsed for many minutes."""


def _row(columns: list[str], line: str, lineno: int, source: str) -> NcclTestsRow:
    where = _where(source, lineno)
    values = line.split()
    if len(values) != len(columns):
        raise InputError(f"{where}: not a nccl-tests row: expected {len(columns)} columns "
                         f"({' '.join(columns)}), got {len(values)} in {line.strip()!r}")
    tokens: dict[str, str] = {}
    seen: dict[str, int] = {}
    for name, value in zip(columns, values):
        n = seen.get(name, 0)
        seen[name] = n + 1
        tokens[name + ("" if n == 0 else "_2")] = value
    size = _number(tokens["size"], "size", where, line)
    count = _number(tokens.get("count", "0"), "count", where, line)
    out = _timing(tokens, "", where, line)
    if out is None:
        raise InputError(f"{where}: row has no out-of-place time: {line.strip()!r}")
    for name in ("type", "redop"):  # names (float, bfloat16, sum, none): a number here is no nccl-tests row
        token = tokens.get(name)
        if token is not None and _is_number(token):
            raise InputError(f"{where}: not a nccl-tests row: {name} {_short(token)} is a number, expected a "
                             f"name (float, sum ...) in {_short(line.strip())}")
    root: int | None = None
    if "root" in tokens:
        try:
            root = int(tokens["root"])
        except ValueError:
            raise InputError(f"{where}: not nccl-tests output: root {tokens['root']!r} is not an integer "
                             f"in {line.strip()!r}") from None
    return NcclTestsRow(
        size_bytes=int(size), count=int(count), dtype=tokens.get("type", ""), redop=tokens.get("redop"),
        root=root,
        out_of_place=out, in_place=_timing(tokens, "_2", where, line), line=lineno)


class _LogParser:
    """The state of one pass over a log (:func:`parse_nccl_tests`): the runs so far, the run being read, the
    collective a preamble named before its run began, and the first line that is not nccl-tests'."""

    def __init__(self, source: str, op_hint: Collective | None,
                 on_row: Callable[[int, NcclTestsRow], None] | None) -> None:
        self.source, self.op_hint, self.on_row = source, op_hint, on_row
        self.runs: list[NcclTestsRun] = []
        self.rows_read = 0
        self.seen_text = False
        self.current: _Builder | None = None
        self.preamble_op: Collective | None = None
        self.first_foreign: tuple[int, str] | None = None

    def finish(self) -> None:
        """Close the run being read (kept if it has rows)."""
        if self.current is not None and self.current.row_count:
            self.runs.append(self.current.build(self.op_hint))
        self.current = None

    def start(self, lineno: int, **header) -> _Builder:
        """Begin a run at ``lineno``, taking the collective a preamble named."""
        self.finish()
        self.current = _Builder(first_line=lineno, op=self.preamble_op, **header)
        self.preamble_op = None
        return self.current

    def comment(self, lineno: int, stripped: str) -> None:
        """A ``#`` line: a run's header, a table's columns, a rank line, the average bus bandwidth, a table's end."""
        m = _NTHREAD_RE.match(stripped)
        if m:
            self.start(lineno, threads=int(m.group(1)), gpus_per_thread=int(m.group(2)))
            return
        cols = _columns(stripped)
        if cols is not None:
            current = self.current
            if current is None or current.row_count:
                current = self.start(lineno)
            current.columns = cols
            current.in_table = True
            return
        current = self.current
        if current is None:
            return
        m = _RANK_RE.match(stripped)
        if m and not current.in_table:
            current.ranks[int(m.group(1))] = (m.group(2), m.group(3).strip())
            return
        m = _AVG_RE.match(stripped)
        if m:
            current.avg = float(m.group(1)) * GB
        if stripped.startswith(_TABLE_END):
            current.in_table = False
            op = collective_from_name(stripped) if "concluded" in stripped else None
            if op is not None:
                current.op = op

    def row(self, current: _Builder, lineno: int, stripped: str) -> None:
        """A line inside a table: a row (kept, or handed to ``on_row``), or chatter skipped."""
        if _CHATTER_RE.search(stripped):
            return
        row = _row(current.columns, stripped, lineno, self.source)
        current.row_count += 1
        self.rows_read += 1
        if self.rows_read > MAX_LOG_ROWS:
            raise InputError(f"{_where(self.source, lineno)}: more than {MAX_LOG_ROWS:,} rows (the most a log may "
                             "hold); split the log")
        if self.on_row is None:
            current.rows.append(row)
        else:
            self.on_row(current.first_line, row)

    def other(self, lineno: int, stripped: str) -> None:
        """A line outside a table: the library version, a collective's name before its run, or chatter."""
        if self.first_foreign is None:
            self.first_foreign = (lineno, stripped)
        current = self.current
        m = _VERSION_RE.match(stripped)
        if m and current is not None:
            current.version = m.group(1)
            return
        op = collective_from_name(stripped) if "_perf" in stripped else None
        if op is not None:
            if current is not None and not current.row_count and current.op is None:
                current.op = op
            else:
                self.preamble_op = op

    def result(self) -> list[NcclTestsRun]:
        """The runs, or the error that says why the log held none."""
        self.finish()
        source = self.source
        if not self.seen_text:
            raise InputError(f"{source}: empty file (expected nccl-tests *_perf output)")
        if not self.runs:
            if self.first_foreign is not None:
                lineno, text_line = self.first_foreign
                raise InputError(f"{_where(source, lineno)}: not nccl-tests output: {text_line[:80]!r} "
                                 "(expected a '# nThread ...' header and a *_perf table)")
            raise InputError(f"{source}: no *_perf table found (expected a column header "
                             "'#  size  count  type ... time  algbw  busbw' followed by rows)")
        return self.runs


def parse_nccl_tests(text: str | Iterable[str], *, source: str = "<log>", op_hint: Collective | None = None,
                     on_row: Callable[[int, NcclTestsRow], None] | None = None) -> list[NcclTestsRun]:
    """Parse nccl-tests output (its text, or its lines as they stream from a file) into its runs (in
    log order).

    ``op_hint`` is used for runs whose log does not name the collective (for
    instance taken from the file name). With ``on_row``, each row is handed to
    ``on_row(run.first_line, row)`` as it is read and not kept (a 100 MB log holds ~600,000 rows;
    the caller pools them), and the runs carry only :attr:`NcclTestsRun.row_count`. Raises
    :class:`InputError` naming the line for an empty file, a file with no ``*_perf`` table, a
    malformed line inside a table, or more than :data:`MAX_LOG_ROWS` rows.
    """
    lines = text.splitlines() if isinstance(text, str) else text
    parser = _LogParser(source, op_hint, on_row)
    for lineno, raw in enumerate(lines, start=1):
        stripped = raw.rstrip().strip()
        if not stripped:
            continue
        parser.seen_text = True
        current = parser.current
        if stripped.startswith("#"):
            parser.comment(lineno, stripped)
        elif current is not None and current.in_table and current.columns is not None:
            parser.row(current, lineno, stripped)
        else:
            parser.other(lineno, stripped)
    return parser.result()


def read_nccl_tests(path: str | Path) -> list[NcclTestsRun]:
    """Read a nccl-tests log file; the file name is the collective's fallback name (``all_gather_perf.log``)."""
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8", errors="replace")
    except IsADirectoryError:
        raise InputError(f"{p}: is a directory, expected a nccl-tests log file") from None
    return parse_nccl_tests(text, source=str(p), op_hint=collective_from_name(p.name))
