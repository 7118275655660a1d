"""The flag parsers of ``cli/_args.py`` (issue 10, items 1, 2, 5, 7, 8): every hostile value -- extreme,
huge, empty, unknown -- is one line on stderr and exit 2 naming the flag and its bound, with nothing on
stdout. Each case runs the command as a user would (a subprocess, nothing installed)."""

from __future__ import annotations

import pytest

from conftest import run_commcost, run_tool, one_error_line

DRILL = ("--gpus", "32", "--bw", "25", "--latency", "20")

HUGE = str(10**310)  # 311 digits: float(HUGE) raises OverflowError


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


def test_timeline_huge_layer_count_is_refused_at_once():
    # --layers 10000000000 ran 40 s at 3.1 GB before; 10,000,000 failed after 49 s labelled --model
    line = one_error_line(run_commcost("timeline", "--gpus", "16", "--bw", "50", "--latency", "5", "--layers",
                                       "10000000000", "--hidden", "2048", "--seq", "2048", "--step-ms", "300"))
    assert line == "commcost: error: --layers must be between 1 and 10,000 layers, got 10,000,000,000"


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


@pytest.mark.parametrize("value, meant", [("7e9", "7"), ("1300000000", "1.3"), ("1e6", "0.001")])
def test_raw_parameter_count_is_refused_with_the_likely_intent(value, meant):
    # --params is in billions: 7e9 billion is 7e18 parameters; the user meant 7e9 / 1e9 = 7
    line = one_error_line(run_tool(*DRILL, "--params", value, "--step-ms", "400"))
    assert line.endswith(f"did you mean {meant} (billions)?")


def test_params_just_under_the_raw_count_limit_runs():
    # 999,999 billion = 1e15 params: 2e15 B / 25 MiB = 7.6e7 buckets > 2^20, so the bucket guard speaks
    line = one_error_line(run_tool(*DRILL, "--params", "999999", "--step-ms", "400"))
    assert "1,048,576" in line
