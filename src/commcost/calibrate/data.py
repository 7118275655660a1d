"""Measurement files (written by ``commcost measure``) and the one reader ``fit``/``validate`` use.

CSV layout (``-o FILE.csv``)::

    # commcost-measurement version 1
    # backend: "gloo"                      <- provenance, one "# key: JSON value" line each
    # world_size: 2
    op,gpus,size_bytes,count,dtype,time_s,time_min_s,time_max_s,algbw_bytes_per_s,busbw_bytes_per_s,iters
    all_reduce,2,1024,256,float32,3.1e-05,2.9e-05,3.4e-05,3.3e+07,3.3e+07,20

JSON layout (``-o FILE.json``): ``{"version": 1, "kind": "commcost-measurement",
"provenance": {...}, "rows": [{same keys as the CSV columns}, ...]}``.

``time_s`` is the median time of one collective over the timed iterations, as the
slowest rank saw it (each rank times ``iters`` calls after a barrier; the maximum
over ranks of the per-rank medians is kept); ``time_min_s``/``time_max_s`` are the
fastest and slowest single-iteration times on rank 0.
:func:`load_series` reads these files and raw nccl-tests logs alike.
"""

from __future__ import annotations

import csv
import io
import itertools
import json
import math
import os
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Literal

from commcost.calibrate.fit import Sample
from commcost.calibrate.nccl_tests import parse_nccl_tests, collective_from_name
from commcost.core.files import write_atomic
from commcost.comm.collectives import Collective
from commcost.core.errors import InputError
from commcost.core.errors import long_integer_field

from commcost.calibrate.series_files import (_is_measurement_head, _named_lines, _open_lines, _Pool, _read_all)

__all__ = ["MEASUREMENT_VERSION", "COLUMNS", "MeasurementRow", "Measurement", "Series",
           "write_measurement", "read_measurement", "load_series"]

MEASUREMENT_VERSION = 1
COLUMNS = ("op", "gpus", "size_bytes", "count", "dtype", "time_s", "time_min_s", "time_max_s",
           "algbw_bytes_per_s", "busbw_bytes_per_s", "iters")
Placement = Literal["best", "out_of_place", "in_place"]


@dataclass(frozen=True, slots=True, kw_only=True)
class MeasurementRow:
    """One measured size of one collective."""

    op: str
    """Collective name (a :class:`~commcost.comm.collectives.Collective` value)."""
    gpus: int
    """Ranks taking part."""
    size_bytes: int
    """Message size as nccl-tests counts it, bytes."""
    count: int
    """Elements in that message."""
    dtype: str
    """Element type (``float32`` ...)."""
    time_s: float
    """Median time of one collective, slowest rank, seconds."""
    time_min_s: float
    """Fastest single iteration on rank 0, seconds."""
    time_max_s: float
    """Slowest single iteration on rank 0, seconds."""
    algbw_bytes_per_s: float
    """``size / time``, bytes/s."""
    busbw_bytes_per_s: float
    """``algbw * bus_bandwidth_factor(op, gpus)``, bytes/s."""
    iters: int
    """Timed iterations."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Measurement:
    """A measurement file: rows and provenance."""

    rows: tuple[MeasurementRow, ...]
    """Measured rows, in measurement order."""
    provenance: dict[str, Any] = field(default_factory=dict)
    """backend, world_size, nodes, hosts, torch version, date, ..."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Series:
    """The points of one collective at one group size, ready to fit."""

    op: Collective
    """The collective."""
    gpus: int
    """Ranks taking part."""
    samples: tuple[Sample, ...]
    """Measured (size, time) points."""
    source_kind: str
    """``nccl-tests`` or ``commcost-measure``."""
    provenance: dict[str, Any]
    """What the source says about itself."""
    note: str = ""
    """How the series was chosen when the file held several (empty if it held one)."""
    warnings: tuple[str, ...] = ()
    """What the reader skipped or doubts (rows timed at 0, one size measured with conflicting times),
    each naming the file and row; the CLI prints them on stderr."""
    rows: int = 0
    """Rows read for this series; a size measured in several rows is one sample (their median)."""

    @property
    def listed_nodes(self) -> int | None:
        """The nodes the source lists for this series' runs (a nccl-tests log's hosts under ``# Using
        devices``) when they name one count; None when it lists none, or several."""
        runs = self.provenance.get("runs", [])
        listed = {r.get("nodes") for r in runs if r.get("gpus") == self.gpus and r.get("nodes")}
        return listed.pop() if len(listed) == 1 else None


