"""commcost plan on the command line: text, strict JSON, one-line errors, calibration round trip."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from commcost.cli import main

BASE = ["plan", "--model", "llama3-8b", "--system", "dgx-h100", "--gpus", "16", "--global-batch", "64",
        "--tp", "2", "--sequence-parallel", "--zero", "1"]


def test_plan_json_keys(capsys):
    assert main([*BASE, "--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert d["layout"]["dp"] == 8 and d["memory"]["fits"] is True
    assert d["step_s"] == pytest.approx(sum(d["breakdown"][k] for k in ("compute_s", "pipeline_bubble_s",
                                                                        "exposed_comm_s", "optimizer_s"))
                                        + d["breakdown"]["losses"]["total_s"])


def test_pure_ddp_7b_does_not_fit_and_says_why(capsys):
    # 16 bytes per parameter: 6.74e9 * 16 = 107.8 GB of model states alone on an 80 GB H100
    assert main(["plan", "--model", "llama2-7b", "--system", "dgx-h100", "--gpus", "32", "--global-batch", "32"]) == 0
    out = capsys.readouterr().out
    assert "DOES NOT FIT" in out and "advice: does not fit" in out and "ZeRO-1" in out


@pytest.mark.parametrize("argv, needle", [
    (["--tp", "3"], "not divisible"),
    (["--gpus", "15"], "15"),
    (["--precision", "fp4"], "unknown precision"),
    (["--model", "nope"], "unknown model"),
])
def test_bad_input_is_one_line_exit_2(argv, needle):
    args = list(BASE)
    for i in range(0, len(argv), 2):
        flag = argv[i]
        if flag in args:
            args[args.index(flag) + 1] = argv[i + 1]
        else:
            args += argv[i:i + 2]
    r = subprocess.run([sys.executable, "-m", "commcost", *args], capture_output=True, text=True)
    assert r.returncode == 2, r.stderr
    assert r.stderr.count("\n") == 1 and needle in r.stderr and "Traceback" not in r.stderr


def test_calibration_round_trip(tmp_path, capsys):
    f = tmp_path / "cal.json"
    assert main([*BASE, "--measured-step-s", "2.5", "--save-calibration", str(f), "--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert d["step_s"] == pytest.approx(2.5, rel=1e-9)
    eta = json.loads(f.read_text())["efficiency"]
    assert main([*BASE, "--calibration", str(f), "--json"]) == 0
    d2 = json.loads(capsys.readouterr().out)
    assert d2["efficiency"] == eta and d2["step_s"] == pytest.approx(2.5, rel=1e-9)


def test_help_ends_with_examples(capsys):
    with pytest.raises(SystemExit):
        main(["plan", "--help"])
    assert capsys.readouterr().out.rstrip().splitlines()[-1].startswith("  commcost plan --model mixtral-8x7b")


def test_plan_with_profile_scope_and_flat_equivalence(tmp_path, capsys):
    from conftest import drill_profile

    path = str(drill_profile(tmp_path))   # all-reduce over 32 ranks; above 1 MiB its regime is 60 us, 25 GB/s
    pure_dp = ["plan", "--model", "gpt3-1.3b", "--gpu", "a100-sxm4-80gb", "--gpus", "32", "--global-batch", "32",
               "--zero", "0", "--json"]
    assert main([*pure_dp, "--profile", path]) == 0
    a = json.loads(capsys.readouterr().out)
    assert main([*pure_dp, "--bw", "25", "--latency", "60"]) == 0
    b = json.loads(capsys.readouterr().out)
    # the 2.6 GB gradient falls in the large regime: the same ring as a flat 25 GB/s, 60 us link,
    # T = 62 * 60 us + 62/32 * 2.63e9 B / 25e9 B/s
    assert a["comm"][0]["one_s"] == pytest.approx(b["comm"][0]["one_s"])
    # the step's other collective, the gradient norm's 4-byte all-reduce (commcost.step.losses), lies in the
    # profile's small-message regime, not the flat link's: the steps agree less that
    sync_a, sync_b = (d["breakdown"]["losses"]["sync_s"] for d in (a, b))
    assert a["step_s"] - sync_a == pytest.approx(b["step_s"] - sync_b)
    assert sync_b == pytest.approx(62 * 60e-6 + 62 / 32 * 4 / 25e9)   # the flat ring: 2 (P-1) a + 2 (P-1)/P S/B
    # reduce-scatter/all-gather (tp 2 with sequence parallelism) are the ring all-reduce's two halves: in scope
    assert main([*pure_dp, "--tp", "2", "--sequence-parallel", "--profile", path]) == 0
    capsys.readouterr()
    # a 64-rank data-parallel group is beyond the profile's 32 ranks: refused in one line ...
    wide = ["plan", "--model", "gpt3-1.3b", "--gpu", "a100-sxm4-80gb", "--gpus", "64", "--global-batch", "64",
            "--zero", "0", "--profile", path]
    r = subprocess.run([sys.executable, "-m", "commcost", *wide], capture_output=True, text=True)
    assert r.returncode == 2 and "--extrapolate" in r.stderr and r.stderr.count("\n") == 1
    # ... or extrapolated with a warning
    assert main([*wide, "--extrapolate", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["warnings"]


# --- issue 24: an empty calibration path, and messages that name the flag -------------------------

@pytest.mark.parametrize("argv, needle", [
    (["--calibration", ""], "--calibration '': expected a file name, got an empty one"),        # item 15
    (["--calibration", " "], "--calibration ' ': expected a file name"),
    (["--measured-tflops", "1e300"], "--measured-tflops must be between 1e-06 and 1e+06 TFLOP/s per GPU, got 1e+300"),
    (["--bucket-mb", "1e-300"], "--bucket-mb must be at least 1 byte"),                          # not bucket_cap_bytes
])
def test_plan_refusals_name_the_flag(argv, needle):
    from conftest import run_commcost
    from conftest import one_error_line

    line = one_error_line(run_commcost(*BASE, *argv))
    assert needle in line
