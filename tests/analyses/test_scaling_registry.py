"""scaling prices a registry model's compute with plan when --compute-ms is absent, reports each point's
step and memory verdict, and announces a knee only where the curve bends."""

from __future__ import annotations

import json
import math

import pytest

from commcost.analyses.scaling import knee, seed_inputs, scaling_curve
from commcost.cli._fabric import seed_fabric_models
from commcost.cli import main

ARGV = ["scaling", "--model", "llama2-7b", "--system", "dgx-h100", "--gpus", "8,64,1024"]


def test_registry_model_without_compute_ms_takes_plans_compute(capsys):
    assert main([*ARGV, "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)["rows"]
    assert [r["gpus"] for r in rows] == [8, 64, 1024]
    # plan of one micro-batch of 4096 tokens on one GPU: the same t_c
    assert main(["plan", "--model", "llama2-7b", "--system", "dgx-h100", "--gpus", "1", "--global-batch", "1",
                 "--micro-batch", "1", "--seq", "4096", "--json"]) == 0
    p = json.loads(capsys.readouterr().out)
    for r in rows:
        assert r["compute_s"] == pytest.approx(p["breakdown"]["compute_s"], rel=1e-12)
        # step_s per point: the analysis's own step max(t_c, T) + t_o
        assert r["step_s"] == pytest.approx(max(r["compute_s"], r["comm_s"]) + r["overhead_s"], rel=1e-12)
        # memory per point: 16 bytes a parameter (2 + 2 + 12, mixed-precision Adam) against the H100's 85 GB
        assert r["memory_states_bytes"] == pytest.approx(16 * r["params"], rel=1e-12)
        assert r["memory_fits"] is False and r["gpu"] == "h100-sxm"
    assert main(ARGV) == 0
    text = capsys.readouterr().out
    assert "t_c from plan" in text and "does not fit" in text
    assert max(len(line) for line in text.splitlines()) <= 80


def test_registry_model_without_a_system_or_compute_is_refused(capsys):
    with pytest.raises(SystemExit) as e:
        main(["scaling", "--model", "llama2-7b", "--gpus", "8"])
    assert e.value.code == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--system" in err and "--compute-ms" in err


def _slope(rows, i):
    return (rows[i].comm_s - rows[i - 1].comm_s) / math.log2(rows[i].gpus / rows[i - 1].gpus)


def test_knee_only_where_the_slope_at_least_doubles():
    # the analysis's two-tier view: 7B over NVLink nodes of 8 GPUs and InfiniBand across
    from commcost.analyses.scaling import seed_two_tier
    from commcost.comm.model import FabricModel
    from dataclasses import replace

    base = seed_inputs("7b", "nvlink", seed_fabric_models()["nvlink"])
    topo = seed_two_tier(8, 128)
    curve = scaling_curve(replace(base, comm=FabricModel(topology=topo), fabric=topo.name, flat_ring_max_gpus=None,
                                  flat_ring_note=None))
    k = knee(curve)
    assert k is not None and k.gpus == 16 and k.crosses_nodes
    rows = list(curve.rows)
    i = rows.index(k)
    inside = [_slope(rows, j) for j in range(1, i) if rows[j - 1].gpus > 1]
    assert _slope(rows, i) >= 2 * max(inside)
    # the same curve from 8 GPUs on: no interval inside the node, nothing says it bends
    short = scaling_curve(replace(base, comm=FabricModel(topology=topo), fabric=topo.name, flat_ring_max_gpus=None,
                                  flat_ring_note=None, gpu_counts=(8, 16, 32)))
    assert knee(short) is None


def test_no_flags_text_fits_80_columns(capsys):
    assert main(["scaling"]) == 0
    out = capsys.readouterr().out
    assert max(len(line) for line in out.splitlines()) <= 80
    assert "seed" not in out.lower()
