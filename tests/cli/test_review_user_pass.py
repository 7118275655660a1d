"""Defects found by using commcost as its users do (the review pass), each pinned here.

Every bad input must be one line on stderr and exit 2, before any long computation;
every printed number must stay readable and keep its unit.
"""

from __future__ import annotations

import json

import pytest

from commcost.comm.model import FabricModel
from commcost.core.units import format_fraction, format_seconds
from conftest import run_commcost, run_tool

DRILL = ["--gpus", "32", "--bw", "25", "--latency", "20"]
FULL = DRILL + ["--params", "1.3", "--step-ms", "400"]


def _one_error_line(r) -> str:
    assert r.returncode == 2, (r.returncode, r.stdout[-500:], r.stderr[-2000:])
    assert "Traceback" not in r.stderr
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1, r.stderr
    assert r.stdout == ""
    return lines[0]


@pytest.fixture
def not_utf8(tmp_path):
    p = tmp_path / "bin.json"
    p.write_bytes(b"\xff\xfe\x00not json")
    return str(p)


# --- profiles that are not text: a traceback (UnicodeDecodeError) before the fix -----------

@pytest.mark.parametrize("argv", [
    ["budget", "--params", "1.3", "--step-ms", "400"],
    ["timeline", "--params", "1.3", "--step-ms", "400"],
    ["scaling"],
    ["collective", "--op", "all_reduce", "--size", "1GB"],
])
def test_binary_profile_is_one_line(argv, not_utf8):
    line = _one_error_line(run_commcost(*argv, "--profile", not_utf8))
    assert "not UTF-8" in line and not_utf8 in line


def test_validate_with_binary_profile_is_one_line(tmp_path, not_utf8):
    data = tmp_path / "m.log"
    data.write_text("x\n")
    line = _one_error_line(run_commcost("validate", str(data), "--profile", not_utf8))
    assert "not UTF-8" in line


# --- output paths: checked before the work, with the flag named ---------------------------

def test_timeline_plot_with_unknown_suffix(tmp_path):
    # was a matplotlib ValueError traceback after the simulation
    line = _one_error_line(run_commcost("timeline", *FULL, "--plot", str(tmp_path / "t.txt")))
    assert "--plot" in line and ".png or .svg" in line


def test_timeline_plot_into_a_directory(tmp_path):
    # used to print "plot written to DIR" while matplotlib wrote DIR.png next to it
    line = _one_error_line(run_commcost("timeline", *FULL, "--plot", str(tmp_path)))
    assert "is a directory" in line
    assert not (tmp_path.parent / (tmp_path.name + ".png")).exists()


def test_validate_plot_with_unknown_suffix(tmp_path):
    line = _one_error_line(run_commcost("validate", str(tmp_path / "m.csv"), "--profile",
                                        str(tmp_path / "p.json"), "--plot", str(tmp_path / "f.txt")))
    assert "--plot" in line and ".png or .svg" in line


@pytest.mark.parametrize("sub", ["no/such/p.json", ""])
def test_fit_output_path_named_not_its_temp_file(tmp_path, sub):
    # was "DIR/.p.json.abc123.tmp: No such file or directory" (the temporary file's name)
    target = str(tmp_path / sub) if sub else str(tmp_path)
    log = tmp_path / "m.log"
    log.write_text("x\n")
    line = _one_error_line(run_commcost("fit", str(log), "-o", target))
    assert line.startswith(f"commcost: error: -o {target!r}") and ".tmp" not in line


# --- sizes under one byte ----------------------------------------------------------------

def test_budget_bucket_cap_under_one_byte():
    # 1e-9 MiB = 0.00105 B: a table row of 2,479,553,222,657 buckets before the fix
    line = _one_error_line(run_tool(*FULL, "--buckets", "1,1e-9"))
    assert "--buckets" in line and "'1e-9'" in line and "at least 1 byte" in line


@pytest.mark.parametrize("flag,value", [("--size", "0.5"), ("--sizes", "0.5:8")])
def test_collective_size_under_one_byte(flag, value):
    # was "all_reduce of 0 B" computed on half a byte
    line = _one_error_line(run_commcost("collective", "--op", "all_reduce", flag, value, *DRILL))
    assert flag in line and "at least 1 byte" in line


# --- simulations that would run for minutes (or be killed for memory) --------------------

