"""``commcost scaling`` as a user runs it: a subprocess, default run, outputs, bad inputs."""

from __future__ import annotations

import csv
import io
import json
import re

import pytest

from conftest import run_commcost

ROW_KEYS = [  # the documented columns (README, "Scaling analysis")
    "analysis", "model", "fabric", "gpus", "params", "bytes_per_grad", "message_bytes",
    "compute_s", "overhead_s", "bandwidth_bytes_per_s", "latency_s", "overlap_fraction",
    "comm_s", "comm_latency_s", "comm_bandwidth_s", "step_s", "speedup", "efficiency",
    "step_perfect_s", "speedup_perfect", "efficiency_perfect",
    "step_partial_s", "speedup_partial", "efficiency_partial",
    "step_no_overlap_s", "speedup_no_overlap", "efficiency_no_overlap",
    "step_partial_bounded_s", "speedup_partial_bounded", "partial_exceeds_perfect", "beyond_flat_ring",
    "gpus_per_node", "algorithm", "crosses_nodes",
    "gpu", "memory_states_bytes", "memory_capacity_bytes", "memory_fits",   # null without a GPU (--system)
]


@pytest.fixture(scope="module")
def default_run():
    r = run_commcost("scaling")
    assert r.returncode == 0, r.stderr
    assert r.stderr == ""
    return r.stdout


def _overlap_section_rows(text: str) -> dict[int, list[str]]:
    """Data lines of the seed's 7B analysis: N -> cells (markers stripped)."""
    section = text[text.index("Analysis for 7B (Llama-7B equiv)"):]
    rows = {}
    for line in section.splitlines():
        m = re.match(r"^\s+(\d+) \|(.*)$", line)
        if m:
            # two tables that fit 80 columns (comm T and X; E and X capped): a row's cells, in that order
            rows.setdefault(int(m.group(1)), []).extend(m.group(2).replace("|", " ").replace("!", " ").split())
    return rows


# N: (NVLink comm, IB comm, NVLink X, IB X) as the seed prints them; hand computations in
# tests/analyses/test_scaling.py::SEED_PRINTED, e.g. N=2: NVLink 2*(1/2)*14e9/600e9 s + 2*1*0.02 ms
# = 23.333 + 0.04 = 23.37 -> "23.4"; IB 560 + 0.1 = 560.1; X = 2*400/(400 + 0.15*560.1) = 1.653 -> "1.7"
SEED_PRINTED = {
    1: ("0.0", "0.0", "1.0", "1.0"),
    2: ("23.4", "560.1", "2.0", "1.7"),
    4: ("35.1", "840.3", "3.9", "3.0"),
    8: ("41.1", "980.7", "7.9", "5.8"),
    16: ("44.4", "1051.5", "15.7", "11.5"),
    32: ("46.4", "1088.1", "31.5", "22.7"),
}


def test_default_run_prints_the_seeds_7b_analysis_to_its_precision(default_run):
    rows = _overlap_section_rows(default_run)
    assert sorted(rows) == [1, 2, 4, 8, 16, 32]
    for n, (nv_ms, ib_ms, nv_x, ib_x) in SEED_PRINTED.items():
        cells = rows[n]
        # columns: comm NVLink, comm IB, X NVLink, X IB, E NVLink, E IB, X capped NVLink, X capped IB
        assert cells[:4] == [nv_ms, ib_ms, nv_x, ib_x], (n, cells)
        # efficiency (%) is X / N: IB at N=2 is 1.6528/2 = 82.6 %
    assert rows[2][5] == "82.6"
    # X capped for IB at N=2 is the perfect-overlap 2*400/560.1 = 1.428 -> 1.4
    assert rows[2][7] == "1.4"
    assert "Compute time per step" not in default_run  # our words, not the seed's
    assert "compute time per step t_c = 400.0 ms" in default_run


def test_default_run_prints_all_six_tables_with_the_seeds_numbers(default_run):
    for model in ("125M (GPT-2 small)", "1.3B (GPT-2 XL equiv)", "7B (Llama-7B equiv)"):
        for fabric in ("NVLink", "InfiniBand"):
            assert f"{model} on {fabric}\n" in default_run
    # 125M NVLink N=128: T = 5.08 + 0.827 = 5.907 ms; step 6.407 ms; X = 448/6.407 = 69.93; E = 54.6 %
    assert any(l.strip().startswith("128*") and " 5.91 " in l and " 6.41" in l for l in default_run.splitlines())
    line = next(l for l in default_run.splitlines() if l.strip().startswith("128*") and " 69.93 " in l)
    assert " 54.6 " in line      # the speedup and efficiency table, below the step table


def test_default_run_flags_flat_nvlink_and_the_seeds_overlap_excess(default_run):
    # the note under each NVLink table, and the marked rows 16..128
    assert " ".join(default_run.split()).count("does not exist on most systems") == 3
    assert "72 on GB200 NVL72" in " ".join(default_run.split())
    assert re.search(r"^\s+128\*", default_run, re.M) and re.search(r"^\s+16\*", default_run, re.M)
    assert not re.search(r"^\s+8\*", default_run, re.M)
    assert "beats perfect overlap" in default_run


