"""``commcost fit`` and ``commcost validate`` as a user runs them (subprocesses), good and bad input."""

from __future__ import annotations

import json

import pytest

from conftest import DATA, run_commcost

NVLINK = DATA / "nccl_tests" / "h100_nvlink_1node_8gpu_all_reduce.log"
IB = DATA / "nccl_tests" / "h100_ib_2node_16gpu_all_reduce.log"


def one_line_error(r, fragment):
    assert r.returncode == 2, (r.stdout, r.stderr)
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1, r.stderr
    assert "Traceback" not in r.stderr
    assert fragment in lines[0], lines[0]


def test_fit_json_and_profile(tmp_path):
    profile = tmp_path / "nvlink.profile.json"
    r = run_commcost("fit", str(NVLINK), "-o", str(profile), "--json")
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    for key in ("op", "algorithm", "gpus", "alpha_s", "bandwidth_bytes_per_s", "r2", "points", "regimes",
                "crossover_bytes", "median_abs_rel_error", "single_line"):
        assert key in out
    assert (out["op"], out["algorithm"], out["gpus"]) == ("all_reduce", "ring", 8)
    assert len(out["points"]) == 32
    p = out["points"][0]
    assert set(p) >= {"size_bytes", "measured_s", "predicted_s"}
    assert p["size_bytes"] == 8 and p["measured_s"] == pytest.approx(13.03e-6)  # min(13.67, 13.03) us
    # crossover = P alpha B for all-reduce (P = 8), from the printed fields
    assert out["crossover_bytes"] == pytest.approx(8 * out["alpha_s"] * out["bandwidth_bytes_per_s"])
    saved = json.loads(profile.read_text())
    assert saved["version"] == 1 and saved["alpha_s"] == out["alpha_s"]


def test_fit_text_names_model_and_quality():
    r = run_commcost("fit", str(IB))
    assert r.returncode == 0, r.stderr
    for fragment in ("model: T(S) = k*alpha_i + f*S/B_i", "k = 30 ring steps", "alpha (per ring step",
                     "B (per-rank bus bandwidth", "crossover S*", "R^2", "one straight line instead"):
        assert fragment in r.stdout


def test_validate_json_and_plot(tmp_path):
    profile = tmp_path / "ib.json"
    assert run_commcost("fit", str(IB), "-o", str(profile)).returncode == 0
    png = tmp_path / "fit.png"
    r = run_commcost("validate", str(IB), "--profile", str(profile), "--plot", str(png), "--json")
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert {"median_abs_rel_error", "max_abs_rel_error", "points"} <= set(out)
    assert out["median_abs_rel_error"] < 0.05
    assert out["max_abs_rel_error"] >= out["median_abs_rel_error"]
    assert png.stat().st_size > 1000 and png.read_bytes()[:4] == b"\x89PNG"
    # the same profile on another system's log: valid numbers, larger errors
    r = run_commcost("validate", str(NVLINK), "--profile", str(profile))
    assert r.returncode == 0 and "applied to all_reduce on 8 ranks" in " ".join(r.stdout.split())   # wrapped


def test_fit_several_runs_needs_gpus(tmp_path):
    cat = tmp_path / "all_reduce_perf.log"
    cat.write_text(NVLINK.read_text() + IB.read_text())
    one_line_error(run_commcost("fit", str(cat)), "several group sizes")
    r = run_commcost("fit", str(cat), "--gpus", "16", "--json")
    assert r.returncode == 0 and json.loads(r.stdout)["gpus"] == 16


@pytest.mark.parametrize("content,fragment", [
    ("", "empty file"),
    ("size,time\n1024,0.1\n", ":1: not nccl-tests output: 'size,time'"),
])
def test_fit_bad_data(tmp_path, content, fragment):
    path = tmp_path / "x.log"
    path.write_text(content)
    one_line_error(run_commcost("fit", str(path)), fragment)


def test_fit_one_size_measurement(tmp_path):
    path = tmp_path / "one.csv"
    path.write_text("# commcost-measurement version 1\n"
                    "op,gpus,size_bytes,count,dtype,time_s,time_min_s,time_max_s,algbw_bytes_per_s,"
                    "busbw_bytes_per_s,iters\n"
                    "all_reduce,2,1024,256,float32,1e-4,1e-4,1e-4,1e7,1e7,20\n")
    one_line_error(run_commcost("fit", str(path)), "need at least two distinct message sizes")


def test_fit_missing_file_and_unknown_op(tmp_path):
    one_line_error(run_commcost("fit", str(tmp_path / "nope.log")), "nope.log")
    one_line_error(run_commcost("fit", str(IB), "--op", "allreduce"), "unknown collective 'allreduce'")


@pytest.mark.parametrize("mutate,fragment", [
    (lambda o: o.update(version=99), "profile version 99 is not supported"),
    (lambda o: o.pop("regimes"), "missing field 'regimes'"),
])
def test_validate_bad_profile(tmp_path, mutate, fragment):
    profile = tmp_path / "p.json"
    assert run_commcost("fit", str(IB), "-o", str(profile)).returncode == 0
    obj = json.loads(profile.read_text())
    mutate(obj)
    profile.write_text(json.dumps(obj))
    one_line_error(run_commcost("validate", str(IB), "--profile", str(profile)), fragment)


def test_validate_requires_profile():
    one_line_error(run_commcost("validate", str(IB)), "--profile")
