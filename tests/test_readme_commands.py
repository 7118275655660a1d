"""Every command in README.md's code blocks runs as written, from a clone (``commcost`` is ``python -m
commcost`` with ``src`` on the path, as after ``pip install .``), in the order printed: ``validate`` reads
the profile ``fit`` wrote."""

from __future__ import annotations

import os
import shlex
import subprocess
import sys

import pytest

from conftest import ROOT

NOT_RUN_HERE = {"scripts/test": "it runs this suite (and makes a virtual environment)"}
"""README commands this test does not run, with the reason."""


def readme_commands() -> list[str]:
    """The indented code lines of README.md that are commands (``commcost ...`` or ``python ...``), with
    their trailing ``# comment`` removed."""
    out = []
    for line in (ROOT / "README.md").read_text().splitlines():
        if not line.startswith("    "):
            continue
        text = line.strip()
        if text.split(" ")[0] in ("commcost", "python") or text in NOT_RUN_HERE:
            out.append(shlex.join(shlex.split(text, comments=True)) if text not in NOT_RUN_HERE else text)
    return out


def test_the_readme_has_the_commands_it_should():
    cmds = readme_commands()
    assert len(cmds) >= 18
    subcommands = {c.split()[1] for c in cmds if c.startswith("commcost ")}
    assert subcommands >= {"budget", "collective", "presets", "scaling", "timeline", "measure", "fit", "validate",
                           "plan", "search", "trace"}
    for c in cmds:  # no file a clone does not have (the issue: rank0.pt.trace.json.gz, all_reduce_perf.log)
        for word in shlex.split(c):
            if word.endswith((".log", ".gz", ".txt")):
                assert (ROOT / word).is_file(), (c, word)


def test_every_readme_command_runs(tmp_path):
    if not _has("torch"):
        pytest.skip("torch is not installed: `commcost measure` needs it (CI installs the CPU build)")
    for name in ("tests", "tools"):  # a clone's files, relative paths as the README writes them
        (tmp_path / name).symlink_to(ROOT / name)
    env = dict(os.environ, PYTHONPATH=str(ROOT / "src"), MPLBACKEND="Agg", COLUMNS="80")
    ran = 0
    for command in readme_commands():
        if command in NOT_RUN_HERE:
            continue
        argv = shlex.split(command)
        argv = [sys.executable, "-m", "commcost", *argv[1:]] if argv[0] == "commcost" else [sys.executable, *argv[1:]]
        r = subprocess.run(argv, capture_output=True, text=True, env=env, cwd=tmp_path, timeout=300)
        assert r.returncode == 0, f"{command}\n{r.stderr[-2000:]}"
        assert r.stdout.strip(), command
        lines = r.stdout.splitlines()     # 80 columns (COLUMNS=80): at most 5% of a command's lines wider
        assert sum(len(x) > 80 for x in lines) <= 0.05 * len(lines), command
        ran += 1
    assert ran == len(readme_commands()) - len(NOT_RUN_HERE)
    for written in ("scaling.png", "gloo.csv", "cluster.profile.json", "fit.png"):
        assert (tmp_path / written).stat().st_size > 0, written


def _has(module: str) -> bool:
    import importlib.util

    return importlib.util.find_spec(module) is not None


test_every_readme_command_runs = pytest.mark.torch(test_every_readme_command_runs)