def test_json_has_documented_rows_si_units():
    r = run_commcost("scaling", "--json")
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert set(out) == {"formulas", "rows", "notes"}
    rows = out["rows"]
    assert len(rows) == 6 * 8 + 2 * 6
    for row in rows:
        assert list(row) == ROW_KEYS
    # 7B IB N=2 in the results table: step = 560.6 ms, X = 801/560.6 = 1.428827, E = 0.714413
    row = next(x for x in rows if x["analysis"] == "results" and x["model"].startswith("7B")
               and x["fabric"] == "InfiniBand" and x["gpus"] == 2)
    assert row["step_s"] == pytest.approx(0.5606)
    assert row["speedup"] == pytest.approx(1.428827, abs=1e-6)
    assert row["efficiency"] == pytest.approx(0.714413, abs=1e-6)
    assert row["partial_exceeds_perfect"] is True
    # the seed's printed analysis has t_o = 0: X = 800/484.015 = 1.652841
    row = next(x for x in rows if x["analysis"] == "overlap_analysis" and x["fabric"] == "InfiniBand"
               and x["gpus"] == 2)
    assert row["overhead_s"] == 0.0
    assert row["speedup_partial"] == pytest.approx(1.652841, abs=1e-6)


def test_issue_example_custom_model_and_fabric_to_csv(tmp_path):
    out = tmp_path / "out.csv"
    r = run_commcost("scaling", "--params", "70", "--compute-ms", "2500", "--bw", "50", "--latency", "10",
                     "--gpus", "1,8,64,512,4096", "--csv", str(out))
    assert r.returncode == 0, r.stderr
    assert f"wrote CSV {out}" in r.stdout
    rows = list(csv.DictReader(io.StringIO(out.read_text())))
    assert list(rows[0]) == ROW_KEYS
    assert [int(x["gpus"]) for x in rows] == [1, 8, 64, 512, 4096]
    # N=8: S = 70e9*2 = 140e9 B; 2*(7/8)*140e9/50e9 s = 4.9 s; 2*7*10 us = 0.14 ms; T = 4.90014 s
    # step = max(2.5, 4.90014) + 0.0005 = 4.90064 s; X = 8*2.5005/4.90064 = 4.081916
    r8 = rows[1]
    assert float(r8["comm_s"]) == pytest.approx(4.90014)
    assert float(r8["speedup"]) == pytest.approx(4.081916, abs=1e-6)
    assert r8["beyond_flat_ring"] == "false" and r8["partial_exceeds_perfect"] == "true"


def test_one_preset_pair_with_overlap():
    r = run_commcost("scaling", "--model", "7b", "--fabric", "infiniband", "--overlap", "0.85", "--json")
    assert r.returncode == 0, r.stderr
    rows = json.loads(r.stdout)["rows"]
    assert {(x["model"], x["fabric"]) for x in rows} == {("7B (Llama-7B equiv)", "InfiniBand")}
    assert [x["gpus"] for x in rows] == [1, 2, 4, 8, 16, 32, 64, 128]  # no overlap_analysis rows
    r = run_commcost("scaling", "--model", "7b", "--fabric", "infiniband", "--overlap", "0.85")
    assert "Analysis for" not in r.stdout and "7B (Llama-7B equiv) on InfiniBand" in r.stdout


def test_gpu_list_is_sorted_and_deduplicated():
    r = run_commcost("scaling", "--model", "125m", "--fabric", "nvlink", "--gpus", "8,2,8,1", "--json")
    assert r.returncode == 0, r.stderr
    assert [x["gpus"] for x in json.loads(r.stdout)["rows"]] == [1, 2, 8]


BAD = [
    (["--model", "70b"], "valid: 1.3b, 125m, 7b"),
    (["--model", "7B"], "unknown model '7B'"),
    (["--fabric", "ethernet"], "valid: infiniband, nvlink"),
    (["--gpus", ""], "--gpus"),
    (["--gpus", "0,2"], "--gpus"),
    (["--gpus", "1,-2"], "--gpus"),
    (["--gpus", "1,,2"], "--gpus"),
    (["--gpus", "two"], "--gpus"),
    (["--overlap", "1.5"], "[0, 1]"),
    (["--overlap", "-0.1"], "[0, 1]"),
    (["--params", "7"], "--compute-ms is required"),
    (["--model", "7b", "--params", "7", "--compute-ms", "400"], "exclusive"),
    (["--bw", "50"], "--latency is required"),
    (["--fabric", "nvlink", "--bw", "50", "--latency", "5"], "exclusive"),
    (["--compute-ms", "0", "--params", "1"], "--compute-ms"),
    (["--dtype", "bf17"], "unknown dtype"),
    (["--plot", "scaling.pdf"], ".png or .svg"),
    (["--plot", "/nonexistent-dir/x.png"], "does not exist"),
    (["--csv", "/nonexistent-dir/x.csv"], "does not exist"),
    (["--csv", "/"], "is a directory"),
]


@pytest.mark.parametrize("argv, words", BAD, ids=[" ".join(a) or "empty" for a, _ in BAD])
def test_bad_input_one_line_exit_2(argv, words):
    r = run_commcost("scaling", *argv)
    assert r.returncode == 2, (r.stdout, r.stderr)
    assert r.stdout == ""
    assert "Traceback" not in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1, r.stderr
    assert words in r.stderr


def test_subcommand_is_listed_in_help():
    r = run_commcost("--help")
    assert r.returncode == 0 and "scaling" in r.stdout
