"""The atomic writer (``core/files.py``, issue 10 item 12): a new file honours the umask, a rewritten
one keeps its mode, links and devices are written through, and no temporary file is left or named."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys

import pytest

from commcost.core.files import write_atomic
from conftest import DATA, ROOT, run_commcost

LOG = DATA / "nccl_tests" / "h100_ib_2node_16gpu_all_reduce.log"


def _run_with_umask(mask, *args):
    env = dict(os.environ, PYTHONPATH=str(ROOT / "src"))
    return subprocess.run([sys.executable, "-m", "commcost", *args], capture_output=True, text=True, env=env,
                          cwd=ROOT, timeout=120, preexec_fn=lambda: os.umask(mask))


@pytest.mark.parametrize("mask, mode", [(0o022, 0o644), (0o077, 0o600), (0o002, 0o664)])
def test_new_profile_honours_the_umask(tmp_path, mask, mode):
    # mkstemp alone made every profile 0600; 0666 & ~umask is what open() gives
    out = tmp_path / "p.json"
    r = _run_with_umask(mask, "fit", str(LOG), "-o", str(out))
    assert r.returncode == 0, r.stderr
    assert stat.S_IMODE(out.stat().st_mode) == mode


def test_rewritten_profile_keeps_its_mode(tmp_path):
    out = tmp_path / "p.json"
    out.write_text("{}")
    out.chmod(0o640)
    r = _run_with_umask(0o077, "fit", str(LOG), "-o", str(out))
    assert r.returncode == 0, r.stderr
    assert stat.S_IMODE(out.stat().st_mode) == 0o640 and json.loads(out.read_text())["kind"] == "commcost-profile"


def test_profile_through_a_symlink_keeps_the_link(tmp_path):
    target = tmp_path / "real.json"
    target.write_text("{}")
    link = tmp_path / "link.json"
    link.symlink_to(target)
    r = run_commcost("fit", str(LOG), "-o", str(link))
    assert r.returncode == 0, r.stderr
    assert link.is_symlink() and os.readlink(link) == str(target)
    assert json.loads(target.read_text())["kind"] == "commcost-profile"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["link.json", "real.json"]


def test_profile_to_a_device_writes_through_it(tmp_path):
    # -o n.json where n.json was a character device turned it into a regular 0600 file
    r = run_commcost("fit", str(LOG), "-o", os.devnull)
    assert r.returncode == 0, r.stderr
    assert stat.S_ISCHR(os.stat(os.devnull).st_mode)
    fifo = tmp_path / "pipe.json"
    os.mkfifo(fifo)
    reader = subprocess.Popen(["cat", str(fifo)], stdout=subprocess.PIPE, text=True)
    r = run_commcost("fit", str(LOG), "-o", str(fifo))
    out, _ = reader.communicate(timeout=60)
    assert r.returncode == 0, r.stderr
    assert stat.S_ISFIFO(fifo.stat().st_mode) and json.loads(out)["kind"] == "commcost-profile"


def test_write_atomic_leaves_no_temporary_file(tmp_path):
    write_atomic(tmp_path / "a.txt", "one\n")
    write_atomic(tmp_path / "a.txt", "two\n")
    assert [p.name for p in tmp_path.iterdir()] == ["a.txt"] and (tmp_path / "a.txt").read_text() == "two\n"


def test_write_failure_names_the_target_not_the_temporary_file(tmp_path):
    # a write that fails (here: the directory went away) used to name ".x.abc123.tmp"
    target = tmp_path / "gone" / "rows.csv"
    with pytest.raises(OSError) as exc:
        write_atomic(target, "x\n")
    assert exc.value.filename == str(target)
