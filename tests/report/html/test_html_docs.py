"""docs/report.md's commands run as written from a clone and each writes its page (the README's rule
for its own commands, ``tests/test_readme_commands.py``)."""

from __future__ import annotations

import os
import shlex
import subprocess
import sys

from conftest import ROOT


def docs_commands() -> list[str]:
    return [line.strip() for line in (ROOT / "docs" / "report.md").read_text().splitlines()
            if line.startswith("    commcost ")]


def test_docs_report_commands_run_and_write_their_page(tmp_path):
    cmds = docs_commands()
    assert {c.split()[1] for c in cmds} == {"plan", "search", "trace", "timeline"}
    (tmp_path / "tests").symlink_to(ROOT / "tests")
    env = dict(os.environ, PYTHONPATH=str(ROOT / "src"))
    for command in cmds:
        argv = shlex.split(command)
        r = subprocess.run([sys.executable, "-m", "commcost", *argv[1:], "--no-progress"] if argv[1] == "search"
                           else [sys.executable, "-m", "commcost", *argv[1:]], capture_output=True, text=True,
                           env=env, cwd=tmp_path, timeout=300)
        assert r.returncode == 0, f"{command}\n{r.stderr[-1000:]}"
        page = tmp_path / argv[argv.index("--html") + 1]
        text = page.read_text()
        assert text.startswith("<!DOCTYPE html>") and text.rstrip().endswith("</html>")
        assert page.stat().st_size < 3_000_000