def test_budget_gradient_too_large_to_simulate_fails_fast():
    # --params 5e5 (billions): 1e15 B / 25 MiB = 3.8e7 buckets > 2^20 -> refused before simulating
    line = _one_error_line(run_tool(*DRILL, "--params", "5e5", "--step-ms", "400"))
    assert "--params" in line and "1,048,576" in line
    # --params 1e30 is surely a raw count, not billions: refused with the likely intent
    line = _one_error_line(run_tool(*DRILL, "--params", "1e30", "--step-ms", "400"))
    assert "--params" in line and "did you mean" in line


def test_budget_at_the_bucket_limit_still_runs():
    # 2^20 buckets of 25 MiB = 27,487,790,694,400 B; at bf16 that is 13,743.9 billion params
    r = run_tool(*DRILL, "--params", "13000", "--step-ms", "400", "--json")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["message"]["bytes"] == pytest.approx(13000e9 * 2)


@pytest.mark.parametrize("extra,flag", [(["--params", "1e5"], "--params"),
                                        (["--params", "1.3", "--bucket", "0.001"], "--bucket")])
def test_timeline_too_many_buckets_fails_fast(extra, flag):
    # 1e5 billion params: 2e14 B / 25 MiB = 7.6e6 buckets (30 s, 1.8 GB before the fix);
    # 0.001 MiB caps on 2.6e9 B: 2,480,917 buckets (12 s)
    line = _one_error_line(run_commcost("timeline", *DRILL, "--step-ms", "400", *extra))
    assert flag in line and "1,048,576" in line


# --- readable magnitudes -------------------------------------------------------------------

def test_format_seconds_extremes_are_scientific():
    # 5.0375e300 s used to print as a 300-digit fixed-point number
    assert format_seconds(5.0375e300) == "5.04e+300 s"
    assert format_seconds(1e-303) == "1e-303 s"       # was "0.00 us"
    assert format_seconds(999_999.0) == "999999.0 s"  # below 1e6 s: unchanged
    assert format_seconds(81.26e-6) == "81.26 us"


def test_format_fraction_extremes_are_scientific():
    assert format_fraction(1.259e300) == "1.26e+302%"
    assert format_fraction(8.192) == "819.2%"          # the drill's 1 MiB row: unchanged


def test_budget_with_absurd_bandwidth_stays_readable():
    # the slowest rate accepted is 1e-6 GB/s = 1 kB/s (1e-300 is refused: tests/cli/test_args_bounds.py)
    r = run_tool("--gpus", "32", "--bw", "1e-6", "--latency", "20", "--params", "1.3", "--step-ms", "400")
    assert r.returncode == 0, r.stderr
    # 2(P-1)/P * S / B = 1.9375 * 2.6e9 / 1e3 = 5.0375e6 s
    assert "bandwidth term  2(P-1)/P * S/B =   5.04e+06 s" in r.stdout
    assert max(len(line) for line in r.stdout.splitlines()) < 400


# --- the report's words agree with its numbers ---------------------------------------------

def test_layer_ratio_k4_text_names_the_last_micro_batch_window():
    r = run_tool(*DRILL, "--layer-ratio", "--hidden", "4096", "--seq", "4096", "--grad-accum", "4")
    assert r.returncode == 0, r.stderr
    # W_l = 2/3 * 57.72 ms / 4 = 9.62 ms < T_l = 32.45 ms; exposed >= 32.45 - 9.62 = 22.82 ms
    assert "COMMUNICATION-BOUND" in r.stdout and "9.62 ms" in r.stdout and "22.82 ms" in r.stdout
    layer = json.loads(run_tool(*DRILL, "--layer-ratio", "--hidden", "4096", "--seq", "4096",
                                "--grad-accum", "4", "--json").stdout)["layer"]
    assert layer["verdict"] == "COMMUNICATION-BOUND"
    T = 1.24e-3 + 1.9375 * 402653184 / 25e9
    window = 2 / 3 * 4 * (6 * 201326592 * 4096 + 12 * 4096**3) / 400e12 / 4
    assert layer["backward_window_s"] == pytest.approx(window)
    assert layer["exposed_lower_bound_s"] == pytest.approx(T - window)


def test_budget_formulas_carry_k():
    # k = 2: k*step = 800 ms; exposed efficiency 800 / (800 + 202.74) = 79.8%
    r = run_tool(*FULL, "--grad-accum", "2")
    assert r.returncode == 0, r.stderr
    assert "fully exposed       k*step / (k*step + T)     = 79.8%" in r.stdout
    assert "T/(k*step) = 25.3%" in r.stdout


def test_budget_simulated_share_names_its_step():
    # default buckets: exposed 61.55 ms of a 461.55 ms step = 13.3%
    r = run_tool(*FULL)
    assert "13.3% of its 461.55 ms step" in r.stdout


