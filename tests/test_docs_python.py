"""The Python examples in docs/python.md run as written from a clone's root, in order, each block in a
fresh namespace."""

from __future__ import annotations

import contextlib
import io
import os
import re

import pytest

from conftest import ROOT

BLOCK = re.compile(r"^```python\n(.*?)^```", re.S | re.M)


def python_blocks() -> list[str]:
    return BLOCK.findall((ROOT / "docs" / "python.md").read_text())


def test_docs_python_has_the_three_examples():
    blocks = python_blocks()
    assert len(blocks) == 3
    assert [b for b in blocks if "plan(" in b] and [b for b in blocks if "search(" in b] \
        and [b for b in blocks if "analyze_trace(" in b]


@pytest.mark.parametrize("index", range(3))
def test_each_block_runs_as_written(index, monkeypatch):
    monkeypatch.chdir(ROOT)
    code = python_blocks()[index]
    if "search(" in code:
        pytest.importorskip("numpy", reason="search needs numpy (commcost[sweep])")
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(code, f"docs/python.md block {index + 1}", "exec"), {"__name__": "__docs__"})
    assert out.getvalue().strip(), "each example prints what it computed"
    assert os.getcwd() == str(ROOT)
