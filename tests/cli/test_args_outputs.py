"""Output files as ``cli/_args.py`` checks them before any work (issue 10, items 8 and 11): an empty name or a
directory no file can be created in is one line naming the flag."""

from __future__ import annotations

import subprocess

import pytest

from conftest import DATA, run_commcost
from conftest import one_error_line

LOG = DATA / "nccl_tests" / "h100_ib_2node_16gpu_all_reduce.log"


def _unwritable_dir(tmp_path):
    """A directory no file can be created in: mode 555, and immutable where root ignores the mode."""
    d = tmp_path / "locked"
    d.mkdir()
    d.chmod(0o555)
    try:
        (d / "probe").touch()
    except OSError:
        return d, lambda: d.chmod(0o755)
    (d / "probe").unlink()
    subprocess.run(["chattr", "+i", str(d)], check=True)  # root: the mode does not stop it, +i does
    return d, lambda: (subprocess.run(["chattr", "-i", str(d)], check=True), d.chmod(0o755))


@pytest.mark.parametrize("args, flag", [
    (("fit", str(LOG), "-o", ""), "-o"),
    (("validate", str(LOG), "--profile", "p.json", "--plot", ""), "--plot"),
    (("measure", "-o", ""), "-o"),
])
def test_empty_output_names_are_refused(args, flag):
    # fit -o '' and validate --plot '' exited 0 and wrote nothing
    assert one_error_line(run_commcost(*args)) == f"commcost: error: {flag} '': expected a file name, got an empty one"


@pytest.mark.parametrize("command", [("fit", str(LOG)), ("measure", "--sizes", "16KiB:64KiB")])
def test_unwritable_output_directory_is_refused_before_any_work(tmp_path, command):
    # measure used to spawn ranks, run ~10 s, then fail naming its temporary file
    d, undo = _unwritable_dir(tmp_path)
    try:
        target = d / "out.csv"
        line = one_error_line(run_commcost(*command, "-o", str(target)))
        assert line.startswith(f"commcost: error: -o {str(target)!r}: cannot create a file in {str(d)!r}")
        assert sorted(p.name for p in d.iterdir()) == []  # no probe, no temporary file left behind
    finally:
        undo()
