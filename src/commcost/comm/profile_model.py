"""The calibrated-profile kind of :mod:`commcost.comm.model`: every fitted regime, exactly as
``validate`` scores it, with the scope it was measured on."""

from __future__ import annotations

import math
from dataclasses import dataclass

from commcost.comm.collectives import Algorithm, AlgorithmChoice, ChoiceKind, Collective, CollectiveCost, \
    bus_bandwidth_factor, ring_latency_steps
from commcost.comm.model import CommModel, sizes_array
from commcost.core.errors import InputError
from commcost.core.validation import require_count
from commcost.comm.algorithms import parse_algorithm
from commcost.comm.algorithms import parse_collective

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (start-up time)
if TYPE_CHECKING:
    from typing import Any

    from commcost.core.xp import FloatOrArray
    from typing import Protocol

    from commcost.comm.collectives import Algorithm

    class FittedRegime(Protocol):
        """What the model reads of one fitted regime (:class:`commcost.calibrate.fit.Regime` is one):
        ``comm`` sits below ``calibrate`` in the layer order, so it names the shape, not the class."""

        @property
        def min_size_bytes(self) -> float: ...
        @property
        def max_size_bytes(self) -> float: ...
        @property
        def alpha_s(self) -> float: ...
        @property
        def bandwidth_bytes_per_s(self) -> float: ...
        def describe(self) -> str: ...

    class FittedProfile(Protocol):
        """What the model reads of a fit (:class:`commcost.calibrate.fit.AlphaBetaFit` is one)."""

        @property
        def algorithm(self) -> Algorithm: ...
        @property
        def regimes(self) -> tuple[FittedRegime, ...]: ...

__all__ = ["ProfileModel", "ProfileScope", "DERIVED_OPS", "EXTRAPOLATION_RULE"]

_ONE_RANK = AlgorithmChoice(kind=ChoiceKind.ONE_RANK)
"""One rank: nothing to send."""


DERIVED_OPS: dict[Collective, tuple[Collective, ...]] = {
    Collective.ALL_REDUCE: (Collective.REDUCE_SCATTER, Collective.ALL_GATHER),
}
"""Ops a profile prices within its scope besides the one measured: NCCL's ring all-reduce *is* a
reduce-scatter followed by an all-gather over the same ring (each ``(P-1)`` steps and ``(P-1)/P S``
bytes per rank, half the all-reduce's), so an all-reduce profile's ``a_i`` and ``B_i`` price them
exactly in the ring form."""

EXTRAPOLATION_RULE = ("each fitted regime keeps its per-step latency a_i and bus bandwidth B_i; the ring form "
                      "T = k a_i + f S / B_i is evaluated with the new op's k ring steps and bus factor f at the "
                      "new P: exact for a ring whose busiest link is unchanged, optimistic when the group "
                      "crosses a slower tier than the measurement did")
