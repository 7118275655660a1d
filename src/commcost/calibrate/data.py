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
import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Literal

from commcost.calibrate.fit import Sample
from commcost.calibrate.nccl_tests import parse_nccl_tests, collective_from_name
from commcost.calibrate.profile import write_atomic
from commcost.comm.collectives import Collective
from commcost.errors import InputError

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


def _row(d: dict[str, Any], where: str) -> MeasurementRow:
    missing = [c for c in COLUMNS if c not in d or d[c] in (None, "")]
    if missing:
        raise InputError(f"{where}: missing column(s) {', '.join(missing)}")
    try:
        return MeasurementRow(
            op=str(d["op"]), gpus=int(d["gpus"]), size_bytes=int(float(d["size_bytes"])),
            count=int(float(d["count"])), dtype=str(d["dtype"]), time_s=float(d["time_s"]),
            time_min_s=float(d["time_min_s"]), time_max_s=float(d["time_max_s"]),
            algbw_bytes_per_s=float(d["algbw_bytes_per_s"]), busbw_bytes_per_s=float(d["busbw_bytes_per_s"]),
            iters=int(d["iters"]))
    except ValueError as exc:
        raise InputError(f"{where}: bad value: {exc}") from None


def _parse_measurement(text: str, source: str) -> Measurement | None:
    """The measurement in ``text``, or None when ``text`` is not a commcost measurement file."""
    stripped = text.lstrip()
    if stripped.startswith("{"):
        try:
            obj = json.loads(text)
        except json.JSONDecodeError as exc:
            raise InputError(f"{source}: invalid JSON at line {exc.lineno}: {exc.msg}") from None
        if not isinstance(obj, dict) or obj.get("kind") != "commcost-measurement":
            raise InputError(f"{source}: a JSON file that is not a commcost measurement "
                             "(expected \"kind\": \"commcost-measurement\")")
        if obj.get("version") != MEASUREMENT_VERSION:
            raise InputError(f"{source}: measurement version {obj.get('version')!r} is not supported "
                             f"(expected {MEASUREMENT_VERSION})")
        rows = obj.get("rows")
        if not isinstance(rows, list):
            raise InputError(f"{source}: field 'rows' must be a list")
        return Measurement(rows=tuple(_row(r if isinstance(r, dict) else {}, f"{source}: rows[{i}]")
                                      for i, r in enumerate(rows)),
                           provenance=obj.get("provenance") or {})
    lines = text.splitlines()
    provenance: dict[str, Any] = {}
    body_start = None
    for i, line in enumerate(lines):
        if line.startswith("#"):
            if ":" in line and i > 0:
                key, _, value = line[1:].partition(":")
                try:
                    provenance[key.strip()] = json.loads(value.strip())
                except json.JSONDecodeError:
                    provenance[key.strip()] = value.strip()
            continue
        if not line.strip():
            continue
        body_start = i
        break
    if body_start is None or not lines[body_start].startswith("op,"):
        return None
    reader = csv.DictReader(lines[body_start:])
    rows = tuple(_row(d, f"{source}:{body_start + 2 + n}") for n, d in enumerate(reader))
    return Measurement(rows=rows, provenance=provenance)


def read_measurement(path: str | Path) -> Measurement:
    """Read a commcost measurement file (CSV or JSON)."""
    p = Path(path)
    text = p.read_text(encoding="utf-8", errors="replace")
    m = _parse_measurement(text, str(p))
    if m is None:
        raise InputError(f"{p}: not a commcost measurement file (expected a CSV header starting with 'op,')")
    return m


def _choose(groups: dict[tuple[Collective, int], list[Sample]], op: Collective | None, gpus: int | None,
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


def load_series(path: str | Path, *, op: Collective | None = None, gpus: int | None = None,
                placement: Placement = "best") -> Series:
    """The (size, time) points of one collective in a measurement file or a nccl-tests log.

    ``op`` and ``gpus`` choose when the file holds several; otherwise the file's own
    header decides (all-reduce is preferred when several collectives are present).
    For nccl-tests logs ``placement`` picks the out-of-place time, the in-place
    time, or (``best``) the smaller of the two (nccl-tests runs both back to back;
    the smaller is the one less disturbed by noise). Zero-byte rows are skipped.
    """
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8", errors="replace")
    except IsADirectoryError:
        raise InputError(f"{p}: is a directory, expected a measurement file or nccl-tests log") from None
    if not text.strip():
        raise InputError(f"{p}: empty file (expected a commcost measurement or nccl-tests output)")
    groups: dict[tuple[Collective, int], list[Sample]] = {}
    measurement = _parse_measurement(text, str(p))
    if measurement is not None:
        kind, provenance = "commcost-measure", dict(measurement.provenance)
        for row in measurement.rows:
            try:
                row_op: Collective | None = Collective(row.op)
            except ValueError:
                row_op = collective_from_name(row.op)
            if row_op is None:
                valid = ", ".join(c.value for c in Collective)
                raise InputError(f"{p}: unknown collective {row.op!r} (valid: {valid})")
            if row.size_bytes > 0:
                groups.setdefault((row_op, row.gpus), []).append(Sample(size_bytes=row.size_bytes, time_s=row.time_s))
    else:
        kind = "nccl-tests"
        runs = parse_nccl_tests(text, source=str(p), op_hint=collective_from_name(p.name))
        provenance = {}
        for run in runs:
            run_op = run.op or op
            run_gpus = run.gpus or gpus
            if run_op is None:
                raise InputError(f"{p}:{run.first_line}: the log does not say which collective it measured "
                                 "(no 'Collective test concluded' line, command line or file name); pass --op")
            if run_gpus is None:
                raise InputError(f"{p}:{run.first_line}: the log lists no ranks under '# Using devices'; "
                                 "pass --gpus")
            for row in run.rows:
                t = row.out_of_place.time_s
                if placement == "in_place":
                    if row.in_place is None:
                        raise InputError(f"{p}:{row.line}: no in-place time in this row; use --placement "
                                         "out_of_place or best")
                    t = row.in_place.time_s
                elif placement == "best" and row.in_place is not None:
                    t = min(t, row.in_place.time_s)
                if row.size_bytes > 0 and t > 0:
                    groups.setdefault((run_op, run_gpus), []).append(Sample(size_bytes=row.size_bytes, time_s=t))
            provenance.setdefault("runs", []).append({
                "op": run_op.value, "gpus": run_gpus, "nodes": run.nodes, "hosts": list(run.hosts),
                "device": run.devices[0] if run.devices else None, "library_version": run.library_version,
                "first_line": run.first_line})
        provenance["placement"] = placement
    if not groups:
        raise InputError(f"{p}: no measured sizes above 0 bytes")
    chosen_op, chosen_gpus, note = _choose(groups, op, gpus, str(p))
    if chosen_gpus < 2:
        raise InputError(f"{p}: {chosen_op.value} was measured on {chosen_gpus} rank; a collective needs >= 2")
    provenance.update({"source": str(p), "source_kind": kind})
    return Series(op=chosen_op, gpus=chosen_gpus, samples=tuple(groups[(chosen_op, chosen_gpus)]),
                  source_kind=kind, provenance=provenance, note=note)
