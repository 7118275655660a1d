"""Direct tests of ``core/xp.py``: the scalar namespace does what numpy does, on floats."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from commcost.core.xp import SCALAR

FLOATS = st.floats(min_value=-1e12, max_value=1e12, allow_nan=False)


def test_by_hand():
    assert SCALAR.maximum(2.0, 3.0) == 3.0 and SCALAR.minimum(2.0, 3.0) == 2.0
    assert SCALAR.ceil(2.1) == 3.0 and isinstance(SCALAR.ceil(2.1), float) and SCALAR.ceil(-2.1) == -2.0
    assert SCALAR.where(True, 1.0, 2.0) == 1.0 and SCALAR.where(False, 1.0, 2.0) == 2.0


@settings(deadline=None)  # the first call pays numpy's import
@given(FLOATS, FLOATS, st.booleans())
def test_agrees_with_numpy(a, b, c):
    np = pytest.importorskip("numpy")  # the namespace it stands in for (the [sweep] extra)
    assert SCALAR.maximum(a, b) == float(np.maximum(a, b))
    assert SCALAR.minimum(a, b) == float(np.minimum(a, b))
    assert SCALAR.ceil(a) == float(np.ceil(a)) == float(math.ceil(a))
    assert SCALAR.where(c, a, b) == float(np.where(c, a, b))
