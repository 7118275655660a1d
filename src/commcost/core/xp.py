"""The array namespace the shared kernels are written against: numpy, or :data:`SCALAR` for plain floats.

A kernel takes ``xp`` as its first argument and uses only the operations below, so ``commcost plan``
runs it on floats with nothing installed and ``commcost search`` runs the same lines on numpy columns
(STYLE.md item 12: one formula, two speeds). numpy satisfies this namespace as it is.
"""

from __future__ import annotations

import math

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (start-up time)
if TYPE_CHECKING:
    from typing import Any

    FloatOrArray = Any
    """A float, or a numpy array of them: what an array-safe kernel takes and returns (typed ``Any``: numpy stays an
    optional extra, never imported to type a signature)."""

__all__ = ["SCALAR", "ScalarNamespace", "is_array", "namespace_of"]


class ScalarNamespace:
    """The few numpy functions the kernels use, on Python floats (stdlib only)."""

    __slots__ = ()

    @staticmethod
    def maximum(a: float, b: float) -> float:
        """``np.maximum`` of two floats."""
        return a if a >= b else b

    @staticmethod
    def minimum(a: float, b: float) -> float:
        """``np.minimum`` of two floats."""
        return a if a <= b else b

    @staticmethod
    def ceil(a: float) -> float:
        """``np.ceil`` of a float (a float, as numpy's)."""
        return float(math.ceil(a))

    @staticmethod
    def sqrt(a: float) -> float:
        """``np.sqrt`` of a float."""
        return math.sqrt(a)

    @staticmethod
    def log(a: float) -> float:
        """``np.log`` of a float (natural)."""
        return math.log(a)

    @staticmethod
    def where(condition: bool, a: float, b: float) -> float:
        """``np.where``: ``a`` if ``condition`` else ``b``."""
        return a if condition else b


SCALAR = ScalarNamespace()
"""The scalar namespace ``plan`` passes as ``xp``."""


def is_array(x: object) -> bool:
    """Whether ``x`` is a numpy array (anything with a ``shape``), not a float."""
    return hasattr(x, "shape")


def namespace_of(*values: FloatOrArray) -> Any:
    """``numpy`` when any of ``values`` is an array, else :data:`SCALAR`: for code that takes floats or
    columns without an ``xp`` argument (the collective formulas of :mod:`commcost.comm.algorithms`)."""
    if any(is_array(v) for v in values):
        import numpy

        return numpy
    return SCALAR
