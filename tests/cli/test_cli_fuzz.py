"""Issue 10's fuzz test: every subcommand, driven through ``commcost.cli.main(argv)`` with hostile
values (extremes, non-numbers, huge integers, units, bad names, bad paths, malformed files).

For every run: the exit status is 0, 1 or 2; nothing prints a traceback; a failure is one
``commcost: error:`` line with nothing on stdout; ``--json`` output parses with a strict parser (no
NaN, no Infinity); a text report holds no ``inf``/``nan``; and neither last-resort guard (the strict
JSON writer's, the dispatcher's text scan) is what stopped the run: the input bounds did. Bounded to a
few hundred examples (~30 s on 2 cores); a few fixed cases also run as a user would, in a subprocess.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import signal
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from commcost.cli import find_non_finite_token, main
from conftest import DATA, run_commcost, run_tool
from conftest import strict_json

LOG = str(DATA / "nccl_tests" / "h100_ib_2node_16gpu_all_reduce.log")
HUGE = str(10**310)

NUMBERS = st.sampled_from([
    "0", "-1", "1", "2", "3", "7", "16", "64", "1e6", "7e9", "1e308", "-1e308", "5e-324", "2.2250738585072014e-308",
    "1e-9", "nan", "inf", "-inf", "Infinity", "", " ", "abc", "1,2", "0x10", "1_000", HUGE, "-" + HUGE,
    "0.5", "0.999999", "1.0000001", "1e-6", "1e7", "999999",
])
RATES = st.sampled_from(["25", "400Gbps", "50GB/s", "1e-6", "1e6", "46.6GiB/s", "1kB/s", "1PB/s", "2PB/s",
                         "5Gib/s", "50 mb/s", "0B/s"]) | NUMBERS
TIMES = st.sampled_from(["20", "20us", "0.02ms", "500ns", "1s", "10s", "11s", "0", "1e7", "5ms"]) | NUMBERS
SIZES = st.sampled_from(["1GiB", "25MB", "4096", "8B:8GiB", "1MiB:1GiB:4", "1MiB,8MiB", "0.5", "8B:8XB",
                         "1e300", "1EiB", "2EiB", "3:7", "1KiB:64MiB", "64MiB:1KiB", "1KiB:4KiB:1.0001",
                         "1MiB,,2MiB", "1KiB:1KiB"]) | NUMBERS
NAMES = st.sampled_from(["auto", "ring", "tree", "magic", "", "halving_doubling", "hierarchical", "in_network",
                         "direct", "all_reduce", "all_gather", "gpt3-1.3b", "llama2-7b", "7b", "dgx-h100", "nope",
                         "bf16", "fp32", "fp8", "int4", "nvlink", "infiniband", "1.3b,7b", "all"])
OUT_PATHS = st.sampled_from(["", " ", "/nonexistent/dir/x.png", ".", "out.txt", "/proc/x.json"])

WORK = Path(tempfile.mkdtemp(prefix="commcost-fuzz-"))
"""Where hostile runs write (relative output paths, probes) and where the hostile input files live."""


def _inputs() -> dict[str, str]:
    """Malformed and valid input files, made once."""
    files = {
        "deep.json": '{"a":' * 50_000 + "1" + "}" * 50_000,
        "deeplist.json": "[" * 50_000 + "]" * 50_000,
        "empty.csv": "",
        "binary.log": "\x00\xff\xfe" * 100,
        "notjson.json": "{not json",
        "wrong.json": json.dumps({"version": 1, "kind": "commcost-measurement", "rows": [{"gpus": [4]}]}),
        "nan.json": '{"version": 1, "kind": "commcost-profile", "op": "all_reduce", "algorithm": "ring", '
                    '"gpus": 16, "regimes": [{"min_size_bytes": 0, "max_size_bytes": null, "alpha_s": NaN, '
                    '"bandwidth_bytes_per_s": 1e-308}], "quality": {"r2": NaN, "median_abs_rel_error": 0, '
                    '"max_abs_rel_error": 0, "points": 3}}',
    }
    log_lines = Path(LOG).read_text().splitlines()
    log_lines[59] = log_lines[59].replace("    33554432", "1" + "0" * 180, 1)
    files["huge_perf.log"] = "\n".join(log_lines) + "\n"
    out = {}
    for name, text in files.items():
        (WORK / name).write_text(text, encoding="utf-8", errors="surrogateescape")
        out[name] = str(WORK / name)
    good = WORK / "good.profile.json"
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        assert main(["fit", LOG, "-o", str(good)]) == 0
    out["good.profile.json"] = str(good)
    return out


INPUTS = _inputs()
LOGS = st.sampled_from(sorted(str(p) for p in (DATA / "nccl_tests").iterdir() if p.suffix in (".log", ".txt")))
FILES = LOGS | st.sampled_from([*INPUTS.values(), "/nonexistent.log", str(WORK)])
FILES_ANY = st.just(INPUTS["good.profile.json"]) | FILES
TRACES = st.sampled_from(sorted(str(p) for p in (DATA / "traces").iterdir() if p.name.endswith((".json", ".gz")))
                         + [str(DATA / "traces")])


def v(*typical: str) -> st.SearchStrategy:
    """Half the time a typical or edge-of-range value (so that runs get past parsing into the library),
    half the time a hostile one."""
    return st.sampled_from(typical) | NUMBERS


def n(*typical: str) -> st.SearchStrategy:
    return st.sampled_from(typical) | NAMES


FRACTION = v("0.5", "1", "0.01", "0.999")
FLAGS: dict[str, dict[str, st.SearchStrategy]] = {
    "budget": {"--gpus": v("2", "8", "256", "1000000"), "--bw": st.sampled_from(["25", "1e-6", "1e6"]) | RATES,
               "--latency": st.sampled_from(["20", "0.001", "1e7"]) | TIMES,
               "--params": v("1.3", "70", "1e-9", "13000"), "--step-ms": v("400", "1e-6", "1e9"),
               "--grad-accum": v("1", "4", "1000000"), "--backward-fraction": FRACTION, "--threshold": FRACTION,
               "--fix-grad-accum": v("4", "1000000"), "--buckets": v("1,8,25", "0.001", "1e6", "1,1,1"),
               "--max-latency-share": FRACTION, "--tail-budget": FRACTION, "--intra-bw": v("300", "1e-6", "1e6"),
               "--intra-latency": v("1", "1e7"), "--dtype": n("bf16", "fp32", "fp8"),
               "--algorithm": n("auto", "ring", "tree"), "--micro-batch": v("1", "8", "1000000"),
               "--tflops": v("400", "1e-6", "1e6")},
    "timeline": {"--gpus": v("2", "16", "1000000"), "--bw": st.sampled_from(["50", "1e-6", "1e6"]) | RATES,
                 "--latency": st.sampled_from(["5", "0.001", "1e7"]) | TIMES, "--params": v("1.3", "0.001", "100"),
                 "--step-ms": v("300", "1e-6", "1e9"), "--grad-accum": v("1", "8", "1000000"),
                 "--optimizer-ms": v("0", "5", "1e9"), "--bucket": v("auto", "25", "1", "1e-6", "1099511627776"),
                 "--first-bucket": v("1", "0.000001", "1e6"), "--model": n("gpt3-1.3b", "llama2-7b", "gpt2-small"),
                 "--dtype": n("bf16", "fp32"), "--algorithm": n("auto", "ring"), "--backward-fraction": FRACTION,
                 "--plot": OUT_PATHS, "--trace-out": st.sampled_from(["t.json", "t.json.gz"]) | OUT_PATHS},
    "scaling": {"--bw": st.sampled_from(["25", "1e-6", "1e6"]) | RATES,
                "--latency": st.sampled_from(["5", "0", "1e7"]) | TIMES, "--params": v("1", "1e-9", "999999"),
                "--compute-ms": v("100", "1e-6", "1e9"), "--gpus": v("1,8,64", "1", "1000000", "2,1000000"),
                "--overlap": FRACTION | st.just("0"), "--overhead-ms": v("0", "0.5", "1e9"),
                "--dtype": n("bf16", "fp32"), "--algorithm": n("ring", "tree", "auto"), "--csv": OUT_PATHS,
                "--plot": OUT_PATHS},
    "collective": {"--op": n("all_reduce", "all_gather", "reduce_scatter", "broadcast", "all_to_all",
                             "send_recv", "reduce"), "--size": SIZES, "--gpus": v("2", "8", "1000000"),
                   "--algorithm": n("auto", "ring", "tree", "direct"),
                   "--bw": st.sampled_from(["25", "1e-6", "1e6"]) | RATES,
                   "--latency": st.sampled_from(["5", "0", "1e7"]) | TIMES},
    "collective-system": {"--op": n("all_reduce", "all_gather"), "--size": SIZES, "--system": n("dgx-h100"),
                          "--nodes": v("1", "4", "100000"), "--gpus-per-node": v("8", "4", "1024"),
                          "--oversubscription": v("1", "2", "1e6"), "--algorithm": n("auto", "in_network")},
    "collective-custom": {"--gpus-per-node": v("4", "8"), "--nodes": v("1", "2", "100000"),
                          "--intra-bw": v("100", "1e-6", "1e6") | RATES, "--intra-latency": v("1", "0") | TIMES,
                          "--inter-bw": v("25", "1e-6") | RATES, "--inter-latency": v("5", "1e7") | TIMES,
                          "--nvls-bw": v("400", "1e-6"), "--launch-latency": v("0", "10s") | TIMES},
    "budget-system": {"--nodes": v("1", "4", "100000"), "--gpus-per-node": v("8", "4", "1024"),
                      "--gpus": v("8", "32", "1000000"), "--algorithm": n("auto", "ring", "in_network"),
                      "--system": n("dgx-h100", "dgx-a100", "gb200-nvl72"), "--params": v("1.3", "70", "1e-9"),
                      "--step-ms": v("400", "1e-6", "1e9"), "--buckets": v("1,8,25", "0.001"),
                      "--backend": n("nccl", "gloo")},
    "budget-profile": {"--params": v("1.3", "1e-9", "13000"), "--step-ms": v("400", "1e-6", "1e9"),
                       "--gpus": v("16", "2", "1000000"), "--buckets": v("1,25", "1e6"), "--profile": FILES_ANY,
                       "--extrapolate": st.none(), "--backend": n("nccl", "gloo")},
    "timeline-shape": {"--layers": v("24", "1", "10000"), "--hidden": v("2048", "1", "1000000"),
                       "--seq": v("2048", "1", "100000000"), "--vocab": v("50257", "1", "100000000"),
                       "--bucket": v("auto", "25", "1e-6"), "--first-bucket": v("1", "1e6"),
                       "--grad-accum": v("1", "1000000"), "--step-ms": v("300", "1e-6", "1e9")},
    "timeline-system": {"--nodes": v("1", "4", "100000"), "--gpus-per-node": v("8", "1024"),
                        "--system": n("dgx-h100", "gb200-nvl72"), "--algorithm": n("auto", "ring", "tree"),
                        "--bucket": v("auto", "25"), "--model": n("gpt3-1.3b", "llama2-70b"),
                        "--backend": n("nccl", "gloo")},
    "scaling-system": {"--system": n("dgx-h100", "gb200-nvl72"), "--gpus-per-node": v("8", "4", "1024"),
                       "--gpus": v("1,8,64", "1000000"), "--algorithm": n("auto", "ring", "hierarchical"),
                       "--model": n("7b", "1.3b", "125m", "7b,1.3b"), "--overlap": FRACTION},
    "collective-profile": {"--op": n("all_reduce", "all_gather"), "--size": SIZES, "--gpus": v("16", "2", "64"),
                           "--profile": FILES_ANY, "--extrapolate": st.none(), "--backend": n("nccl", "gloo")},
    "plan": {"--gpus": v("32", "8", "1024", "1000000"), "--tp": v("1", "2", "8"), "--pp": v("1", "2", "4"),
             "--cp": v("1", "2"), "--ep": v("1", "8"), "--vp": v("1", "2"), "--dp": v("4", "1"),
             "--zero": st.sampled_from(["0", "1", "2", "3", "4", "-1"]), "--micro-batch": v("1", "2", "1000000"),
             "--global-batch": v("256", "1", "1000000"), "--seq": v("4096", "1", "100000000"),
             "--efficiency": FRACTION, "--mfu": FRACTION, "--measured-step-s": v("10", "1e-9", "1e9"),
             "--bucket-mb": v("25", "1e-6", "1e9"), "--precision": n("bf16", "fp8", "nvfp4"),
             "--recompute": st.sampled_from(["none", "selective", "full", "all"]),
             "--model": n("llama2-7b", "llama3-70b", "mixtral-8x7b", "deepseek-v3"),
             "--system": n("dgx-h100", "gb200-nvl72"), "--fsdp": st.none(), "--sequence-parallel": st.none(),
             "--save-calibration": OUT_PATHS},
    "plan-flat": {"--bw": st.sampled_from(["25", "1e-6", "1e6"]) | RATES, "--latency": TIMES,
                  "--gpus": v("16", "1000000"), "--layers": v("32", "1", "10000", "100000"),
                  "--hidden": v("4096", "1", "1000000"), "--heads": v("32", "1", "7"),
                  "--vocab": v("32000", "1"), "--experts": v("8", "1"), "--top-k": v("2", "1", "9")},
    "trace": {"--steps": v("1", "0", "1000000"), "--bw": st.sampled_from(["25", "1e-6"]) | RATES,
              "--latency": TIMES, "--system": n("dgx-h100"), "--profile": FILES_ANY,
              "--save-measurement": st.sampled_from(["t.csv", "t.json"]) | OUT_PATHS,
              "--hta-rounding": st.none(), "--backend": n("nccl", "gloo")},
    "presets": {"--kind": n("gpu", "fabric", "system")},
    "fit": {"--op": n("all_reduce"), "--gpus": v("16", "2"), "--max-regimes": v("1", "3", "100"),
            "-o": st.sampled_from(["p.json", "sub.json"]) | OUT_PATHS,
            "--placement": st.sampled_from(["best", "in_place", "out_of_place", "worst"])},
    "validate": {"--op": n("all_reduce"), "--gpus": v("16"), "--plot": OUT_PATHS},
    "measure": {"--sizes": SIZES, "--factor": v("2", "1.5", "1.01", "1e6"), "--nproc": v("2", "4", "1024"),
                "--timeout": v("300", "1", "1e7"), "--iters": v("1", "20"), "--warmup": v("0", "5"),
                "--dtype": n("float16", "float64", "bfloat16"), "--ops": n("all_reduce", "all", "all_gather"),
                "--backend": n("gloo", "nccl"), "-o": OUT_PATHS | st.just("rows.csv") | st.just("rows.json")},
}

BASE = {
    "budget": ["--gpus", "32", "--bw", "25", "--latency", "20", "--params", "1.3", "--step-ms", "400"],
    "timeline": ["--gpus", "16", "--bw", "50", "--latency", "5", "--params", "1.3", "--step-ms", "300"],
    "scaling": ["--bw", "25", "--latency", "5", "--params", "1", "--compute-ms", "100", "--gpus", "1,8,64"],
    "collective": ["--op", "all_reduce", "--size", "1GiB", "--bw", "25", "--latency", "5", "--gpus", "8"],
    "collective-system": ["--op", "all_reduce", "--size", "1GiB", "--system", "dgx-h100", "--nodes", "4"],
    "collective-custom": ["--op", "all_reduce", "--size", "1GiB", "--gpus-per-node", "8", "--nodes", "2",
                          "--intra-bw", "300", "--intra-latency", "1", "--inter-bw", "50", "--inter-latency", "5"],
    "presets": [],
    "plan": ["--model", "llama2-7b", "--system", "dgx-h100", "--gpus", "32", "--global-batch", "256"],
    "plan-flat": ["--layers", "32", "--hidden", "4096", "--heads", "32", "--seq", "4096", "--gpus", "16", "--global-batch", "64",
                  "--bw", "25", "--latency", "5", "--gpu", "h100-sxm"],
    "trace": ["TRACE"],
    "budget-system": ["--system", "dgx-h100", "--nodes", "4", "--params", "1.3", "--step-ms", "400"],
    "budget-profile": ["--profile", "GOOD_PROFILE", "--params", "1.3", "--step-ms", "400"],
    "timeline-shape": ["--gpus", "16", "--bw", "50", "--latency", "5", "--layers", "24", "--hidden", "2048",
                       "--seq", "2048", "--step-ms", "300"],
    "timeline-system": ["--system", "dgx-h100", "--nodes", "4", "--model", "gpt3-1.3b", "--step-ms", "300"],
    "scaling-system": ["--system", "dgx-h100", "--gpus", "8,16,64"],
    "collective-profile": ["--op", "all_reduce", "--sizes", "1KiB:1GiB", "--profile", "GOOD_PROFILE"],
    "fit": [LOG],
    "validate": [LOG],  # --profile added per example
    "measure": ["--backend", "gloo", "--sizes", "16KiB:64KiB"],
}



def _fake_measure(cfg, *, on_row=lambda m: None, on_progress=lambda done, total, what: None):
    """Stands in for the sweep (a fuzz test must not spawn ranks): one plausible row per size."""
    from commcost.calibrate.data import Measurement, MeasurementRow

    rows = tuple(MeasurementRow(op=op.value, gpus=cfg.nproc, size_bytes=s, count=s // 4, dtype=cfg.dtype,
                                time_s=1e-5 + s / 1e9, time_min_s=1e-5, time_max_s=2e-5 + s / 1e9,
                                algbw_bytes_per_s=s / (1e-5 + s / 1e9), busbw_bytes_per_s=s / (1e-5 + s / 1e9),
                                iters=cfg.iters) for op in cfg.ops for s in cfg.sizes_bytes)
    m = Measurement(rows=rows, provenance={"backend": cfg.backend})
    on_row(m)
    return m


def run_in_process(argv: list[str]) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    sigterm = signal.getsignal(signal.SIGTERM)
    cwd = os.getcwd()
    os.chdir(WORK)
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                code = main(argv)
            except SystemExit as exc:
                code = exc.code
    finally:
        os.chdir(cwd)
        signal.signal(signal.SIGTERM, sigterm)  # measure turns SIGTERM into an exception while it runs
    return code, out.getvalue(), err.getvalue()


def check(argv: list[str], code: int, out: str, err: str) -> None:
    """The properties every run must have, whatever its input."""
    assert code in (0, 1, 2), (argv, code, err)
    assert "Traceback" not in err and "Traceback" not in out, (argv, err)
    assert "internal error" not in err, (argv, err)
    assert "is not a finite number" not in err or "must be a finite number" in err, (argv, err)  # bounds, not guards
    if code != 0:
        assert out == "", (argv, out[:200])
        errors = [ln for ln in err.splitlines() if not ln.startswith("commcost: warning: ")]
        assert len(errors) == 1 and errors[0].startswith("commcost: error: "), (argv, err)
        return
    if "--json" in argv:
        strict_json(out)
    else:
        assert find_non_finite_token(out) is None, (argv, out)


@st.composite
def argvs(draw, command: str) -> list[str]:
    argv = [command.split("-")[0], *(a.replace("GOOD_PROFILE", INPUTS["good.profile.json"]) for a in BASE[command])]
    if command == "fit":
        argv[1] = draw(FILES)
    if command == "trace":
        argv[1] = draw(TRACES | FILES)
    if command == "validate":
        argv[1] = draw(FILES)
        argv += ["--profile", draw(st.just(INPUTS["good.profile.json"]) | FILES)]
    flags = FLAGS[command]
    for flag in draw(st.lists(st.sampled_from(sorted(flags)), min_size=1, max_size=3, unique=True)):
        value = draw(flags[flag])
        if value is None:  # a switch
            argv.append(flag)
        elif flag in argv:
            argv[argv.index(flag) + 1] = value
        else:
            argv += [flag, value]
    if command == "budget" and draw(st.booleans()) and "--hidden" not in argv:
        argv += ["--layer-ratio", "--hidden", draw(NUMBERS | st.just("4096")), "--seq", "4096"]
    if draw(st.booleans()):
        argv.append("--json")
    return argv


@pytest.mark.parametrize("command", sorted(FLAGS))
def test_fuzz_every_subcommand(command, monkeypatch):
    import commcost.cli.measure as measure_cli

    monkeypatch.setattr(measure_cli, "measure", _fake_measure)  # the name the subcommand calls
    examples = {"budget": 50, "timeline": 40, "scaling": 30, "collective": 30, "presets": 10, "fit": 30,
                "validate": 30, "measure": 30}.get(command, 20)

    @settings(max_examples=examples, deadline=None, database=None,
              suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
    @given(argvs(command))
    def fuzz(argv):
        check(argv, *run_in_process(argv))

    fuzz()


@pytest.mark.parametrize("argv", [
    ["--gpus", HUGE, "--bw", "5e-324", "--latency", "1e308", "--params", "7e9", "--step-ms", "nan", "--json"],
    ["--gpus", "32", "--bw", "1PB/s", "--latency", "10s", "--params", "999999", "--step-ms", "1e-6", "--json"],
    ["--gpus", "1000000", "--bw", "1e-6", "--latency", "0.001us", "--params", "1e-9", "--step-ms", "1e9"],
])
def test_fuzz_cases_as_a_user_runs_them(argv):
    r = run_tool(*argv)
    check(["budget", *argv], r.returncode, r.stdout, r.stderr)


@pytest.mark.parametrize("argv", [
    ["timeline", "--gpus", "1000000", "--bw", "1e-6", "--latency", "10s", "--params", "0.001", "--step-ms", "1e-6",
     "--bucket", "auto", "--json"],
    ["scaling", "--bw", "1e-6", "--latency", "10s", "--params", "999999", "--compute-ms", "1e-6", "--gpus",
     "1,1000000", "--json"],
    ["collective", "--op", "all_to_all", "--sizes", "1B:1EiB:1e6", "--bw", "1e-6", "--latency", "10s", "--gpus",
     "1000000", "--json"],
    ["fit", INPUTS["deep.json"], "--json"],
    ["validate", LOG, "--profile", INPUTS["nan.json"], "--json"],
])
def test_fuzz_extremes_as_a_user_runs_them(argv):
    r = run_commcost(*argv)
    check(argv, r.returncode, r.stdout, r.stderr)
