"""Direct tests of ``report/budget.py``: the drill's budget rendered in-process, its numbers by hand with
their units in the text, and ``budget_to_dict`` strict JSON whose every number names its unit."""

from __future__ import annotations

import re

import pytest

from commcost.analyses.drill.budget import BudgetInputs, communication_budget
from commcost.comm.link import Link
from commcost.comm.model import FabricModel, FlatLinkModel
from commcost.comm.systems import system_group
from commcost.analyses.uncertainty import budget_band
from commcost.report.budget import budget_to_dict, render_budget_text
from conftest import numbers_without_a_unit, strict_round_trip

DRILL = FlatLinkModel(link=Link(bandwidth_bytes_per_s=25e9, latency_s=20e-6))
NVLINK = FlatLinkModel(link=Link(bandwidth_bytes_per_s=300e9, latency_s=20e-6))  # fix (e)3: the drill's node link


@pytest.fixture(scope="module")
def drill():
    return communication_budget(BudgetInputs(gpus=32, comm=DRILL, params=1.3e9, step_s=0.4,
                                             intra_node_comm=NVLINK))


def test_text_shows_the_ring_terms_with_units(drill):
    text = render_budget_text(drill)
    # S = 1.3e9 * 2 B = 2,600,000,000 B = 2,600.00 MB (1e6) = 2,479.55 MiB (2**20)
    assert "S = N * 2 B = 2,600,000,000 B = 2,600.00 MB = 2,479.55 MiB" in text
    # latency 2(P-1)a = 62 * 20 us = 1.24 ms; bandwidth 2(31)/32 * 2.6e9 / 25e9 = 1.9375 * 0.104 s = 201.50 ms
    assert "2(P-1)a        =      1.24 ms" in text
    assert "2(P-1)/P * S/B =    201.50 ms" in text
    assert "T              =    202.74 ms" in text                # 1.24 + 201.50
    assert "T / (k*step) = 202.74 ms / 400.00 ms = 50.7%" in text  # 202.74 / 400 = 0.5069
    # fully exposed 400 / (400 + 202.74) = 66.4%
    assert "k*step / (k*step + T)     = 66.4%" in text


def test_dict_holds_the_same_numbers_in_si(drill):
    d = strict_round_trip(budget_to_dict(drill))
    assert d["message"]["bytes"] == 2.6e9
    assert d["allreduce"]["latency_s"] == pytest.approx(62 * 20e-6)
    assert d["allreduce"]["bandwidth_s"] == pytest.approx(62 / 32 * 2.6e9 / 25e9)
    assert d["allreduce"]["total_s"] == pytest.approx(62 * 20e-6 + 62 / 32 * 2.6e9 / 25e9)
    assert d["step"]["comm_fraction"] == pytest.approx((62 * 20e-6 + 62 / 32 * 0.104) / 0.4)
    assert d["step"]["backward_window_s"] == pytest.approx(0.4 * 2 / 3)


def test_every_number_in_the_dict_names_its_unit(drill):
    assert numbers_without_a_unit(budget_to_dict(drill)) == []


def test_a_system_budget_with_its_band_is_strict_json_with_units():
    topo, P = system_group("dgx-h100", nodes=2)
    comm = FabricModel(topology=topo)
    b = communication_budget(BudgetInputs(gpus=P, comm=comm, params=1.3e9, step_s=0.4,
                                          intra_node_comm=FlatLinkModel(link=topo.intra),
                                          gpus_per_node=topo.gpus_per_node))
    band = budget_band(b, topo)
    d = strict_round_trip(budget_to_dict(b, band))
    assert numbers_without_a_unit(d) == []
    assert d["allreduce"]["band_s"] == pytest.approx(list(band.allreduce_s))
    assert "measured band" in render_budget_text(b, band)


def test_a_zero_latency_term_is_named_not_divided_by():
    # a = 0 s: latency term 2(P-1)a = 0, so "bandwidth term / latency term" has no finite value; the line
    # says the latency term is 0 instead of printing "infx" (every printed number stays finite)
    zero = FlatLinkModel(link=Link(bandwidth_bytes_per_s=25e9, latency_s=0.0))
    text = render_budget_text(communication_budget(BudgetInputs(gpus=32, comm=zero, params=1.3e9, step_s=0.4,
                                                                intra_node_comm=NVLINK)))
    assert "bandwidth-bound: the latency term is 0" in text
    assert "inf" not in text


def _rows(text: str, head: list[str]) -> list[list[str]]:
    """The table under the header whose first words are ``head``: each row's cells (a number and its unit
    as one cell)."""
    lines = text.splitlines()
    start = next(i for i, ln in enumerate(lines) if ln.split()[:len(head)] == head)
    out = []
    for ln in lines[start + 1:]:
        words = ln.split()
        if not words or not (words[0][0].isdigit()):
            break
        cells = []
        for w in words:
            if cells and w in ("us", "ms", "s", "MiB", "MB"):
                cells[-1] += " " + w
            else:
                cells.append(w)
        out.append(cells)
    return out


def test_a_system_budget_fits_80_columns_with_the_same_numbers_as_the_full_tables(drill):
    topo, P = system_group("dgx-h100", nodes=2)
    b = communication_budget(BudgetInputs(gpus=P, comm=FabricModel(topology=topo), params=1.3e9, step_s=0.4,
                                          intra_node_comm=FlatLinkModel(link=topo.intra),
                                          gpus_per_node=topo.gpus_per_node))
    narrow, full = render_budget_text(b, width=80), render_budget_text(b, width=300)
    assert max(map(len, narrow.splitlines())) <= 80 < max(map(len, full.splitlines()))
    # (f): cap, count, one bucket's latency and bandwidth, latency share, total, T/step; the full table's
    # "latency total" (its 6th cell) is left out of the narrow one
    f_rows = _rows(full, ["cap", "count"])
    assert len(f_rows) >= 2 and len(f_rows[0]) == 9  # cap, count, latency, bandwidth, share, latency total, ...
    for n, f in zip(_rows(narrow, ["cap", "count"]), f_rows, strict=True):
        assert n == f[:5] + f[6:]
    # (g): every cell the same, the global batch last ("0.25x")
    assert _rows(narrow, ["P", "latency"]) == _rows(full, ["P", "latency"]) and len(_rows(full, ["P", "latency"])) > 3
    # the drill's flat link fits 80 columns too, every number kept: (f)'s narrow table has all nine cells of
    # the full one, (g)'s every cell, and the text the same numbers as at any width (only line layout changes)
    d80, d300 = render_budget_text(drill, width=80), render_budget_text(drill, width=300)
    assert max(map(len, d80.splitlines())) <= 80
    assert _rows(d80, ["cap", "count"]) == _rows(d300, ["cap", "count"])
    assert _rows(d80, ["P", "latency"]) == _rows(d300, ["P", "latency"])
    numbers = re.compile(r"-?\d[\d,]*(?:\.\d+)?")
    assert set(numbers.findall(d80)) == set(numbers.findall(d300))
