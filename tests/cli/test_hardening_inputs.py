"""Issue 10, items 1, 2, 5, 7, 8 and issue 9's units: every hostile value is one line on stderr and
exit 2, with nothing on stdout; ``--json`` is strict JSON or nothing. Each case runs the command as a
user would (a subprocess, nothing installed), except where the dispatcher itself is the subject."""

from __future__ import annotations

import errno
import io
import json
import math
import sys
import types

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from commcost.cli import find_non_finite_token, main
from commcost.cli._args import latency_us, nonneg_latency_us, rate_gb_per_s
from commcost.core.errors import InputError
from commcost.report._json import dump_json, find_non_finite
from commcost.core.units import parse_rate_bytes_per_s, parse_time_s
from commcost.workload.shape import MAX_LAYERS, ModelShape
from conftest import run_commcost, run_tool, one_error_line, strict_json

DRILL = ("--gpus", "32", "--bw", "25", "--latency", "20")
HUGE = str(10**310)  # 311 digits: float(HUGE) raises OverflowError


# --- 1 and 7: non-finite results never reach stdout ------------------------------------------

@pytest.mark.parametrize("args, flag", [
    (("--gpus", "32", "--bw", "25", "--latency", "1e308", "--params", "1.3", "--step-ms", "400", "--json"),
     "--latency"),
    (("--gpus", "32", "--bw", "5e-324", "--latency", "20", "--params", "1.3", "--step-ms", "400", "--json"), "--bw"),
    (("--gpus", "32", "--bw", "5e-324", "--latency", "20", "--params", "1.3", "--step-ms", "400"), "--bw"),
    (("--gpus", "32", "--bw", "1e7", "--latency", "20", "--params", "1.3", "--step-ms", "400"), "--bw"),
])
def test_drill_extreme_rates_are_refused_before_any_output(args, flag):
    # used to print 2,685 bytes of JSON, then a ValueError traceback (exit 1)
    line = one_error_line(run_tool(*args))
    assert f"argument {flag}:" in line and "between" in line


@pytest.mark.parametrize("args, flag", [
    (("timeline", "--gpus", "16", "--bw", "5e-324", "--latency", "5", "--params", "1.3", "--step-ms", "300",
      "--json"), "--bw"),
    (("budget", "--system", "dgx-h100", "--nodes", "4", "--params", "1.3", "--step-ms",
      "2.2250738585072014e-308", "--json"), "--step-ms"),
    (("scaling", "--bw", "25", "--latency", "1e308", "--params", "1", "--compute-ms", "100"), "--latency"),
    (("collective", "--op", "all_reduce", "--size", "1e300", "--bw", "25", "--latency", "5", "--gpus", "8"),
     "--size"),
])
def test_subcommand_extreme_values_are_refused(args, flag):
    line = one_error_line(run_commcost(*args))
    assert flag in line


def test_step_bound_is_in_the_message():
    line = one_error_line(run_tool(*DRILL, "--params", "1.3", "--step-ms", "1e-9"))
    assert line == "commcost: error: --step-ms must be between 1e-06 and 1e+09 ms, got 1e-09"


def test_dump_json_refuses_before_writing_and_names_the_path():
    out = io.StringIO()
    with pytest.raises(InputError) as exc:
        dump_json({"inputs": {"gpus": 32}, "allreduce": {"terms": [1.0, float("inf")]}}, out)
    assert out.getvalue() == ""  # nothing half-written
    assert "allreduce.terms[1]" in str(exc.value) and "(inf)" in str(exc.value)
    assert find_non_finite({"a": [1, 2.5, {"b": None}]}) is None
    assert find_non_finite([[[[float("nan")]]]]) == ("[0][0][0][0]", pytest.approx(float("nan"), nan_ok=True))


def test_dump_json_matches_the_old_writer_byte_for_byte():
    obj = {"a": 1, "b": [0.1, 2e-7, None, "x"], "c": {"d": True}}
    out = io.StringIO()
    dump_json(obj, out)
    assert out.getvalue() == json.dumps(obj, indent=2, allow_nan=False) + "\n"


