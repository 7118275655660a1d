"""``commcost timeline`` as a user runs it: a subprocess, JSON keys, plots, bad input."""

import json

import pytest

from conftest import run_commcost

DRILL = ("--gpus", "32", "--bw", "25", "--latency", "20", "--params", "1.3", "--step-ms", "400")
# P = 2, a = 1000 us, B = 1 GB/s: T(c) = 2 ms + c/B; S = 0.05e9 * 2 = 100e6 B; W = 0.2 s.
# 9.5367431640625 MiB * 2**20 = 10,000,000 B exactly.
HAND = ("--gpus", "2", "--bw", "1", "--latency", "1000", "--params", "0.05", "--step-ms", "300",
        "--bucket", "9.5367431640625")


def _json(*args):
    r = run_commcost("timeline", *args, "--json")
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def test_hand_case_through_the_cli():
    # keeps up: 10 buckets of 10e6 B, 0.012 s each; exposed = the last one, 0.012 s; step 0.312 s
    d = _json(*HAND)
    assert d["bucket_bytes"] == 10_000_000 and d["first_bucket_bytes"] == 10_000_000
    assert len(d["buckets"]) == 10
    assert d["wire_s"] == pytest.approx(0.12)
    assert d["exposed_s"] == pytest.approx(0.012)
    assert d["step_s"] == pytest.approx(0.312)
    assert d["overlap_fraction"] == pytest.approx(0.9)
    assert d["bounds"] == {"no_overlap_s": pytest.approx(0.42), "perfect_overlap_s": pytest.approx(0.3)}
    b = d["buckets"][-1]
    assert set(b) == {"size_bytes", "ready_s", "start_s", "end_s"}
    assert (b["ready_s"], b["start_s"], b["end_s"]) == (pytest.approx(0.3), pytest.approx(0.3), pytest.approx(0.312))


def test_optimizer_and_grad_accum_flags_shift_the_step():
    # k = 4: compute 1.2 s; + 0.012 exposed + 0.05 optimizer = 1.262 s
    d = _json(*HAND, "--grad-accum", "4", "--optimizer-ms", "50")
    assert d["step_s"] == pytest.approx(1.262)
    assert d["efficiency"] == pytest.approx(1.25 / 1.262)


def test_default_bucket_is_ddps_25_mib_with_a_1_mib_first():
    d = _json(*DRILL)
    assert d["bucket_bytes"] == 25 * 2**20 and d["first_bucket_bytes"] == 2**20
    assert d["buckets"][0]["size_bytes"] == 2**20
    # 1 MiB + 99 x 25 MiB = 2,596,274,176 B; the rest, 3,725,824 B, is the 101st bucket
    assert len(d["buckets"]) == 101
    assert d["bounds"]["perfect_overlap_s"] <= d["step_s"] <= d["bounds"]["no_overlap_s"]


def test_auto_reports_best_and_curve():
    d = _json(*DRILL, "--bucket", "auto")
    assert {"best", "curve", "pytorch_default"} <= set(d)
    steps = [p["step_s"] for p in d["curve"]]
    assert d["best"]["step_s"] == min(steps) == d["step_s"]
    assert d["best"]["bucket_bytes"] == d["bucket_bytes"]
    assert all(set(p) >= {"bucket_bytes", "step_s", "exposed_s"} for p in d["curve"])
    assert d["best"]["step_s"] < d["pytorch_default"]["step_s"]


def test_text_report_shows_bounds_and_regime():
    r = run_commcost("timeline", *DRILL)
    assert r.returncode == 0, r.stderr
    for words in ("perfect overlap", "no overlap", "exposed", "on the wire", "falls behind"):
        assert words in r.stdout
    r = run_commcost("timeline", *HAND)
    assert "keeps up" in r.stdout


def test_model_preset_and_explicit_shape():
    d = _json("--gpus", "32", "--bw", "25", "--latency", "20", "--step-ms", "400", "--model", "gpt3-1.3b")
    # tied embeddings: the 50257 x 2048 bf16 token embedding (205,852,672 B) arrives last, with the
    # position embedding 2048 x 2048 (8,388,608 B) and layer 0's first LayerNorm (2 x 2048 x 2 = 8,192 B)
    # that opened the bucket: 214,249,472 B, far over the 25 MiB cap (DDP never splits a tensor)
    assert d["message_bytes"] == 2 * 1_315_723_264
    assert d["buckets"][-1]["size_bytes"] == 205_852_672 + 8_388_608 + 8_192
    assert d["buckets"][-1]["ready_s"] == pytest.approx(0.4)
    d2 = _json("--gpus", "32", "--bw", "25", "--latency", "20", "--step-ms", "400", "--params", "1.3",
               "--layers", "24", "--hidden", "2048", "--seq", "2048")
    # 24 * (12 h^2 + 2h) + V h (embedding) + h (final norm) + V h (untied head)
    h, V = 2048, 50257
    assert d2["message_bytes"] == 2 * (24 * (12 * h * h + 2 * h) + 2 * V * h + h)


def test_plot_writes_png(tmp_path):
    pytest.importorskip("matplotlib")
    for extra in ((), ("--bucket", "auto")):
        out = tmp_path / f"t{len(extra)}.png"
        r = run_commcost("timeline", *DRILL, *extra, "--plot", str(out))
        assert r.returncode == 0, r.stderr
        assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


@pytest.mark.parametrize("args", [
    ("--bucket", "foo"), ("--bucket", "0"), ("--bucket", "-3"), ("--first-bucket", "0"),
    ("--backward-fraction", "0"), ("--grad-accum", "0"), ("--dtype", "fp64"), ("--optimizer-ms", "-1"),
    ("--model", "gpt-5"), ("--model", "gpt2-small", "--layers", "3"), ("--layers", "4", "--hidden", "64"),
    ("--seq", "128"), ("--layers", "24", "--hidden", "4096", "--seq", "2048"),
    ("--plot", "/nonexistent-dir/x.png"), ("--gpus", "0"), ("--latency", "x"), ("--latency", "0"), ("--bw", "nan"),
])
def test_bad_input_is_one_line_exit_2(args):
    r = run_commcost("timeline", *DRILL, *args)
    assert r.returncode == 2, (args, r.stdout, r.stderr)
    assert r.stderr.count("\n") == 1 and "Traceback" not in r.stderr


def test_missing_params_and_shape_is_one_line_exit_2():
    r = run_commcost("timeline", "--gpus", "2", "--bw", "1", "--latency", "1", "--step-ms", "10")
    assert r.returncode == 2 and r.stderr.count("\n") == 1 and "--params" in r.stderr