"""What ``--extrapolate`` does with a profile outside its scope (printed in the warning)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ProfileScope:
    """What a calibrated profile was measured on."""

    op: Collective
    """The collective measured."""
    gpus: int
    """Ranks P of the measurement."""
    nodes: int | None = None
    """Nodes the measurement spanned (None: not recorded)."""
    gpus_per_node: int | None = None
    """GPUs per node (None: not recorded)."""
    backend: str | None = None
    """Backend of the measurement (nccl, gloo, rccl; None: not recorded)."""

    def __post_init__(self) -> None:
        if not isinstance(self.op, Collective):
            raise TypeError(f"op must be a Collective, got {type(self.op).__name__}")
        require_count("gpus", self.gpus)
        for name in ("nodes", "gpus_per_node"):
            if getattr(self, name) is not None:
                require_count(name, getattr(self, name))

    def describe(self) -> str:
        where = f"{self.gpus} ranks"
        if self.nodes is not None:
            where += f" on {self.nodes} node(s)"
        return f"{self.op.value} over {where}" + (f" ({self.backend})" if self.backend else "")


@dataclass(frozen=True, slots=True, kw_only=True)
class ProfileModel(CommModel):
    """A calibrated profile: every fitted regime, exactly as ``validate`` scores it."""

    fit: FittedProfile
    """The fitted regimes (op, algorithm, gpus)."""
    scope: ProfileScope
    """What it was measured on."""
    extrapolate: bool = False
    """Allow other ops and larger groups (:data:`EXTRAPOLATION_RULE`); otherwise they are refused."""
    source: str = ""
    """The profile file, for report headers."""
    kind = "profile"

    def _out_of_scope(self, op: Collective, gpus: int) -> str | None:
        s = self.scope
        why = []
        if op is not s.op and op not in DERIVED_OPS.get(s.op, ()):
            why.append(f"op {op.value}")
        if gpus > s.gpus:
            why.append(f"{gpus} ranks (> {s.gpus})")
        elif s.gpus_per_node and s.nodes and math.ceil(gpus / s.gpus_per_node) > s.nodes:
            why.append(f"{math.ceil(gpus / s.gpus_per_node)} nodes (> {s.nodes})")
        if not why:
            return None
        return f"profile {self.source or ''} was measured on {s.describe()}; asked for {' and '.join(why)}".replace(
            "profile  ", "profile ")

    def scope_warning(self, op: Collective | str, gpus: int) -> str | None:

        why = self._out_of_scope(parse_collective(op), gpus)
        return None if why is None else f"{why}: extrapolated ({EXTRAPOLATION_RULE})"

    def cost(self, op: Collective | str, size_bytes: float, gpus: int, algorithm: Algorithm | str = "auto", *,
                 ranks_per_node: int | None = None) -> CollectiveCost:

        op = parse_collective(op)
        alg = parse_algorithm(algorithm)
        if alg != "auto" and alg is not self.fit.algorithm:
            assert isinstance(alg, Algorithm)
            raise InputError(f"a profile fitted the {self.fit.algorithm.value} form; --algorithm {alg.value} "
                             f"needs a fabric (--system) instead")
        if not self.extrapolate:
            why = self._out_of_scope(op, gpus)
            if why is not None:
                raise InputError(f"{why}; pass --extrapolate to apply it anyway")
        if gpus == 1:
            return CollectiveCost(op=op, algorithm=self.fit.algorithm, gpus=1, message_bytes=size_bytes,
                                  latency_s=0.0, bandwidth_s=0.0, choice=_ONE_RANK)
        i, regime = next((i, r) for i, r in enumerate(self.fit.regimes)
                         if size_bytes < r.max_size_bytes or i == len(self.fit.regimes) - 1)
        k = ring_latency_steps(op, gpus)
        f = bus_bandwidth_factor(op, gpus)
        return CollectiveCost(op=op, algorithm=self.fit.algorithm, gpus=gpus, message_bytes=size_bytes,
                              latency_s=k * regime.alpha_s, bandwidth_s=f * size_bytes / regime.bandwidth_bytes_per_s,
                              choice=AlgorithmChoice(kind=ChoiceKind.REGIME, regime=i + 1,
                                                     regimes=len(self.fit.regimes), regime_fit=regime))

    def cost_many(self, op: Collective | str, sizes_bytes: FloatOrArray, gpus: int, *,
                      ranks_per_node: int | None = None) -> FloatOrArray:
        """:meth:`cost`'s ``total_s`` on an array of sizes: each size in its fitted regime ``i``,
        ``k a_i + f S / B_i`` (scope checked once)."""
        import numpy as np


        op = parse_collective(op)
        if not self.extrapolate:
            why = self._out_of_scope(op, gpus)
            if why is not None:
                raise InputError(f"{why}; pass --extrapolate to apply it anyway")
        S = sizes_array(sizes_bytes)
        out = np.zeros(S.shape)
        if gpus == 1:
            return out
        k = ring_latency_steps(op, gpus)
        f = bus_bandwidth_factor(op, gpus)
        left = np.ones(S.shape, dtype=bool)
        last = len(self.fit.regimes) - 1
        for i, r in enumerate(self.fit.regimes):
            sel = left & ((S < r.max_size_bytes) | (i == last))
            out[sel] = k * r.alpha_s + f * S[sel] / r.bandwidth_bytes_per_s
            left &= ~sel
        return out

    def max_gpus(self) -> int | None:
        return None if self.extrapolate else self.scope.gpus

    def describe(self) -> str:
        return (f"profile {self.source}: {len(self.fit.regimes)} fitted regime(s), measured on "
                f"{self.scope.describe()}")

    def to_dict(self) -> dict[str, Any]:
        s = self.scope
        return {"kind": self.kind, "path": self.source, "op": s.op.value, "gpus": s.gpus, "nodes": s.nodes,
                "gpus_per_node": s.gpus_per_node, "backend": s.backend, "extrapolate": self.extrapolate,
                "regimes": [{"min_size_bytes": r.min_size_bytes,
                             "max_size_bytes": None if math.isinf(r.max_size_bytes) else r.max_size_bytes,
                             "alpha_s": r.alpha_s, "bandwidth_bytes_per_s": r.bandwidth_bytes_per_s}
                            for r in self.fit.regimes]}
