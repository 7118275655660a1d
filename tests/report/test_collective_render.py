"""Direct tests of ``report/collective.py``: one size and the nccl-tests-style table rendered in-process,
by hand on a flat link, 80 columns on a system preset, strict JSON whose numbers name their unit."""

from __future__ import annotations

import pytest

from commcost.analyses.collective import price_sizes
from commcost.comm.collectives import Algorithm, Collective
from commcost.comm.link import Link
from commcost.comm.model import FabricModel, FlatLinkModel
from commcost.comm.topology import place
from commcost.hardware.registry import preset_entries
from commcost.comm.systems import system_group
from commcost.report.collective import (fabric_to_dict, render_presets_text, render_size_text,
                                        render_table_text, size_to_dict)
from conftest import numbers_without_a_unit, strict_round_trip, wide_lines

LINK = Link(bandwidth_bytes_per_s=25e9, latency_s=20e-6)
S = 64 * 2**20  # 67,108,864 B


def _result(comm, size, P, requested, fabric, topology=None):
    """One size as ``commcost collective`` prices it (:func:`commcost.analyses.collective.price_sizes`)."""
    (r,) = price_sizes(comm, Collective.ALL_REDUCE, [size], P, requested, fabric=fabric, band_topology=topology)
    return r


def test_one_size_on_the_drill_link_by_hand(monkeypatch):
    monkeypatch.setenv("COLUMNS", "80")
    r = _result(FlatLinkModel(link=LINK), S, 32, Algorithm.RING, LINK)
    text = render_size_text(r, LINK, 32)
    # ring: 2(P-1) a = 62 * 20 us = 1.24 ms; 2(P-1)/P S/B = 1.9375 * 67,108,864 / 25e9 = 5.20 ms; T = 6.44 ms
    flat = " ".join(text.split())
    assert "67,108,864 B (67.11 MB, 64.00 MiB) on 32 GPUs" in flat
    assert "B = 25 GB/s per rank, a = 20 us per step" in flat
    ring = next(line for line in text.splitlines() if line.strip().startswith("ring"))
    assert "1.24 ms" in ring and "5.20 ms" in ring and "6.44 ms" in ring
    # algbw = S / T = 67,108,864 B / 6.4409 ms = 10.42 GB/s; busbw = 1.9375 x algbw = 20.19 GB/s
    # (flat: the 80-column wrap may break a sentence between words)
    assert "algbw = S/T = 10.42 GB/s" in flat and "= 20.19 GB/s" in flat
    assert wide_lines(text) == []
    d = strict_round_trip(size_to_dict(r))
    T = 62 * 20e-6 + 1.9375 * S / 25e9
    assert d["time_s"] == pytest.approx(T) and d["algbw_bytes_per_s"] == pytest.approx(S / T)
    assert d["busbw_bytes_per_s"] == pytest.approx(1.9375 * S / T)
    assert numbers_without_a_unit(d) == []
    assert strict_round_trip(fabric_to_dict(LINK, 32)) == {"kind": "flat", "bandwidth_bytes_per_s": 25e9,
                                                           "latency_s": 20e-6}


def test_table_on_a_system_fits_80_columns(monkeypatch):
    monkeypatch.setenv("COLUMNS", "80")
    topo, P = system_group("dgx-h100", nodes=2)
    comm = FabricModel(topology=topo)
    sizes = [2**k for k in range(20, 31)]  # 1 MiB .. 1 GiB
    results = [_result(comm, s, P, "auto", topo, topo) for s in sizes]
    text = render_table_text(results, topo, place(P, topo).nodes)
    assert wide_lines(text) == []
    # one row per size, its size in bytes with thousands separators (1 MiB = 1,048,576 B)
    assert "1,048,576" in text and "1,073,741,824" in text
    assert "algbw and busbw in GB/s" in text and "time us" in text
    for r in results:
        d = strict_round_trip(size_to_dict(r))
        assert numbers_without_a_unit(d) == []
        lo, hi = d["band_s"]
        assert lo <= hi
    f = strict_round_trip(fabric_to_dict(topo, 2))
    assert numbers_without_a_unit(f) == [] and f["gpus_per_node"] == 8 and f["nodes_used"] == 2


def test_single_size_on_a_system_fits_80_columns(monkeypatch):
    monkeypatch.setenv("COLUMNS", "80")
    topo, P = system_group("dgx-h100", nodes=2)
    r = _result(FabricModel(topology=topo), S, P, "auto", topo, topo)
    text = render_size_text(r, topo, 2)
    assert wide_lines(text) == []
    assert "on measured clusters of this class" in " ".join(text.split())


def test_presets_list_names_every_preset_with_its_source():
    entries = preset_entries()
    text = render_presets_text(entries)
    assert text.splitlines()[0] == "gpus:"
    assert "systems:" in text and text.count("source: ") == len(entries)
