"""The HTML reports as files (no browser): one self-contained page per command, its numbers the JSON's.

Each README example is run once with ``--json --html`` (the page and the JSON of the same run):
the page is under 3 MB, names no URL that reaches the network in any ``src``/``href``, declares a
``default-src 'none'`` policy, and every number marked with a ``data-key`` equals the JSON value
at that path. Also the bad-input rules of ``--html`` and the SVG helper's ticks, by hand.
"""

from __future__ import annotations

import json
import math
import re

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

import chromium_cdp
from chromium_cdp import NETWORK_URL, page_facts
from conftest import DATA, run_commcost
from commcost.report.html._svg import Axis, log_ticks, nice_ticks
from commcost.report.html.plan import plan_html, step_parts

reports = chromium_cdp.reports

MAX_BYTES = 3_000_000


def _at(d, path: str):
    """The value of ``d`` at a JSON path as the pages write it (``a.b[2].c``, ``steps[step 551]``)."""
    for part in re.findall(r"[^.\[\]]+|\[[^\]]+\]", path):
        if part.startswith("["):
            inner = part[1:-1]
            if inner.startswith("step "):
                d = next(s for s in d if str(s["step"]) == inner[5:])
            else:
                d = d[int(inner)]
        else:
            d = d[part]
    return d


# keys the pages add for a number of the JSON under another name
ALIASES = {"winner.step_s": "results[0].step_s", "winner.robust_step_s": "results[0].robust_step_s",
           "winner.step_interval_s[0]": "results[0].step_interval_s[0]",
           "winner.step_interval_s[1]": "results[0].step_interval_s[1]"}


@pytest.mark.parametrize("name", ("plan", "search", "trace", "timeline", "trace_ranks"))
def test_page_is_self_contained_and_its_numbers_are_the_json(reports, name):
    path, d = reports[name]
    text = path.read_text(encoding="utf-8")
    assert path.stat().st_size < MAX_BYTES
    facts = page_facts(text)
    assert [u for u in facts.urls if NETWORK_URL.search(u)] == []
    assert not re.search(r"""(?:src|href)\s*=\s*["']?\s*https?:""", text, re.I)
    assert "default-src 'none'" in text and "@import" not in text and "url(" not in text
    assert facts.values, "no number marked"
    checked = 0
    for key, value in facts.values.items():
        if key == "exposed_communication_s" and name.startswith("trace"):
            expect = max(r["exposed_communication_s"] for r in d["ranks"])
        else:
            expect = _at(d, ALIASES.get(key, key))
        assert float(value) == expect, key
        checked += 1
    assert checked >= 5


def test_step_parts_add_up_to_the_step_by_hand():
    # a made-up plan: compute 0.9 s by operator (0.6 GEMMs + 0.3 attention), bubble 0.05 s, exposed
    # TP 0.02 s + 0.01 s (two rows) and DP 0.04 s, optimizer 0.03 s: step 0.9 + 0.05 + 0.07 + 0.03 = 1.05 s
    d = {"breakdown": {"compute_s": 0.9, "pipeline_bubble_s": 0.05, "exposed_comm_s": 0.07, "optimizer_s": 0.03},
         "compute_by_operator": {"gemm_s": 0.6, "attention_s": 0.3, "casts_s": 0.0},
         "comm": [{"dimension": "tp", "exposed_s": 0.02}, {"dimension": "dp", "exposed_s": 0.04},
                  {"dimension": "tp", "exposed_s": 0.01}]}
    parts = {label: v for label, v, _, _ in step_parts(d)}
    assert parts["compute: GEMMs (projections, MLP)"] == 0.6
    assert parts["compute: attention core"] == 0.3
    assert parts["exposed TP communication"] == pytest.approx(0.03)  # 0.02 + 0.01
    assert parts["exposed DP communication"] == 0.04
    assert sum(parts.values()) == pytest.approx(1.05)
    # operators that do not add up to compute_s: one compute bar instead
    d["compute_by_operator"] = {"gemm_s": 0.5}
    assert [lbl for lbl, *_ in step_parts(d)][0] == "compute"


def test_ticks_by_hand():
    # 0 to 1.3 in about 5 steps: raw step 0.26 -> 0.5, ticks 0, 0.5, 1.0
    assert nice_ticks(0.0, 1.3) == [0.0, 0.5, 1.0]
    # 0 to 85e9 bytes: raw 17e9 -> 20e9, ticks 0, 20, 40, 60, 80 GB
    assert nice_ticks(0.0, 85e9) == [0.0, 20e9, 40e9, 60e9, 80e9]
    # 1e-4 to 1 s: the decades 1e-4 ... 1
    assert log_ticks(1e-4, 1.0) == pytest.approx([1e-4, 1e-3, 1e-2, 1e-1, 1.0])
    # 12 to 300 s (under two decades): 20, 50, 100, 200
    assert log_ticks(12.0, 300.0) == pytest.approx([20.0, 50.0, 100.0, 200.0])
    ax = Axis(1.0, 100.0, "t (s)", log=True)
    assert ax.frac(10.0) == pytest.approx(0.5)  # log10(10) is half of log10(100)


