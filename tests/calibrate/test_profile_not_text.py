"""A profile that is not text (``calibrate/profile.py``) is one line on stderr, exit 2, for every command
that takes ``--profile`` (a UnicodeDecodeError traceback before the fix)."""

from __future__ import annotations

import pytest

from conftest import one_error_line, run_commcost


@pytest.fixture
def not_utf8(tmp_path):
    p = tmp_path / "bin.json"
    p.write_bytes(b"\xff\xfe\x00not json")
    return str(p)


@pytest.mark.parametrize("argv", [
    ["budget", "--params", "1.3", "--step-ms", "400"],
    ["timeline", "--params", "1.3", "--step-ms", "400"],
    ["scaling"],
    ["collective", "--op", "all_reduce", "--size", "1GB"],
])
def test_binary_profile_is_one_line(argv, not_utf8):
    line = one_error_line(run_commcost(*argv, "--profile", not_utf8))
    assert "not UTF-8" in line and not_utf8 in line


def test_validate_with_binary_profile_is_one_line(tmp_path, not_utf8):
    data = tmp_path / "m.log"
    data.write_text("x\n")
    line = one_error_line(run_commcost("validate", str(data), "--profile", not_utf8))
    assert "not UTF-8" in line
