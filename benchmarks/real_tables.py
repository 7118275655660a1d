"""The real all-reduce tables under tests/data/nccl_tests/ as (size, measured time) rows, with their preset.

Three kinds of file (tests/data/nccl_tests/preset_matches.json says which preset each matches):

* ``matched``: nccl-tests / rccl-tests output, read with :func:`commcost.calibrate.nccl_tests.read_nccl_tests`
  (out-of-place time);
* ``busbw_tables``: a vendor page's markdown table of message size and all-reduce bus bandwidth
  (in-place). Sizes are printed loosely (``65K``, ``132K``, ``1G`` for 2**16, 2**17, 2**30): each is
  the power of two nearest the printed decimal value. Time is ``t = f S / busbw`` with nccl-tests'
  all-reduce bus factor ``f = 2(n-1)/n`` (doc/PERFORMANCE.md);
* ``scaling_tables``: one message size, busbw per node count (8 ranks per node), out-of-place columns;
* ``busbw_grid_tables``: a report's markdown row of bus bandwidth (GB/s) for one collective under a header of
  binary sizes (``64 KiB`` ... ``8 GiB``); the collective is the row's first word (``allgather (r1)``), time
  ``t = f S / busbw`` with nccl-tests' bus factor of that collective (doc/PERFORMANCE.md: ``(n-1)/n`` for
  all-gather, reduce-scatter and all-to-all, ``2(n-1)/n`` for all-reduce);
* ``scaling_grid_tables``: a report's markdown table of busbw per node count (rows ``2n (16)``: nodes and
  ranks) and per algorithm column, at one message size: ``[preset, size, collective, column]``, time by the
  collective's bus factor as above.

tests/data/nccl_tests/split.json assigns every table's system to the tuning set or the held-out set.
Used by benchmarks/accuracy_nccl_tests.py and tests/comm/test_accuracy_split.py.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass
from pathlib import Path

DATA = Path(__file__).resolve().parent.parent / "tests" / "data" / "nccl_tests"
_UNIT = {"": 1.0, "K": 1e3, "M": 1e6, "G": 1e9}


@dataclass(frozen=True, slots=True, kw_only=True)
class Row:
    """One measured all-reduce."""

    size_bytes: int
    """Message size S, bytes (nccl-tests' size column)."""
    time_s: float
    """Measured time, seconds."""
    nodes: int
    """Nodes the group spans."""
    gpus: int
    """Ranks P."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Table:
    """One real table and the preset its system matches."""

    name: str
    """File name under tests/data/nccl_tests/."""
    system: str
    """The system (cluster or machine type) in split.json."""
    split: str
    """``tuning`` or ``heldout``."""
    preset: str
    """commcost system preset."""
    rows: tuple[Row, ...]
    """Every row of the table."""
    nvls: bool = True
    """False: the run set NCCL_NVLS_ENABLE=0 (preset_matches.json ``run_options``, with its source)."""
    op: str = "all_reduce"
    """The collective the table measured (from the log's ``*_perf`` name)."""
    gpus_per_node: int | None = None
    """Ranks per node when the run used fewer than the preset's (preset_matches.json's 4th entry)."""

    @property
    def scope(self) -> str:
        """``one_node`` or ``multi_node`` (every row of a table has the same nodes)."""
        return "one_node" if self.rows and self.rows[0].nodes == 1 else "multi_node"

    def group(self, row: Row):
        """``(topology, P)`` of ``row`` on the table's preset, as the run was configured."""
        from commcost.comm.systems import system_group

        return system_group(self.preset, nodes=row.nodes, gpus=row.gpus, nvls=self.nvls,
                            gpus_per_node=self.gpus_per_node)


def _bus_factor(P: int) -> float:
    return 2 * (P - 1) / P


def _busbw_rows(path: Path, nodes: int, P: int) -> list[Row]:
    out = []
    for line in path.read_text(encoding="utf-8").splitlines():
        m = re.fullmatch(r"\|\s*(\d+)([KMG]?)\s*\|\s*([\d.]+)\s*\|", line.strip())
        if m:
            S = 2 ** round(math.log2(float(m.group(1)) * _UNIT[m.group(2)]))
            busbw = float(m.group(3)) * 1e9
            out.append(Row(size_bytes=S, time_s=_bus_factor(P) * S / busbw, nodes=nodes, gpus=P))
    return out


def _scaling_rows(path: Path, size_bytes: int) -> list[Row]:
    out = []
    for line in path.read_text(encoding="utf-8").splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 5 and cells[0].isdigit():
            n = int(cells[0])
            P = 8 * n
            for busbw in (float(cells[1]), float(cells[3])):  # baseline and adaptive routing, out-of-place
                out.append(Row(size_bytes=size_bytes, time_s=_bus_factor(P) * size_bytes / (busbw * 1e9),
                               nodes=n, gpus=P))
    return out


_GRID_OPS = {"allreduce": "all_reduce", "allgather": "all_gather", "reducescatter": "reduce_scatter",
             "alltoall": "all_to_all"}
_BINARY = {"B": 1, "KiB": 2 ** 10, "MiB": 2 ** 20, "GiB": 2 ** 30}


def _grid_rows(path: Path, nodes: int, P: int) -> tuple[str, list[Row]]:
    """The collective and rows of a ``busbw_grid_tables`` file: one header of sizes, one row of busbw."""
    cells = [[c.strip() for c in line.strip().strip("|").split("|")]
             for line in path.read_text(encoding="utf-8").splitlines() if line.strip().startswith("|")]
    header, row = cells[0], cells[-1]
    op = _GRID_OPS[row[0].split()[0]]
    factor = 2 * (P - 1) / P if op == "all_reduce" else (P - 1) / P
    out = []
    for size, busbw in zip(header[1:], row[1:]):
        number, unit = size.split()
        S = int(float(number) * _BINARY[unit])
        out.append(Row(size_bytes=S, time_s=factor * S / (float(busbw) * 1e9), nodes=nodes, gpus=P))
    return op, out


def _scaling_grid_rows(path: Path, size_bytes: int, op: str, column: str) -> list[Row]:
    """The rows of a ``scaling_grid_tables`` file: one row per node count, busbw in the named column."""
    cells = [[c.strip().strip("*") for c in line.strip().strip("|").split("|")]
             for line in path.read_text(encoding="utf-8").splitlines() if line.strip().startswith("|")]
    at = cells[0].index(column)
    out = []
    for row in cells[1:]:
        m = re.fullmatch(r"(\d+)n \((\d+)\)", row[0])
        if m:
            nodes, P = int(m.group(1)), int(m.group(2))
            factor = 2 * (P - 1) / P if op == "all_reduce" else (P - 1) / P
            out.append(Row(size_bytes=size_bytes, time_s=factor * size_bytes / (float(row[at]) * 1e9),
                           nodes=nodes, gpus=P))
    return out


def load_tables() -> list[Table]:
    """Every matched table, in split.json order (tuning first)."""
    from commcost.calibrate.nccl_tests import read_nccl_tests

    matches = json.loads((DATA / "preset_matches.json").read_text(encoding="utf-8"))
    split = json.loads((DATA / "split.json").read_text(encoding="utf-8"))
    out = []
    for side in ("tuning", "heldout"):
        for system, entry in split[side].items():
            for name in entry["tables"]:
                path = DATA / name
                op, G = "all_reduce", None
                if name in matches["matched"]:
                    preset, nodes, P, *rest = matches["matched"][name]
                    G = rest[0] if rest else None
                    run = read_nccl_tests(path)[0]
                    op = run.op.value
                    rows = [Row(size_bytes=r.size_bytes, time_s=r.out_of_place.time_s, nodes=nodes, gpus=P)
                            for r in run.rows]
                elif name in matches["busbw_tables"]:
                    preset, nodes, P = matches["busbw_tables"][name]
                    rows = _busbw_rows(path, nodes, P)
                elif name in matches.get("busbw_grid_tables", {}):
                    preset, nodes, P = matches["busbw_grid_tables"][name]
                    op, rows = _grid_rows(path, nodes, P)
                elif name in matches.get("scaling_grid_tables", {}):
                    preset, size, op, column = matches["scaling_grid_tables"][name]
                    rows = _scaling_grid_rows(path, size, op, column)
                else:
                    preset, size = matches["scaling_tables"][name]
                    rows = _scaling_rows(path, size)
                options = matches.get("run_options", {}).get(name, {})
                out.append(Table(name=name, system=system, split=side, preset=preset, rows=tuple(rows),
                                 nvls=bool(options.get("nvls", True)), op=op, gpus_per_node=G))
    return out