def test_a_page_needs_no_more_than_the_dict():
    # the smallest plan dict a page needs: every section draws from it alone
    d = {"model": "m", "gpus": 8, "gpu": "h100-sxm", "seq": 2048, "precision": "bf16", "stack": "megatron",
         "comm_model": "flat", "efficiency": 0.5, "efficiency_source": "given", "step_s": 1.0,
         "tokens_per_s_per_gpu": 1000.0, "tflops_per_gpu": 300.0, "mfu": 0.3, "layout": {"dp": 8, "tp": 1, "pp": 1,
                                                                                         "cp": 1},
         "breakdown": {"compute_s": 0.9, "pipeline_bubble_s": 0.0, "exposed_comm_s": 0.05, "optimizer_s": 0.05},
         "bounds": {"all_hidden_s": 0.95, "no_overlap_s": 1.2, "wire_s": 0.25},
         "memory": {"weights_bytes": 1e9, "gradients_bytes": 2e9, "optimizer_bytes": 3e9, "activations_bytes": 4e9,
                    "buffers_bytes": 0.0, "total_bytes": 10e9, "capacity_bytes": 80e9,
                    "peak_reserved_bytes": [10e9, 11.5e9], "device_bytes": [11e9, 13e9], "nccl_bytes": [0.5e9, 0.5e9],
                    "verdict": "fits"},
         "comm": [{"dimension": "dp", "op": "all_reduce", "size_bytes": 2e9, "group_size": 8, "ranks_per_node": 8,
                   "count_per_step": 1.0, "one_s": 0.25, "time_s": 0.25, "exposed_s": 0.05}],
         "step_interval_s": [0.9, 1.2], "step_interval_coverage": 0.8, "mfu_interval": [0.25, 0.333],
         "future_interval_s": [1.0, 2.0]}
    html = plan_html(d)
    values = page_facts(html).values
    assert float(values["step_s"]) == 1.0
    assert float(values["step_interval_s[0]"]) == 0.9 and float(values["step_interval_s[1]"]) == 1.2
    assert float(values["mfu_interval[1]"]) == 0.333
    assert "prediction interval (80% of runs)" in html
    # an interval key the page does not know is shown as written
    assert "prediction interval (future_interval_s)" in html and "1.000 s - 2.000 s" in html
    # context: device 13 GB - reserved 11.5 GB - NCCL 0.5 GB = 1 GB
    assert "CUDA context" in html and "1.00 GB" in html


@pytest.mark.parametrize("argv", (
    ("plan", "--model", "llama2-7b", "--system", "dgx-h100", "--gpus", "64", "--global-batch", "256"),
    ("timeline", "--gpus", "32", "--bw", "25", "--latency", "20", "--params", "1.3", "--step-ms", "400"),
))
def test_html_flag_refuses_a_bad_path_before_any_work(tmp_path, argv):
    r = run_commcost(*argv, "--html", str(tmp_path / "report.txt"))
    assert r.returncode == 2 and r.stderr.count("\n") == 1 and "must end in .html" in r.stderr
    r = run_commcost(*argv, "--html", str(tmp_path / "missing" / "r.html"))
    assert r.returncode == 2 and "does not exist" in r.stderr
    assert list(tmp_path.iterdir()) == []


@settings(max_examples=200, deadline=None)
@given(st.floats(min_value=-1e12, max_value=1e12, allow_nan=False),
       st.floats(min_value=1e-9, max_value=1e12, allow_nan=False))
def test_nice_ticks_lie_in_the_range_evenly_at_1_2_5(lo, span):
    # an axis spans at least a millionth of its magnitude (closer, the floats' own resolution shows)
    assume(span >= 1e-6 * abs(lo))
    hi = lo + span
    ticks = nice_ticks(lo, hi)
    assert ticks and all(lo - span * 1e-6 <= t <= hi + span * 1e-6 for t in ticks)
    steps = [b - a for a, b in zip(ticks, ticks[1:])]
    if steps:
        step = steps[0]
        # even to the floats' resolution at the ticks' magnitude (a tick is k x step, k an integer)
        slack = 1e-9 * step + 4 * math.ulp(max(abs(lo), abs(hi)))
        assert all(abs(s - step) <= slack for s in steps)
        mantissa = step / 10 ** math.floor(math.log10(step) + 1e-12)
        assert min(abs(mantissa - m) for m in (1, 2, 5, 10)) < 1e-6


@settings(max_examples=200, deadline=None)
@given(st.floats(allow_nan=False, allow_infinity=False), st.text(max_size=40))
def test_a_marked_number_reads_back_exactly_whatever_its_tip(value, tip):
    from commcost.report.html._page import num

    facts = page_facts(f"<p>{num(value, key='k', tip=tip)}</p>")
    assert float(facts.values["k"]) == value


@given(st.text())
def test_escape_is_the_standard_librarys(text):
    import html

    from commcost.report.html._svg import escape

    assert escape(text) == html.escape(text, quote=True)


@pytest.mark.parametrize("trace", sorted(p.name for p in (DATA / "traces").glob("*.json.gz")))
def test_every_sample_trace_makes_a_page_of_its_json(tmp_path, trace):
    # nulls where a quantity is undefined (no communication: overlap_pct; one rank: the waits) show as "-"
    page = tmp_path / "t.html"
    r = run_commcost("trace", str(DATA / "traces" / trace), "--json", "--html", str(page))
    assert r.returncode == 0, r.stderr[-800:]
    d = json.loads(r.stdout)
    values = page_facts(page.read_text()).values
    for key, value in values.items():
        expect = max(x["exposed_communication_s"] for x in d["ranks"]) if key == "exposed_communication_s" \
            else _at(d, key)
        assert float(value) == expect, key
