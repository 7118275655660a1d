"""The drill's start-up path stays light: the flat drill imports none of the modules only a fabric,
a profile or a model shape needs (benchmarks/cli_startup.py measures the time; this pins the cause)."""

from __future__ import annotations

import subprocess
import sys

from conftest import ROOT

HEAVY = ("commcost.hardware.registry", "commcost.hardware", "commcost.comm.topology", "commcost.comm.algorithms",
         "commcost.comm.protocols", "commcost.comm.fabric_model", "commcost.comm.profile_model",
         "commcost.workload.shape", "commcost.calibrate", "typing", "json")


def test_the_drill_imports_no_fabric_profile_or_shape_modules():
    code = ("import io, contextlib, sys; sys.path.insert(0, 'src'); from commcost.cli import budget_main\n"
            "with contextlib.redirect_stdout(io.StringIO()):\n"
            "    budget_main(['--gpus', '32', '--bw', '25', '--latency', '20', '--params', '1.3', '--step-ms', '400',"
            " '--buckets', '1,8,16,25,100'])\n"
            f"print(','.join(m for m in {HEAVY!r} if m in sys.modules))")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=60)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == ""
