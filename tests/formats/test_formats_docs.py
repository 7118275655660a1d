"""Every command in docs/formats/*.md runs as written (as tests/test_readme_commands.py runs the README's), in
order per page: a page's ``plan --from winner.toml`` reads what its ``search --emit`` wrote."""

from __future__ import annotations

import os
import shlex
import subprocess
import sys

import pytest

from conftest import ROOT

PAGES = sorted((ROOT / "docs" / "formats").glob("*.md"))


def page_commands(page) -> list[str]:
    """The indented ``commcost ...`` lines of a page."""
    return [line.strip() for line in page.read_text().splitlines()
            if line.startswith("    ") and line.strip().startswith("commcost ")]


def test_every_format_has_a_page_with_commands():
    names = {p.stem for p in PAGES}
    assert names == {"hf-config", "torchtitan", "megatron", "nemo-deepspeed"}
    assert all(page_commands(p) for p in PAGES)


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.stem)
def test_every_command_on_the_page_runs(page, tmp_path):
    (tmp_path / "tests").symlink_to(ROOT / "tests")
    env = dict(os.environ, PYTHONPATH=str(ROOT / "src"), COLUMNS="80")
    for command in page_commands(page):
        argv = shlex.split(command)
        r = subprocess.run([sys.executable, "-m", "commcost", *argv[1:]], capture_output=True, text=True, env=env,
                           cwd=tmp_path, timeout=300)
        assert r.returncode == 0, f"{command}\n{r.stderr[-2000:]}"
        assert r.stdout.strip(), command