def _to_csv(m: Measurement) -> str:
    buf = io.StringIO()
    buf.write(f"# commcost-measurement version {MEASUREMENT_VERSION}\n")
    for key, value in m.provenance.items():
        buf.write(f"# {key}: {json.dumps(value)}\n")
    writer = csv.DictWriter(buf, fieldnames=COLUMNS, lineterminator="\n")
    writer.writeheader()
    for row in m.rows:
        writer.writerow({k: (repr(v) if isinstance(v, float) else v) for k, v in asdict(row).items()})
    return buf.getvalue()


def write_measurement(m: Measurement, path: str | Path) -> None:
    """Write ``m`` as JSON (``.json``) or CSV (anything else), atomically."""
    if str(path).lower().endswith(".json"):
        text = json.dumps({"version": MEASUREMENT_VERSION, "kind": "commcost-measurement",
                           "provenance": m.provenance, "rows": [asdict(r) for r in m.rows]}, indent=2) + "\n"
    else:
        text = _to_csv(m)
    write_atomic(path, text)


_COLUMN_BOUNDS: dict[str, tuple[type, float, float]] = {
    "gpus": (int, 1, 10**6), "size_bytes": (int, 0, 2**60), "count": (int, 0, 2**60), "iters": (int, 1, 10**9),
    "time_s": (float, 0, 1e6), "time_min_s": (float, 0, 1e6), "time_max_s": (float, 0, 1e6),
    "algbw_bytes_per_s": (float, 0, 1e18), "busbw_bytes_per_s": (float, 0, 1e18),
}
"""Column -> (type, smallest, largest): what a measured row can hold (a time of a million seconds, a
size of 2**60 bytes or 10**6 ranks is no measurement), so nothing downstream overflows."""


def _cell(d: dict[str, Any], column: str, where: str) -> Any:
    """One cell of a row, converted and checked; the error names the file, the row and the column."""
    value = d[column]
    if column in ("op", "dtype"):
        if not isinstance(value, str):
            raise InputError(f"{where}: column {column!r} must be a name, got {_shown(value)}")
        return value
    kind, lo, hi = _COLUMN_BOUNDS[column]
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        raise InputError(f"{where}: column {column!r} must be a number, got {_shown(value)}")
    if isinstance(value, str):
        try:
            number: float = float(value.strip())
        except ValueError:
            raise InputError(f"{where}: column {column!r} must be a number, got {_shown(value)}") from None
    else:
        number = value
    if isinstance(number, float) and not math.isfinite(number):
        raise InputError(f"{where}: column {column!r} must be a finite number, got {_shown(value)}")
    if not lo <= number <= hi:
        raise InputError(f"{where}: column {column!r} must be between {lo:g} and {hi:g}, got {_shown(value)}")
    if kind is int and number != int(number):  # 2.5 GPUs is no count (it used to become 2)
        raise InputError(f"{where}: column {column!r} must be a whole number, got {_shown(value)}")
    return int(number) if kind is int else float(number)


def _shown(value: Any) -> str:
    """``value`` for an error message, at most 60 characters (never a 180-digit number)."""
    text = repr(value)
    return text if len(text) <= 60 else f"{text[:40]}... ({len(text)} characters)"


def _row(d: dict[str, Any], where: str) -> MeasurementRow:
    missing = [c for c in COLUMNS if c not in d or d[c] in (None, "")]
    if missing:
        raise InputError(f"{where}: missing column(s) {', '.join(missing)}")
    row = MeasurementRow(**{c: _cell(d, c, where) for c in COLUMNS})
    if _collective(row.op) is None:
        valid = ", ".join(c.value for c in Collective)
        raise InputError(f"{where}: unknown collective {_shown(row.op)} (valid: {valid})")
    return row


