"""Parsing and formatting at the edges: decimal and binary kept apart."""

import math

import pytest

from commcost import InputError
from commcost.core.units import format_bytes, format_seconds, parse_size_bytes
from commcost.core.validation import require_finite_positive

from conftest import run_commcost


@pytest.mark.parametrize("text,expected", [
    ("8B", 8), ("4096", 4096), ("1KB", 1e3), ("1KiB", 1024), ("25MB", 25e6),
    ("25MiB", 25 * 1048576), ("1GiB", 1073741824), ("8GB", 8e9), ("1.5kib", 1536),
])
def test_parse_size(text, expected):
    assert parse_size_bytes(text) == expected


@pytest.mark.parametrize("text", ["", "x", "1XB", "MiB", "1 2"])
def test_parse_size_rejects(text):
    with pytest.raises(InputError):
        parse_size_bytes(text)


def test_format():
    assert format_bytes(2.6e9) == "2.60 GB"
    assert format_bytes(25 * 2**20, binary=True) == "25.00 MiB"
    assert format_seconds(0.20274) == "202.74 ms"
    assert format_seconds(81.26e-6) == "81.26 us"
    assert format_seconds(3.2767) == "3.277 s"


@pytest.mark.parametrize("value", [0, -1, math.nan, math.inf, "3", True])
def test_require_finite_positive(value):
    with pytest.raises(InputError):
        require_finite_positive("x", value)


def test_unknown_subcommand_lists_valid_ones():
    r = run_commcost("nonsense")
    assert r.returncode == 2 and "budget" in r.stderr and len(r.stderr.splitlines()) == 1
