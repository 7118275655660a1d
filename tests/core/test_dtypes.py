"""Direct tests of ``core/dtypes.py``: the drill's part (a), ``S = N * bytes_per_grad``."""

from __future__ import annotations

import pytest

from commcost.core.dtypes import BYTES_PER_ELEMENT, bytes_per_element, gradient_bytes
from commcost.core.errors import InputError


@pytest.mark.parametrize("dtype, size", [("fp32", 4), ("tf32", 4), ("bf16", 2), ("fp16", 2), ("fp8", 1)])
def test_bytes_per_element(dtype, size):
    assert bytes_per_element(dtype) == size == BYTES_PER_ELEMENT[dtype]


def test_unknown_dtype_lists_the_valid_ones():
    with pytest.raises(InputError, match=r"unknown dtype 'int4' \(valid: fp32, tf32, bf16, fp16, fp8\)"):
        bytes_per_element("int4")


def test_the_drills_message_by_hand():
    # 1.3 billion bf16 gradients: 1.3e9 * 2 B = 2,600,000,000 B
    assert gradient_bytes(1.3e9, 2) == 2_600_000_000
    assert gradient_bytes(7e9, bytes_per_element("fp32")) == 28e9
