"""Every command in docs/*.md runs as written from a clone, on files the repository ships, in the order
printed (``validate`` reads the profile ``fit`` wrote); only a command whose comment says it needs a cluster
(``torchrun`` across nodes, a Dask scheduler) is left out. Each fits 80 columns (at most 5% of its lines
wider, ``COLUMNS=80``) and names no tracker issue. README.md's commands: tests/test_readme_commands.py."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys

import pytest

from conftest import ROOT

NEEDS_A_CLUSTER = "needs a cluster"
MAX_WIDE_SHARE = 0.05
RUNNERS = ("commcost", "python", "torchrun")


def docs_commands() -> dict[str, list[str]]:
    """``{doc: [command, ...]}``: the lines of each doc's code blocks (indented or fenced) that start with
    ``commcost``, ``python`` or ``torchrun``, ``\\`` continuations joined, the comment kept (it may mark a
    cluster)."""
    out: dict[str, list[str]] = {}
    for path in sorted((ROOT / "docs").glob("*.md")):
        fenced, pending, cmds = False, "", []
        for line in path.read_text().splitlines():
            if line.strip().startswith("```"):
                fenced = not fenced
                continue
            text = line.strip()
            if pending:
                pending += " " + text.rstrip("\\").strip()
                if not text.endswith("\\"):
                    cmds.append(pending)
                    pending = ""
                continue
            if (fenced or line.startswith("    ")) and text.split(" ")[0] in RUNNERS:
                if text.endswith("\\"):
                    pending = text.rstrip("\\").strip()
                else:
                    cmds.append(text)
        if cmds:
            out[path.name] = cmds
    return out


def test_docs_commands_name_only_shipped_files():
    for doc, cmds in docs_commands().items():
        for c in cmds:
            if NEEDS_A_CLUSTER in c:
                continue
            for word in shlex.split(c, comments=True):
                if word.startswith("tests/"):
                    assert (ROOT / word).exists(), (doc, c, word)


@pytest.mark.parametrize("doc", sorted(docs_commands()))
def test_every_docs_command_runs(doc, tmp_path):
    for name in ("tests", "tools", "benchmarks"):   # a clone's files, relative paths as the docs write them
        (tmp_path / name).symlink_to(ROOT / name)
    env = dict(os.environ, PYTHONPATH=str(ROOT / "src"), MPLBACKEND="Agg", COLUMNS="80")
    for command in docs_commands()[doc]:
        if NEEDS_A_CLUSTER in command:
            continue
        argv = shlex.split(command, comments=True)
        if argv[0] == "commcost" and argv[1] == "measure" and not _has("torch"):
            pytest.skip("torch is not installed: `commcost measure` needs it (CI installs the CPU build)")
        argv = [sys.executable, "-m", "commcost", *argv[1:]] if argv[0] == "commcost" else [sys.executable, *argv[1:]]
        r = subprocess.run(argv, capture_output=True, text=True, env=env, cwd=tmp_path, timeout=300)
        assert r.returncode == 0, f"{doc}: {command}\n{r.stderr[-2000:]}"
        lines = r.stdout.splitlines()
        assert lines, command
        if "--json" not in argv:
            wide = [x for x in lines if len(x) > 80]
            assert len(wide) <= MAX_WIDE_SHARE * len(lines), (command, len(wide), len(lines), wide[:3])
        assert not re.search(r"\bissue \d+", r.stdout + r.stderr), command


def _has(module: str) -> bool:
    import importlib.util

    return importlib.util.find_spec(module) is not None


PYTHON_BLOCK = re.compile(r"^```python\n(.*?)^```", re.S | re.M)


@pytest.mark.parametrize("doc", [p.name for p in sorted((ROOT / "docs").glob("*.md"))
                                 if p.name != "python.md" and PYTHON_BLOCK.search(p.read_text())])
def test_python_blocks_of_the_other_docs_run(doc, monkeypatch):
    # docs/python.md's blocks: tests/test_docs_python.py; the rest here, from a clone's root, as written
    import contextlib
    import io

    monkeypatch.chdir(ROOT)
    for k, code in enumerate(PYTHON_BLOCK.findall((ROOT / "docs" / doc).read_text())):
        with contextlib.redirect_stdout(io.StringIO()):      # raises if the block does not run as written
            exec(compile(code, f"docs/{doc} block {k + 1}", "exec"), {"__name__": "__docs__"})


SUBCOMMANDS = ("budget", "collective", "presets", "scaling", "timeline", "measure", "fit", "validate", "plan",
               "search", "trace")


@pytest.mark.parametrize("sub", SUBCOMMANDS)
def test_help_names_no_tracker_issue_and_no_seed(sub, capsys):
    from commcost.cli import main

    with pytest.raises(SystemExit) as e:
        main([sub, "--help"])
    assert e.value.code == 0
    text = capsys.readouterr().out
    assert not re.search(r"\bissue \d+", text) and "seed" not in text.lower(), sub


def test_readme_and_docs_name_no_tracker_issue():
    for path in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]:
        assert not re.search(r"\bissue \d+", path.read_text()), path.name
