"""Every writer goes through one atomic writer (commcost.core.files, issue 24 item 5 and the
write part of item 16): past ``ulimit -f`` the old file is kept whole and the error names the file;
no temporary file is left behind; two writers of one path leave one whole file."""

from __future__ import annotations

import os
import resource
import subprocess
import sys

import pytest

from conftest import DATA, ROOT
from conftest import one_error_line

LOG = str(DATA / "nccl_tests" / "h100_ib_2node_16gpu_all_reduce.log")
SEARCH = ("search", "--model", "llama2-7b", "--system", "dgx-h100", "--gpus", "8", "--global-batch", "64",
          "--fix", "tp=8")
PLAN = ("plan", "--model", "llama2-7b", "--system", "dgx-h100", "--gpus", "32", "--global-batch", "256",
        "--measured-tflops", "300")
TIMELINE = ("timeline", "--gpus", "32", "--bw", "25", "--latency", "20", "--params", "1.3", "--step-ms", "400")
WRITERS = {  # what each writer is asked to write, with FILE where the path goes
    "scaling --csv": ("scaling", "--csv", "FILE.csv"),
    "scaling --plot": ("scaling", "--plot", "FILE.svg"),
    "timeline --plot": (*TIMELINE, "--plot", "FILE.svg"),
    "validate --plot": ("validate", LOG, "--profile", "PROFILE", "--plot", "FILE.svg"),
    "search --csv": (*SEARCH, "--csv", "FILE.csv"),
    "search --plot": (*SEARCH, "--plot", "FILE.svg"),
    "plan --save-calibration": (*PLAN, "--save-calibration", "FILE.json"),
    "fit -o": ("fit", LOG, "-o", "FILE.json"),
}
LIMIT_BYTES = 100
"""RLIMIT_FSIZE for the writer: every report above is longer, so each write fails part way (EFBIG)."""


def _run_limited(argv) -> subprocess.CompletedProcess:
    def limit():
        resource.setrlimit(resource.RLIMIT_FSIZE, (LIMIT_BYTES, LIMIT_BYTES))
    env = dict(os.environ, PYTHONPATH=str(ROOT / "src"))
    return subprocess.run([sys.executable, "-m", "commcost", *argv], capture_output=True, text=True, env=env,
                          cwd=ROOT, timeout=300, preexec_fn=limit)


@pytest.mark.parametrize("writer", WRITERS)
def test_a_write_past_ulimit_keeps_the_old_file_and_names_it(tmp_path_factory, writer):
    tmp_path = tmp_path_factory.mktemp("out")
    argv = list(WRITERS[writer])
    if "PROFILE" in argv:
        from conftest import run_commcost

        profile = tmp_path_factory.mktemp("profile") / "p.json"
        assert run_commcost("fit", LOG, "-o", str(profile)).returncode == 0
        argv[argv.index("PROFILE")] = str(profile)
    i = next(k for k, a in enumerate(argv) if a.startswith("FILE"))
    target = tmp_path / ("out" + argv[i][4:])
    argv[i] = str(target)
    target.write_text("old\n")
    line = one_error_line(_run_limited(argv), code=1)
    assert str(target) in line and "File too large" in line
    assert target.read_text() == "old\n"                        # not truncated, not half-written
    assert sorted(p.name for p in tmp_path.iterdir()) == [target.name]   # no temporary file left


def test_bytes_and_text_and_a_device(tmp_path):
    from commcost.core.files import write_atomic

    write_atomic(tmp_path / "a.bin", b"\x89PNG")
    write_atomic(tmp_path / "a.txt", "\u00e9\n")
    assert (tmp_path / "a.bin").read_bytes() == b"\x89PNG"
    assert (tmp_path / "a.txt").read_bytes() == b"\xc3\xa9\n"
    write_atomic("/dev/null", "x")                              # a device is written through, not replaced
    assert os.path.exists("/dev/null") and not os.path.isfile("/dev/null")


def test_two_writers_of_one_svg_leave_one_whole_file(tmp_path):
    # each writer renders to its own temporary file; the last rename wins, whole
    out = tmp_path / "s.svg"
    env = dict(os.environ, PYTHONPATH=str(ROOT / "src"))
    for _ in range(3):
        procs = [subprocess.Popen([sys.executable, "-m", "commcost", "scaling", "--plot", str(out)],
                                  stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env, cwd=ROOT)
                 for _ in range(2)]
        assert all(p.wait(timeout=300) == 0 for p in procs)
        text = out.read_text()
        assert text.count("<svg") == 1 and text.rstrip().endswith("</svg>")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["s.svg"]
