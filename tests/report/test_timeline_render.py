"""Direct tests of ``report/timeline.py`` and ``report/bucket_advice.py``: a one-bucket step rendered
in-process with every number by hand, the ``--bucket auto`` sweep, strict JSON whose numbers name their unit."""

from __future__ import annotations

import pytest

from commcost.comm.link import Link
from commcost.comm.model import FlatLinkModel
from commcost.report._width import wrap_lines
from commcost.report.bucket_advice import bucket_advice_to_dict, render_bucket_advice
from commcost.report.timeline import (TimelineContext, render_sweep_text, render_timeline_text, sweep_to_dict,
                                      timeline_to_dict)
from commcost.step.bucket_advice import recommend_buckets
from commcost.step.ddp_buckets import DdpBucketCaps, ddp_bucket_caps
from commcost.step.sweep import sweep_buckets
from commcost.step.timeline import TimelineInputs, simulate_timeline
from conftest import numbers_without_a_unit, strict_round_trip, wide_lines

# P = 2 on B = 1e9 B/s, a = 1 ms; N = 1e6 bf16 gradients: S = 2e6 B in one bucket (cap 25 MiB > S)
# T = 2(P-1)a + 2(P-1)/P S/B = 2 ms + 1 * 2e6 / 1e9 s = 2 ms + 2 ms = 4 ms
INP = TimelineInputs(gpus=2, comm=FlatLinkModel(link=Link(bandwidth_bytes_per_s=1e9, latency_s=1e-3)),
                     step_s=0.1, params=1e6)
ONE_BUCKET = DdpBucketCaps(bucket_cap_bytes=25 * 2**20, first_bucket_cap_bytes=25 * 2**20)
CTX = TimelineContext(inputs=INP, model_label="no model shape: uniform rate", caps_note="one 25 MiB bucket")


def _flat(text: str) -> str:
    return " ".join(text.split())


def test_one_bucket_by_hand():
    tl = simulate_timeline(INP, ONE_BUCKET)
    raw = render_timeline_text(CTX, tl)
    assert wide_lines(wrap_lines(raw, 80)) == []
    text = _flat(raw)
    # the one bucket is ready when backward ends, t_c = 100 ms; its all-reduce runs 100 -> 104 ms
    assert "P = 2 GPUs, B = 1 GB/s per rank, a = 1000 us per ring step" in text
    assert "gradient S = 2,000,000 B = 1.91 MiB (2 B per element)" in text   # 2e6 / 2**20 = 1.907 MiB
    assert "1 1.91 MiB 100.00 100.00 104.00 4.00 ms" in text                 # ready, start, end in ms; T
    assert "T_w = sum of 1 all-reduces = 4.00 ms" in text
    assert "E = end of last all-reduce - t_e = 4.00 ms (100.0% of T_w)" in text
    # step = k t_c + E + t_opt = 100 + 4 + 0 = 104 ms; efficiency 100 / 104 = 96.2%
    assert "k t_c + E + t_opt = 104.00 ms" in text and "= 96.2%" in text
    # W = 2/3 * 100 ms = 66.67 ms > T: perfect overlap 100 + max(0, 4 - 66.67) = 100 ms; none 104 ms
    assert "backward window W = 0.667 * t_c = 66.67 ms (33.33 to 100.00 ms)" in text
    assert "perfect overlap k t_c + max(0, T_w - W) + t_opt = 100.00 ms" in text
    assert "no overlap k t_c + T_w + t_opt = 104.00 ms" in text


def test_one_bucket_dict_by_hand_and_strict():
    d = strict_round_trip(timeline_to_dict(simulate_timeline(INP, ONE_BUCKET)))
    assert numbers_without_a_unit(d) == []
    assert d["message_bytes"] == 2e6 and d["wire_s"] == pytest.approx(4e-3) and d["exposed_s"] == pytest.approx(4e-3)
    assert d["step_s"] == pytest.approx(0.104) and d["efficiency"] == pytest.approx(100 / 104)
    assert d["bounds"] == pytest.approx({"no_overlap_s": 0.104, "perfect_overlap_s": 0.1})
    assert d["buckets"] == [pytest.approx({"size_bytes": 2e6, "ready_s": 0.1, "start_s": 0.1, "end_s": 0.104})]
    assert d["band_class"] is None and d["wire_band_s"] is None


def test_sweep_and_advice_render_with_units():
    inp = TimelineInputs(gpus=32, comm=FlatLinkModel(link=Link(bandwidth_bytes_per_s=25e9, latency_s=20e-6)),
                         step_s=0.4, params=1.3e9)
    default = simulate_timeline(inp, ddp_bucket_caps(None))
    sweep = sweep_buckets(inp)
    text = render_sweep_text(CTX, sweep, default)
    # the renderer leaves the width to the command, which prints it through wrap_lines: that fits 80 columns
    assert wide_lines(wrap_lines(text, 80)) == []
    assert "PyTorch default (25 MiB, first bucket 1 MiB)" in text and "<- best" in text
    d = strict_round_trip(sweep_to_dict(sweep, default))
    assert numbers_without_a_unit(d) == []
    assert d["pytorch_default"]["bucket_bytes"] == 25 * 2**20 and d["pytorch_default"]["first_bucket_bytes"] == 2**20
    best = d["best"]
    assert best["bucket_bytes"] in [p["bucket_bytes"] for p in d["curve"]]
    assert best["exposed_s"] <= best["min_exposed_s"] + best["tolerance_s"] * (1 + 1e-9)
    advice = recommend_buckets(inp)
    a = strict_round_trip(bucket_advice_to_dict(advice))
    assert numbers_without_a_unit(a) == [] and a["recommended_bytes"] in a["good_bytes"] + [25 * 2**20]
    line = render_bucket_advice(advice)
    assert "\n" not in line and "MiB" in line and ("recommended" in line)
    assert bucket_advice_to_dict(None) is None
