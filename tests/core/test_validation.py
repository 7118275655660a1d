"""Direct tests of ``core/validation.py``: each validator refuses with the quantity's name and its value."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from commcost.core.errors import InputError
from commcost.core.validation import require_count, require_finite_positive, require_fraction


@pytest.mark.parametrize("value, message", [
    (0, "x must be > 0, got 0"), (-2.5, "x must be > 0, got -2.5"), (float("nan"), "x must be finite, got nan"),
    (float("inf"), "x must be finite, got inf"), (10**400, "x must be finite, got a huge integer"),
    (True, "x must be a number, got True"), ("3", "x must be a number, got '3'"),
])
def test_finite_positive_refusals(value, message):
    with pytest.raises(InputError) as exc:
        require_finite_positive("x", value)
    assert str(exc.value) == message


def test_zero_allowed_on_request():
    require_finite_positive("x", 0.0, allow_zero=True)
    with pytest.raises(InputError, match="x must be >= 0, got -1"):
        require_finite_positive("x", -1, allow_zero=True)


@pytest.mark.parametrize("value", [0, -1, 1.0, True, "2", None])
def test_count_refusals(value):
    with pytest.raises(InputError, match=f"n must be an integer >= 1, got {value!r}"):
        require_count("n", value)


def test_count_minimum():
    require_count("n", 0, minimum=0)
    with pytest.raises(InputError, match="n must be an integer >= 2, got 1"):
        require_count("n", 1, minimum=2)


def test_fraction_bounds():
    require_fraction("f", 1.0)
    require_fraction("f", 0.0, allow_zero=True)
    with pytest.raises(InputError, match=r"f must be in \(0, 1\], got 1.5"):
        require_fraction("f", 1.5)
    with pytest.raises(InputError, match=r"f must be in \[0, 1\], got 1.5"):
        require_fraction("f", 1.5, allow_zero=True)
    with pytest.raises(InputError, match="f must be > 0, got 0"):
        require_fraction("f", 0.0)


@given(st.floats(allow_nan=True, allow_infinity=True))
def test_accepts_exactly_the_finite_positive_floats(x):
    ok = x == x and abs(x) != float("inf") and x > 0
    try:
        require_finite_positive("x", x)
        accepted = True
    except InputError:
        accepted = False
    assert accepted is ok