def test_drill_json_is_strict():
    r = run_tool(*DRILL, "--params", "1.3", "--step-ms", "400", "--json")
    assert r.returncode == 0, r.stderr
    strict_json(r.stdout)


# --- the guard behind the bounds: the dispatcher -----------------------------------------------

def _fake_subcommand(monkeypatch, run):
    module = types.ModuleType("commcost_test_fake")
    module.HELP = "a fake subcommand for the dispatcher's tests"
    module.add_arguments = lambda p: None
    module.run = run
    monkeypatch.setitem(sys.modules, "commcost_test_fake", module)
    monkeypatch.setitem(__import__("commcost.cli", fromlist=["SUBCOMMANDS"]).SUBCOMMANDS, "fake",
                        "commcost_test_fake")


def _exit_code(argv) -> int:
    try:
        return main(argv)
    except SystemExit as exc:
        return exc.code


def test_text_report_with_inf_is_refused_whole(monkeypatch, capsys):
    def run(args):
        print("total           T              =        inf s")
        return 0
    _fake_subcommand(monkeypatch, run)
    assert _exit_code(["fake"]) == 2
    out, err = capsys.readouterr()
    assert out == ""  # the report is held until it is known to be finite
    assert err.startswith("commcost: error: a result is not a finite number ('total") and err.count("\n") == 1


@pytest.mark.parametrize("text, bad", [
    ("T = inf s", True), ("ratio is infx the latency term", True), ("-inf%", True), ("x = nan", True),
    ("InfiniBand info: nanoGPT on infiniband", False), ("in-network NVLS", False), ("1e+300 s", False),
])
def test_non_finite_token(text, bad):
    assert (find_non_finite_token(text) is not None) is bad


@pytest.mark.parametrize("exc, code, fragment", [
    (ZeroDivisionError("float division by zero"), 1, "internal error: ZeroDivisionError: float division by zero"),
    (OSError(errno.ENOSPC, "No space left on device", "out.csv"), 1, "out.csv: No space left on device"),
    (OSError(errno.ENOENT, "No such file or directory", "in.csv"), 2, "in.csv: No such file or directory"),
    (RecursionError("maximum recursion depth exceeded"), 2, "nested too deeply"),
    (KeyboardInterrupt(), 130, None),
])
def test_dispatcher_turns_every_ending_into_one_line(monkeypatch, capsys, exc, code, fragment):
    def run(args):
        print("half a report")
        raise exc
    _fake_subcommand(monkeypatch, run)
    assert _exit_code(["fake"]) == code
    out, err = capsys.readouterr()
    assert out == "" and err.count("\n") == 1 and "Traceback" not in err
    if fragment is None:
        assert err == "commcost: interrupted\n"
    else:
        assert err.startswith("commcost: error: ") and fragment in err


# --- 2: huge integers --------------------------------------------------------------------------

@pytest.mark.parametrize("args, flag", [
    (("budget", "--gpus", HUGE, "--bw", "25", "--latency", "20", "--params", "1.3", "--step-ms", "400"), "--gpus"),
    (("budget", *DRILL, "--layer-ratio", "--hidden", "4096", "--seq", "4096", "--micro-batch", HUGE),
     "--micro-batch"),
    (("budget", *DRILL, "--params", "1.3", "--step-ms", "400", "--grad-accum", HUGE), "--grad-accum"),
    (("timeline", *DRILL, "--params", "1.3", "--step-ms", "400", "--grad-accum", HUGE), "--grad-accum"),
    (("timeline", *DRILL, "--model", "gpt3-1.3b", "--step-ms", "400", "--seq", HUGE), "--seq"),
    (("scaling", "--gpus-per-node", HUGE), "--gpus-per-node"),
    (("scaling", "--gpus", f"8,{HUGE}"), "--gpus"),
    (("collective", "--op", "all_reduce", "--size", "1GiB", "--system", "dgx-h100", "--nodes", HUGE), "--nodes"),
])
def test_huge_integers_are_one_line(args, flag):
    # used to be OverflowError: int too large to convert to float
    line = one_error_line(run_commcost(*args))
    assert flag in line and "<= 1e+12" in line


