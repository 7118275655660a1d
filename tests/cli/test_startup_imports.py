"""The drill's start-up path stays light: the flat drill imports none of the modules only a fabric,
a profile or a model shape needs (benchmarks/cli_startup.py measures the time; this pins the cause)."""

from __future__ import annotations

import subprocess
import sys

from conftest import ROOT

HEAVY = ("commcost.hardware.registry", "commcost.hardware", "commcost.comm.topology", "commcost.comm.algorithms",
         "commcost.comm.protocols", "commcost.comm.fabric_model", "commcost.comm.profile_model",
         "commcost.workload.shape", "commcost.calibrate", "typing", "json")


def _run_then(call: str, report: str) -> str:
    """stdout of a fresh interpreter (``src/`` first on the path) that runs ``call`` (a statement, its stdout
    swallowed; ``code`` may hold its exit status) and then prints the expression ``report``."""
    code = ("import io, contextlib, sys, tempfile, os; sys.path.insert(0, 'src'); from commcost.cli import main, "
            "budget_main\nwith contextlib.redirect_stdout(io.StringIO()):\n"
            f"    {call}\nprint({report})")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=60)
    assert r.returncode == 0, r.stderr
    return r.stdout


def test_the_drill_imports_no_fabric_profile_or_shape_modules():
    out = _run_then("budget_main(['--gpus', '32', '--bw', '25', '--latency', '20', '--params', '1.3', '--step-ms', "
                    "'400', '--buckets', '1,8,16,25,100'])", f"','.join(m for m in {HEAVY!r} if m in sys.modules)")
    assert out.strip() == ""


PLAN_UNUSED = ("commcost.trace", "commcost.calibrate.fit", "commcost.calibrate.profile",
               "commcost.calibrate.nccl_tests", "commcost.report.chrome_trace",
               "commcost.report.training", "commcost.analyses.plan.search", "commcost.analyses.plan.grid",
               "commcost.analyses.plan.training_cost", "importlib.resources",
               "commcost.report.html", "commcost.formats.readers", "commcost.formats.hf_config",
               "commcost.formats.emit", "numpy")
"""Modules the README's first plan example has no use for (``plan`` imports what it uses):
the trace reader, calibration's fits, the Chrome-trace writer (only with --trace-out), the training cost
(only with --train-tokens), the HTML page (--html), the job-file and config readers (--from,
--hf-config), search's enumeration and --emit."""


def test_the_plan_command_imports_only_what_it_uses():
    out = _run_then("code = main('plan --model llama3-70b --system dgx-h100 --gpus 1024 --global-batch 1024 --tp 8 "
                    "--pp 4 --vp 5 --zero 1'.split())", f"code, ','.join(m for m in {PLAN_UNUSED!r} if m in sys.modules)")
    assert out.split() == ["0"]   # exit status 0 and none of the modules loaded


def test_plan_still_loads_what_its_options_need():
    # the lazy imports are where the options are: --train-tokens prices the run, --trace-out writes the trace
    out = _run_then("out = os.path.join(tempfile.mkdtemp(), 't.json'); code = main(['plan', '--model', 'llama2-7b', "
                    "'--system', 'dgx-h100', '--gpus', '64', '--global-batch', '256', '--zero', '1', '--train-tokens', "
                    "'2T', '--trace-out', out])", "code, 'commcost.analyses.plan.training_cost' in sys.modules, "
                    "'commcost.report.chrome_trace' in sys.modules, os.path.getsize(out) > 0")
    assert out.split() == ["0", "True", "True", "True"]
