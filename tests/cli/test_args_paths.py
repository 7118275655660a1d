"""Output paths and sizes as the flag checks of ``cli/_args.py`` see them: checked before the work, with
the flag named; a size under one byte and a gradient too large to simulate are refused at once."""

from __future__ import annotations

import json

import pytest

from conftest import one_error_line, run_commcost, run_tool

DRILL = ["--gpus", "32", "--bw", "25", "--latency", "20"]

FULL = DRILL + ["--params", "1.3", "--step-ms", "400"]


def test_timeline_plot_with_unknown_suffix(tmp_path):
    # was a matplotlib ValueError traceback after the simulation
    line = one_error_line(run_commcost("timeline", *FULL, "--plot", str(tmp_path / "t.txt")))
    assert "--plot" in line and ".png or .svg" in line


def test_timeline_plot_into_a_directory(tmp_path):
    # used to print "plot written to DIR" while matplotlib wrote DIR.png next to it
    line = one_error_line(run_commcost("timeline", *FULL, "--plot", str(tmp_path)))
    assert "is a directory" in line
    assert not (tmp_path.parent / (tmp_path.name + ".png")).exists()


def test_validate_plot_with_unknown_suffix(tmp_path):
    line = one_error_line(run_commcost("validate", str(tmp_path / "m.csv"), "--profile",
                                        str(tmp_path / "p.json"), "--plot", str(tmp_path / "f.txt")))
    assert "--plot" in line and ".png or .svg" in line


@pytest.mark.parametrize("sub", ["no/such/p.json", ""])
def test_fit_output_path_named_not_its_temp_file(tmp_path, sub):
    # was "DIR/.p.json.abc123.tmp: No such file or directory" (the temporary file's name)
    target = str(tmp_path / sub) if sub else str(tmp_path)
    log = tmp_path / "m.log"
    log.write_text("x\n")
    line = one_error_line(run_commcost("fit", str(log), "-o", target))
    assert line.startswith(f"commcost: error: -o {target!r}") and ".tmp" not in line


def test_budget_bucket_cap_under_one_byte():
    # 1e-9 MiB = 0.00105 B: a table row of 2,479,553,222,657 buckets before the fix
    line = one_error_line(run_tool(*FULL, "--buckets", "1,1e-9"))
    assert "--buckets" in line and "'1e-9'" in line and "at least 1 byte" in line


@pytest.mark.parametrize("flag,value", [("--size", "0.5"), ("--sizes", "0.5:8")])
def test_collective_size_under_one_byte(flag, value):
    # was "all_reduce of 0 B" computed on half a byte
    line = one_error_line(run_commcost("collective", "--op", "all_reduce", flag, value, *DRILL))
    assert flag in line and "at least 1 byte" in line


def test_budget_gradient_too_large_to_simulate_fails_fast():
    # --params 5e5 (billions): 1e15 B / 25 MiB = 3.8e7 buckets > 2^20 -> refused before simulating
    line = one_error_line(run_tool(*DRILL, "--params", "5e5", "--step-ms", "400"))
    assert "--params" in line and "1,048,576" in line
    # --params 1e30 is surely a raw count, not billions: refused with the likely intent
    line = one_error_line(run_tool(*DRILL, "--params", "1e30", "--step-ms", "400"))
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
    line = one_error_line(run_commcost("timeline", *DRILL, "--step-ms", "400", *extra))
    assert flag in line and "1,048,576" in line