@pytest.mark.parametrize("args, message", [
    (("--gpus", "2000000"), "--gpus must be between 1 and 1,000,000 GPUs, got 2,000,000"),
    (("--grad-accum", "10000000"), "--grad-accum must be between 1 and 1,000,000 micro-batches, got 10,000,000"),
])
def test_each_flag_has_a_sane_bound_named_in_the_message(args, message):
    base = dict(zip(DRILL[::2], DRILL[1::2]))
    base.update(dict(zip(args[::2], args[1::2])))
    argv = [x for kv in base.items() for x in kv] + ["--params", "1.3", "--step-ms", "400"]
    assert one_error_line(run_tool(*argv)) == f"commcost: error: {message}"


# --- 5: the timeline refuses a huge model before building it -------------------------------------

def test_timeline_huge_layer_count_is_refused_at_once():
    # --layers 10000000000 ran 40 s at 3.1 GB before; 10,000,000 failed after 49 s labelled --model
    line = one_error_line(run_commcost("timeline", "--gpus", "16", "--bw", "50", "--latency", "5", "--layers",
                                       "10000000000", "--hidden", "2048", "--seq", "2048", "--step-ms", "300"))
    assert line == "commcost: error: --layers must be between 1 and 10,000 layers, got 10,000,000,000"


def test_timeline_shape_too_large_to_simulate_names_the_shape_flags():
    # 10,000 layers of 12 * 20,000^2 = 4.8e9 params each = 4.8e13 params, 9.6e13 B at bf16: 3.66e6 buckets
    # of 25 MiB > 2^20; the error said "--model" though no --model was given
    line = one_error_line(run_commcost("timeline", "--gpus", "16", "--bw", "50", "--latency", "5", "--layers",
                                       "10000", "--hidden", "20000", "--seq", "2048", "--step-ms", "300"))
    assert line.startswith("commcost: error: --layers/--hidden: a 9.6e+13-byte gradient") and "1,048,576" in line


def test_model_shape_guard_runs_before_the_per_layer_model():
    # the library refuses alone (a notebook user has no flags): O(1) closed-form count, no layer list
    with pytest.raises(InputError, match=f"layers must be at most {MAX_LAYERS:,}, got 10,000,000"):
        ModelShape(layers=10_000_000, hidden=2048, seq=2048)
    # 10,000 layers of 12 h^2 = 12e12 params each at h = 1e6 is 1.2e17 > 1e15
    with pytest.raises(InputError, match="1.2e\\+17 parameters; at most 1e\\+15"):
        ModelShape(layers=10_000, hidden=10**6, seq=2048)


# --- 8: flags are never silently ignored ---------------------------------------------------------

@pytest.mark.parametrize("runner, args", [
    (run_tool, (*DRILL, "--params", "1.3", "--step-ms", "400", "--algorithm", "magic")),
    (run_commcost, ("timeline", *DRILL, "--params", "1.3", "--step-ms", "400", "--algorithm", "magic")),
    (run_commcost, ("scaling", "--algorithm", "magic")),
    (run_commcost, ("collective", "--op", "all_reduce", "--size", "1GiB", *DRILL, "--algorithm", "magic")),
])
def test_unknown_algorithm_is_refused_everywhere(runner, args):
    line = one_error_line(runner(*args))
    assert "argument --algorithm: unknown algorithm 'magic' (valid: auto, ring" in line


def test_empty_algorithm_is_refused():
    # scaling --algorithm '' used the default
    line = one_error_line(run_commcost("scaling", "--bw", "25", "--latency", "5", "--params", "1",
                                       "--compute-ms", "100", "--algorithm", ""))
    assert "unknown algorithm ''" in line


@pytest.mark.parametrize("args, flag", [
    (("scaling", "--csv", ""), "--csv"),
    (("scaling", "--plot", ""), "--plot"),
    (("timeline", *DRILL, "--params", "1.3", "--step-ms", "400", "--plot", ""), "--plot"),
])
def test_empty_output_names_are_refused(args, flag):
    # scaling --csv '' said "'' is a directory"
    assert one_error_line(run_commcost(*args)) == f"commcost: error: {flag} '': expected a file name, got an empty one"


