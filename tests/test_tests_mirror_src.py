"""Tests mirror ``src/``: a test of ``src/commcost/X/y.py`` lives in ``tests/X/test_y*.py``.

Three rules, each checked on the real tree and shown to fail on a made-up one:

* every folder of ``tests/`` that holds a test file is a package of ``src/commcost`` (``tests/X/Y/``
  means ``src/commcost/X/Y/__init__.py``); ``tests/data`` holds data, not tests;
* at the top of ``tests/`` only the cross-command tests of :data:`TOP_LEVEL` (they run several
  commands against each other, so no one package owns them);
* test file names are unique across ``tests/`` (pytest imports them by basename);
* no test module imports torch at its top: a torch test asks ``pytest.importorskip("torch")`` inside,
  so without torch it is skipped, not an error (a suite run with torch hidden: 44 skipped, 0 failed).
"""

from __future__ import annotations

import ast
from collections import Counter
from pathlib import Path

from conftest import ROOT

TOP_LEVEL = frozenset({
    "test_one_truth.py", "test_profile_everywhere.py", "test_public_api.py", "test_readme_commands.py", "test_docs_python.py",
    "test_smoke.py", "test_layout.py", "test_tests_mirror_src.py", "test_docs_commands.py",
})
"""The test files allowed directly in ``tests/``: each compares several commands or the whole package."""

NOT_TESTS = frozenset({"data"})
"""Folders of ``tests/`` that hold inputs, not tests."""


def folders_without_a_package(tests: Path, package: Path) -> list[str]:
    """Folders under ``tests`` holding a ``test_*.py`` whose mirror under ``package`` is no package."""
    bad = set()
    for path in tests.rglob("test_*.py"):
        rel = path.parent.relative_to(tests)
        if rel.parts and rel.parts[0] not in NOT_TESTS and not (package / rel / "__init__.py").is_file():
            bad.add(rel.as_posix())
    return sorted(bad)


def stray_top_level_tests(tests: Path) -> list[str]:
    """``test_*.py`` files directly in ``tests`` that are not in :data:`TOP_LEVEL`."""
    return sorted(p.name for p in tests.glob("test_*.py") if p.name not in TOP_LEVEL)


def repeated_names(tests: Path) -> list[str]:
    """Test file names that occur more than once under ``tests``."""
    counts = Counter(p.name for p in tests.rglob("test_*.py") if NOT_TESTS.isdisjoint(p.relative_to(tests).parts))
    return sorted(name for name, n in counts.items() if n > 1)


def top_level_torch_imports(tests: Path) -> list[str]:
    """Test files under ``tests`` that import torch at module level (collection fails without torch)."""
    bad = []
    for path in sorted(tests.rglob("*.py")):
        for node in ast.parse(path.read_text(encoding="utf-8")).body:
            names = ([a.name for a in node.names] if isinstance(node, ast.Import)
                     else [node.module or ""] if isinstance(node, ast.ImportFrom) else [])
            if any(n == "torch" or n.startswith("torch.") for n in names):
                bad.append(path.relative_to(tests).as_posix())
                break
    return bad


def test_every_test_folder_is_a_package_of_src():
    assert folders_without_a_package(ROOT / "tests", ROOT / "src" / "commcost") == []


def test_only_cross_command_tests_sit_at_the_top():
    assert stray_top_level_tests(ROOT / "tests") == []


def test_test_file_names_are_unique():
    assert repeated_names(ROOT / "tests") == []


def test_torch_is_imported_only_where_it_can_be_skipped():
    assert top_level_torch_imports(ROOT / "tests") == []


def test_the_rules_catch_a_misplaced_tree(tmp_path):
    # a made-up tree: src has core/ and analyses/plan/; tests put files in core/, analyses/plan/,
    # a package that does not exist (search/), a sub-folder of one that does not (core/old/), data/,
    # and at the top a grab-bag next to an allowed file; two files share a name
    src, tests = tmp_path / "src", tmp_path / "tests"
    for pkg in ("core", "analyses", "analyses/plan"):
        (src / pkg).mkdir(parents=True)
        (src / pkg / "__init__.py").write_text("")
    for f in ("core/test_units.py", "analyses/plan/test_plan.py", "search/test_grid.py", "core/old/test_units.py",
              "data/test_fixture.py", "test_hardening.py", "test_smoke.py"):
        (tests / f).parent.mkdir(parents=True, exist_ok=True)
        (tests / f).write_text("")
    assert folders_without_a_package(tests, src) == ["core/old", "search"]
    assert stray_top_level_tests(tests) == ["test_hardening.py"]
    assert repeated_names(tests) == ["test_units.py"]
    (tests / "core" / "test_units.py").write_text("import pytest\nimport torch.distributed as dist\n")
    (tests / "analyses/plan/test_plan.py").write_text("def test_x():\n    import torch\n")  # inside: fine
    assert top_level_torch_imports(tests) == ["core/test_units.py"]