_COLLECTIVE_SPELLINGS = {c.value.replace("_", ""): c for c in Collective}
"""A collective's name without separators (``allreduce``) -> the collective: ``all_reduce``,
``AllReduce``, ``all-reduce`` are one name; ``allreduce_xx`` is none (it used to read as all_reduce)."""


def _collective(name: str) -> Collective | None:
    """The collective a measurement row names: its value, or the same letters in another case or
    with other separators; None for anything else."""
    try:
        return Collective(name)
    except ValueError:
        pass
    if not all(ch.isalpha() or ch in "_- " for ch in name):
        return None
    return _COLLECTIVE_SPELLINGS.get("".join(ch for ch in name.lower() if ch.isalpha()))


def _json_loads(text: str, source: str) -> Any:
    """``json.loads`` that names ``source`` when the text is not JSON or nests too deeply to read."""
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise InputError(f"{source}: invalid JSON at line {exc.lineno}: {exc.msg}") from None
    except RecursionError:
        raise InputError(f"{source}: JSON nested too deeply to read (thousands of brackets)") from None
    except ValueError:  # an integer past Python's 4,300-digit limit for int(str)

        raise InputError(f"{source}: {long_integer_field(text)} is an integer of more than 4300 digits (Python's "
                         "limit for reading one; no measured value is that long)") from None


def _parse_measurement(text: str, source: str) -> Measurement | None:
    """The measurement in ``text``, or None when ``text`` is not a commcost measurement file."""
    stripped = text.lstrip()
    if stripped.startswith("{"):
        obj = _json_loads(text, source)
        if not isinstance(obj, dict) or obj.get("kind") != "commcost-measurement":
            raise InputError(f"{source}: a JSON file that is not a commcost measurement "
                             "(expected \"kind\": \"commcost-measurement\")")
        if obj.get("version") != MEASUREMENT_VERSION:
            raise InputError(f"{source}: measurement version {obj.get('version')!r} is not supported "
                             f"(expected {MEASUREMENT_VERSION})")
        rows = obj.get("rows")
        if not isinstance(rows, list):
            raise InputError(f"{source}: field 'rows' must be a list")
        for i, r in enumerate(rows):
            if not isinstance(r, dict):
                raise InputError(f"{source}: rows[{i}] must be an object with the columns, got {_shown(r)}")
        provenance = obj.get("provenance") or {}
        if not isinstance(provenance, dict):
            raise InputError(f"{source}: field 'provenance' must be an object, got {_shown(provenance)}")
        return Measurement(rows=tuple(_row(r, f"{source}: rows[{i}]") for i, r in enumerate(rows)),
                           provenance=provenance)
    lines = text.splitlines()
    provenance: dict[str, Any] = {}
    body_start = None
    for i, line in enumerate(lines):
        if line.startswith("#"):
            if ":" in line and i > 0:
                key, _, value = line[1:].partition(":")
                try:
                    provenance[key.strip()] = json.loads(value.strip())
                except (json.JSONDecodeError, RecursionError):
                    provenance[key.strip()] = value.strip()
            continue
        if not line.strip():
            continue
        body_start = i
        break
    if body_start is None or not lines[body_start].startswith("op,"):
        return None
    reader = csv.DictReader(lines[body_start:])
    try:
        rows = tuple(_row(d, f"{source}:{body_start + 2 + n}") for n, d in enumerate(reader))
    except csv.Error as exc:
        raise InputError(f"{source}: not a readable CSV: {exc}") from None
    return Measurement(rows=rows, provenance=provenance)


def read_measurement(path: str | Path) -> Measurement:
    """Read a commcost measurement file (CSV or JSON)."""
    p = Path(path)
    text = p.read_text(encoding="utf-8", errors="replace")
    m = _parse_measurement(text, str(p))
    if m is None:
        raise InputError(f"{p}: not a commcost measurement file (expected a CSV header starting with 'op,')")
    return m