# --- issue 9: rates and latencies with units; raw parameter counts ------------------------------

def test_rates_with_units_give_the_same_report_byte_for_byte():
    # 400 Gb/s = 400e9 / 8 = 50e9 B/s = 50 GB/s; 20 us = 0.02 ms = 2e-5 s
    plain = run_tool("--gpus", "32", "--bw", "50", "--latency", "20", "--params", "1.3", "--step-ms", "400")
    assert plain.returncode == 0, plain.stderr
    for bw, lat in (("400Gbps", "20us"), ("50GB/s", "0.02ms"), ("400Gb/s", "2e-5s"), ("50 GB/s", "20000ns")):
        r = run_tool("--gpus", "32", "--bw", bw, "--latency", lat, "--params", "1.3", "--step-ms", "400")
        assert (r.returncode, r.stdout, r.stderr) == (0, plain.stdout, ""), (bw, lat)


@pytest.mark.parametrize("text, gb_per_s", [
    ("25", 25.0), ("25GB/s", 25.0), ("25GBps", 25.0), ("200Gbps", 25.0), ("1TB/s", 1000.0),
    ("1GiB/s", 1.073741824), ("12.5e9B/s", 12.5), ("800Mb/s", 0.1),
])
def test_rate_units(text, gb_per_s):
    assert rate_gb_per_s(text) == pytest.approx(gb_per_s, rel=1e-12)


@pytest.mark.parametrize("text, us", [("20", 20.0), ("20us", 20.0), ("0.02ms", 20.0), ("500ns", 0.5), ("1s", 1e6)])
def test_latency_units(text, us):
    assert latency_us(text) == pytest.approx(us, rel=1e-12)


@pytest.mark.parametrize("text", ["50GB", "50 mb/s", "5Gib/s", "fast", "inf", "nan", "1e400GB/s", ""])
def test_bad_rates_are_one_line(text):
    line = one_error_line(run_tool("--gpus", "32", "--bw", text, "--latency", "20", "--params", "1.3",
                                   "--step-ms", "400"))
    assert "argument --bw:" in line


@settings(max_examples=200, deadline=None)
@given(st.floats(min_value=1e-6, max_value=1e6, allow_nan=False))
def test_rate_forms_agree(gb):
    # bits are bytes x 8; the bare number is GB/s
    assert rate_gb_per_s(f"{gb!r}") == gb
    assert rate_gb_per_s(f"{gb!r}GB/s") == pytest.approx(gb, rel=1e-12)
    assert parse_rate_bytes_per_s(f"{gb * 8!r}Gbps") == pytest.approx(gb * 1e9, rel=1e-12)


@settings(max_examples=200, deadline=None)
@given(st.floats(min_value=0, max_value=1e7, allow_nan=False))
def test_latency_forms_agree(us):
    assert nonneg_latency_us(f"{us!r}") == us
    assert parse_time_s(f"{us / 1000!r}ms") == pytest.approx(us * 1e-6, rel=1e-12, abs=1e-300)
    assert math.isfinite(parse_time_s(f"{us!r}us"))


@pytest.mark.parametrize("value, meant", [("7e9", "7"), ("1300000000", "1.3"), ("1e6", "0.001")])
def test_raw_parameter_count_is_refused_with_the_likely_intent(value, meant):
    # --params is in billions: 7e9 billion is 7e18 parameters; the user meant 7e9 / 1e9 = 7
    line = one_error_line(run_tool(*DRILL, "--params", value, "--step-ms", "400"))
    assert line.endswith(f"did you mean {meant} (billions)?")


def test_params_just_under_the_raw_count_limit_runs():
    # 999,999 billion = 1e15 params: 2e15 B / 25 MiB = 7.6e7 buckets > 2^20, so the bucket guard speaks
    line = one_error_line(run_tool(*DRILL, "--params", "999999", "--step-ms", "400"))
    assert "1,048,576" in line
