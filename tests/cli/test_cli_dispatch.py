"""The dispatcher's guards (commcost.cli.__init__): a report is refused for a non-finite number it
prints, never for a file name the user chose (issue 24 item 1)."""

from __future__ import annotations

import shutil

import pytest

from commcost.cli import find_non_finite_token
from conftest import DATA, run_commcost

LOG = DATA / "nccl_tests" / "h100_ib_2node_16gpu_all_reduce.log"
TRACE = DATA / "traces" / "trace_filter__sampled_rank-0.json.gz"


def test_trace_of_a_file_named_inf_is_reported(tmp_path):
    path = tmp_path / "inf.json"
    shutil.copy(TRACE, path)
    r = run_commcost("trace", str(path))
    assert r.returncode == 0, r.stderr
    assert str(path) in r.stdout


def test_fit_into_a_directory_named_nan_is_written(tmp_path):
    (tmp_path / "nan").mkdir()
    out = tmp_path / "nan" / "p.json"
    r = run_commcost("fit", str(LOG), "-o", str(out))
    assert r.returncode == 0, r.stderr
    assert out.exists() and f"profile written: {out}" in " ".join(r.stdout.split())      # wrapped to 80 columns


@pytest.mark.parametrize("text, names, bad", [
    ("trace inf.json: 3 ranks", (), False),          # an extension after it: a file name
    ("written to runs/nan", (), False),               # after a slash: a path component
    ("written to nan/p.json", ("nan/p.json",), False),
    ("source inf", ("inf",), False),                  # exactly what the user typed
    ("source runs/inf.json, T = inf s", ("runs/inf.json",), True),  # the number beside it is caught
    ("T = inf.", (), True),                           # the end of a sentence is not an extension
    ("T = nan s", ("nan.json",), True),
])
def test_non_finite_token_skips_names(text, names, bad):
    assert (find_non_finite_token(text, names) is not None) is bad


SLEEPER = """
import sys, time, types
sys.path.insert(0, {src!r})
from commcost import cli
mod = types.ModuleType("commcost.cli._sleeper")
mod.HELP = "sleeps"
mod.add_arguments = lambda p: None
def run(args):
    print("half a report")
    open({ready!r}, "w").close()
    time.sleep(60)
mod.run = run
sys.modules[mod.__name__] = mod
cli.SUBCOMMANDS["sleeper"] = mod.__name__
sys.exit(cli.main(["sleeper"]))
"""


def test_sigterm_is_one_line_and_exit_143(tmp_path):
    # item 10: SIGTERM killed every subcommand but measure by the default action (no line, exit -15)
    import os
    import signal
    import subprocess
    import sys
    import time

    from conftest import ROOT

    ready = tmp_path / "ready"
    proc = subprocess.Popen([sys.executable, "-c", SLEEPER.format(src=str(ROOT / "src"), ready=str(ready))],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 60
    while not ready.exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    os.kill(proc.pid, signal.SIGTERM)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 143
    assert out == ""                                  # the held half report is not printed
    assert err == "commcost: terminated (SIGTERM)\n"


def test_sigterm_handler_is_restored_after_a_run():
    import signal

    from commcost.cli import main

    before = signal.getsignal(signal.SIGTERM)
    assert main(["presets"]) == 0
    assert signal.getsignal(signal.SIGTERM) is before