def _choose(groups: dict, op: Collective | None, gpus: int | None,
            source: str) -> tuple[Collective, int, str]:
    keys = sorted(groups, key=lambda k: (k[0].value, k[1]))
    shown = ", ".join(f"{o.value} on {g} ranks" for o, g in keys)
    cands = [k for k in keys if (op is None or k[0] is op) and (gpus is None or k[1] == gpus)]
    if not cands:
        raise InputError(f"{source}: no measurements of "
                         f"{op.value if op else 'any collective'}{f' on {gpus} ranks' if gpus else ''} "
                         f"(the file holds: {shown})")
    ops = sorted({k[0] for k in cands}, key=lambda o: o.value)
    if len(ops) > 1:
        if Collective.ALL_REDUCE not in ops:
            raise InputError(f"{source}: holds several collectives ({shown}); choose one with --op")
        cands = [k for k in cands if k[0] is Collective.ALL_REDUCE]
    sizes = sorted({k[1] for k in cands})
    if len(sizes) > 1:
        raise InputError(f"{source}: holds several group sizes ({shown}); choose one with --gpus")
    automatic = len(keys) > 1 and op is None  # the caller did not say which collective
    note = f"chose {cands[0][0].value} on {cands[0][1]} ranks (the file holds: {shown}; --op to choose)" \
        if automatic else ""
    return cands[0][0], cands[0][1], note