def test_budget_on_a_system_does_not_claim_the_flat_limit():
    # on dgx-h100 the (g) rows grow past 2S/B of the flat equivalent (13.40 ms at P = 256 vs 10.71 ms)
    r = run_tool("--params", "1.3", "--step-ms", "400", "--system", "dgx-h100", "--nodes", "4")
    assert r.returncode == 0, r.stderr
    assert "bandwidth term -> 2S/B" not in r.stdout
    assert "steps up where the group leaves the NVLink domain" in r.stdout
    data = json.loads(run_tool("--params", "1.3", "--step-ms", "400", "--system", "dgx-h100",
                               "--nodes", "4", "--json").stdout)
    # no flat limit 2S/B is claimed for a fabric (its "B" would be a flat equivalent above any link)
    assert data["scaling"]["bandwidth_limit_s"] is None


def test_budget_intra_node_fix_that_is_slower_says_so():
    # 16 GPUs on one 370 GB/s NVLink ring: 2(15/16) 2.6e9 / 370e9 = 13.18 ms + latency, slower than the
    # 2-node NVLS-tree baseline (S / 272e9 = 9.56 ms + fill = 9.72 ms). (Issue 14: at 4 nodes the NVLS tree
    # moves 2S per node, the baseline is the 13.79 ms ring and one 32-GPU NVLink ring, 13.73 ms, is no slower.)
    r = run_tool("--params", "1.3", "--step-ms", "400", "--system", "dgx-h100", "--nodes", "2")
    assert "no gain here" in r.stdout
    r = run_tool(*FULL)                       # the drill: 18.03 ms vs 202.74 ms, a real gain
    assert "no gain here" not in r.stdout


def test_budget_grad_accum_fix_that_is_this_run_says_so():
    # --grad-accum 4 with the default --fix-grad-accum 4: 202.74 ms / (4 * 400 ms) = 12.7% both times
    r = run_tool(*FULL, "--grad-accum", "4")
    assert r.returncode == 0, r.stderr
    line = next(x for x in r.stdout.splitlines() if "1. gradient accumulation x4" in x)
    assert "= 12.7%" in line and "already uses k = 4: no change" in line
    assert "already uses" not in run_tool(*FULL).stdout


def test_version_flag():
    # was "unknown subcommand '--version'" with exit 2
    import commcost

    r = run_commcost("--version")
    assert r.returncode == 0 and r.stdout.strip() == f"commcost {commcost.__version__}"


def test_budget_bucket_range_is_put_in_context_when_comm_hides_anyway():
    # dgx-h100 x4: T = 13.79 ms (issue 14; 10.43 ms before) of a 400 ms step; the 25 MiB default exposes ~70 us, inside the
    # 20 ms tail budget (5% of 400 ms), so "outside the sensible range" must not stand alone
    r = run_tool("--params", "1.3", "--step-ms", "400", "--system", "dgx-h100", "--nodes", "4")
    assert "outside the sensible range here" in r.stdout
    assert "barely changes the step" in r.stdout
    # the drill: the default exposes 61.55 ms > 20 ms: the range advice stands alone
    assert "barely changes the step" not in run_tool(*FULL).stdout


def test_two_tier_scaling_plot_names_its_algorithm_and_marks_the_knee():
    # the title said "ring all-reduce" although auto ran tree/halving-doubling; no knee was drawn
    pytest.importorskip("matplotlib")
    from commcost.report.plot_scaling import plot_scaling
    from commcost.analyses.scaling import ScalingInputs, scaling_curve, seed_analysis, seed_two_tier

    curve = scaling_curve(ScalingInputs(
        model="7B", fabric="two-tier", params=7e9, bytes_per_grad=2, compute_s=0.4, overhead_s=0.0,
        comm=FabricModel(topology=seed_two_tier(8, 64)), gpu_counts=(1, 4, 8, 16, 64), overlap_fraction=0.85, algorithm="auto"))
    fig = plot_scaling([curve])
    title = fig._suptitle.get_text()
    assert "ring all-reduce" not in title and "auto" in title
    # the knee: rows cross nodes from N = 16 (8 GPUs per node)
    knee_x = [line.get_xdata()[0] for line in fig.axes[0].get_lines() if line.get_color() == "firebrick"]
    assert knee_x == [16]
    flat = plot_scaling(seed_analysis()[0])
    assert "ring all-reduce" in flat._suptitle.get_text()
    assert not [ln for ln in flat.axes[0].get_lines() if ln.get_color() == "firebrick"]