def _counted(lines, total_bytes: int, progress):
    """``lines`` passed on, ``progress(read, total)`` at each further tenth of ``total_bytes`` read and at
    the end (characters counted as bytes: nccl-tests logs are ASCII)."""
    step = max(total_bytes // 10, 1)
    read, next_at = 0, step
    for line in lines:
        read += len(line)
        if read >= next_at:
            progress(min(read, total_bytes), total_bytes)
            next_at = (read // step + 1) * step
        yield line
    if read < step * 10:
        progress(total_bytes, total_bytes)


def _run_key(p: Path, run, op: Collective | None, gpus: int | None,
             missing_in_place: dict[int, int]) -> tuple[Collective, int]:
    """A nccl-tests run's ``(op, gpus)``: the log's own, else ``--op``/``--gpus``; refused when neither says, or
    when the in-place time was asked for and one of its rows has none."""
    run_op = run.op or op
    run_gpus = run.gpus or gpus
    if run_op is None:
        raise InputError(f"{p}:{run.first_line}: the log does not say which collective it measured "
                         "(no 'Collective test concluded' line, command line or file name); pass --op")
    if run_gpus is None:
        raise InputError(f"{p}:{run.first_line}: the log lists no ranks under '# Using devices'; "
                         "pass --gpus")
    if run.first_line in missing_in_place:
        raise InputError(f"{p}:{missing_in_place[run.first_line]}: no in-place time in this row; use "
                         "--placement out_of_place or best")
    return run_op, run_gpus


def _measurement_rows(fh, p: Path, head: list[str], add) -> tuple[str, dict]:
    """A commcost measurement file's rows, each handed to ``add(key, size, time, where)``; its kind and provenance."""
    text = "".join(head) + _read_all(fh, p)
    measurement = _parse_measurement(text, str(p))
    assert measurement is not None
    kind, provenance = "commcost-measure", dict(measurement.provenance)
    json_file = text.lstrip().startswith("{")
    for i, row in enumerate(measurement.rows):
        row_op = _collective(row.op)
        assert row_op is not None  # _row refused unknown names, naming the row
        add((row_op, row.gpus), row.size_bytes, row.time_s,
            f"rows[{i}]" if json_file else f"data row {i + 1}")
    return kind, provenance


def _log_rows(fh, p: Path, head: list[str], add, *, op: Collective | None, gpus: int | None, placement: Placement,
             progress) -> tuple[str, dict]:
    """A nccl-tests log's rows, streamed and pooled per run, then each run's handed to ``add(key, size, time,
    where)`` under the op and ranks it was measured on (``placement``: which of a row's two times); its kind and
    provenance."""
    kind = "nccl-tests"
    per_run: dict[int, _Pool] = {}          # run's first line -> its rows' (size, time, where)
    missing_in_place: dict[int, int] = {}   # run -> first row line with no in-place time

    def on_row(run: int, row) -> None:
        t = row.out_of_place.time_s
        if placement == "in_place":
            if row.in_place is None:
                missing_in_place.setdefault(run, row.line)
                return
            t = row.in_place.time_s
        elif placement == "best" and row.in_place is not None:
            t = min(t, row.in_place.time_s)
        pool = per_run.get(run)
        if pool is None:
            pool = per_run[run] = _Pool()
        pool.add(row.size_bytes, t, f"line {row.line}")

    lines = itertools.chain(head, _named_lines(fh, p))
    if progress is not None:
        lines = _counted(lines, os.stat(p).st_size, progress)
    runs = parse_nccl_tests(lines, source=str(p), op_hint=collective_from_name(p.name), on_row=on_row)
    provenance = {}
    for run in runs:
        run_op, run_gpus = _run_key(p, run, op, gpus, missing_in_place)
        pool = per_run.get(run.first_line)
        for size, ts in (pool.times.items() if pool else ()):
            for t in ts:  # the run's rows, merged into the series' pool (a size's rows stay together)
                add((run_op, run_gpus), size, t,
                    pool.lo[size][1] if t == pool.lo[size][0] else pool.hi[size][1])
        provenance.setdefault("runs", []).append({
            "op": run_op.value, "gpus": run_gpus, "nodes": run.nodes, "hosts": list(run.hosts),
            "device": run.devices[0] if run.devices else None, "library_version": run.library_version,
            "first_line": run.first_line})
    provenance["placement"] = placement
    return kind, provenance


def load_series(path: str | Path, *, op: Collective | None = None, gpus: int | None = None,
                placement: Placement = "best", progress=None) -> Series:
    """The (size, time) points of one collective in a measurement file or a nccl-tests log.

    ``op`` and ``gpus`` choose when the file holds several; otherwise the file's own
    header decides (all-reduce is preferred when several collectives are present).
    For nccl-tests logs ``placement`` picks the out-of-place time, the in-place
    time, or (``best``) the smaller of the two (nccl-tests runs both back to back;
    the smaller is the one less disturbed by noise). Zero-byte rows are skipped.

    A log is streamed line by line and its rows pooled by size as they come (:class:`_Pool`):
    a size measured in several rows (repeated runs, concatenated logs) is one sample, the median of
    its times, so a 100 MB log of 600,000 rows fits as fast as its few dozen sizes, in memory that
    holds one float per row. ``progress(read_bytes, total_bytes)``, where given, is called as a log
    is read: at each further tenth of the file, and at its end.
    """
    p = Path(path)
    fh = _open_lines(p)
    with fh:
        is_measurement, head = _is_measurement_head(fh, p)
        if not any(line.strip() for line in head):
            raise InputError(f"{p}: empty file (expected a commcost measurement or nccl-tests output)")
        pools: dict[tuple[Collective, int], _Pool] = {}
        warnings: list[str] = []

        def add(key: tuple[Collective, int], size_bytes: float, time_s: float, row: str) -> None:
            # a size of 0 bytes is nccl-tests' empty first row; a time of 0 is below the timer's resolution:
            # neither is a point of the curve, in a measurement file or a log alike
            if size_bytes <= 0:
                return
            if time_s <= 0:
                warnings.append(f"{p}: {row}: skipped {key[0].value} at {size_bytes:.0f} B: time 0 (below the "
                                "timer's resolution) is no point of the curve")
                return
            pool = pools.get(key)
            if pool is None:
                pool = pools[key] = _Pool()
            pool.add(size_bytes, time_s, row)

        if is_measurement:
            kind, provenance = _measurement_rows(fh, p, head, add)
        else:
            kind, provenance = _log_rows(fh, p, head, add, op=op, gpus=gpus, placement=placement, progress=progress)
    if not pools:
        raise InputError(f"{p}: no measured sizes above 0 bytes")
    chosen_op, chosen_gpus, note = _choose(pools, op, gpus, str(p))
    if chosen_gpus < 2:
        raise InputError(f"{p}: {chosen_op.value} was measured on {chosen_gpus} rank; a collective needs >= 2")
    provenance.update({"source": str(p), "source_kind": kind})
    pool = pools[(chosen_op, chosen_gpus)]
    warnings += [f"{p}: {w}" for w in pool.conflicts()]
    return Series(op=chosen_op, gpus=chosen_gpus, samples=pool.samples(),
                  source_kind=kind, provenance=provenance, note=note, warnings=tuple(warnings), rows=pool.rows)
