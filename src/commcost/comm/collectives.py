"""Alpha-beta cost of collectives.

Symbols (DESIGN.md): ``S`` message bytes (the full buffer each rank holds for an
all-reduce; the full *output* for an all-gather, the full *input* for a
reduce-scatter), ``P`` ranks, ``a`` per-step latency (s), ``B`` per-rank
bandwidth (bytes/s).

Ring algorithms (Patarasuk & Yuan 2009; nccl-tests doc/PERFORMANCE.md):

* all-reduce     ``T = 2(P-1) a + 2(P-1)/P * S/B``
* reduce-scatter ``T =  (P-1) a +  (P-1)/P * S/B``
* all-gather     ``T =  (P-1) a +  (P-1)/P * S/B``

so a ring reduce-scatter followed by a ring all-gather is exactly a ring
all-reduce (that is how NCCL's ring all-reduce runs). The bandwidth factor of
each collective is nccl-tests' "bus bandwidth" factor, kept in one place,
:func:`bus_bandwidth_factor`, used by the model and by calibration alike.

These ring functions are the drill's flat model. Every collective under every
algorithm (tree, halving-doubling, hierarchical, in-network, direct) on a flat
link or a two-tier topology goes through the one entry point
:func:`commcost.comm.algorithms.collective_cost`, whose ring results on a flat link
equal these exactly.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from enum import StrEnum

from commcost.core.errors import InputError
from commcost.comm.link import Link
from commcost.core.limits import MAX_GPUS, MAX_MESSAGE_BYTES
from commcost.core.validation import require_at_most, require_count, require_finite_positive

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (start-up time)
if TYPE_CHECKING:
    from typing import Literal

__all__ = [
    "Collective", "Algorithm", "CollectiveCost", "ChoiceKind", "AlgorithmChoice", "FLAT_CHOICE", "NAMED_CHOICE",
    "bus_bandwidth_factor", "ring_latency_steps", "ring_all_reduce", "ring_reduce_scatter", "ring_all_gather",
]


class Collective(StrEnum):
    """The collectives commcost models, named as in torch.distributed / NCCL."""

    ALL_REDUCE = "all_reduce"
    REDUCE_SCATTER = "reduce_scatter"
    ALL_GATHER = "all_gather"
    BROADCAST = "broadcast"
    REDUCE = "reduce"
    ALL_TO_ALL = "all_to_all"
    SEND_RECV = "send_recv"


class Algorithm(StrEnum):
    """How a collective is carried out on the fabric (formulas in :mod:`commcost.comm.algorithms`)."""

    RING = "ring"
    TREE = "tree"
    HALVING_DOUBLING = "halving_doubling"
    HIERARCHICAL = "hierarchical"
    IN_NETWORK = "in_network"
    DIRECT = "direct"
    PAT = "pat"


def bus_bandwidth_factor(op: Collective, gpus: int) -> float:
    """nccl-tests' busbw/algbw factor for ``op`` on ``gpus`` ranks.

    From nccl-tests doc/PERFORMANCE.md: all-reduce ``2(n-1)/n``; reduce-scatter,
    all-gather and all-to-all ``(n-1)/n``; broadcast, reduce and send/recv ``1``.
    It is the bytes each rank must send, over ``S``, on a flat fabric with
    point-to-point transfers; algorithms that are not bandwidth optimal (tree) or
    not point-to-point (NVLS, SHARP) can show a busbw above the link bandwidth.
    """
    require_count("gpus", gpus)
    require_at_most("gpus", gpus, MAX_GPUS)
    n = gpus
    match op:
        case Collective.ALL_REDUCE:
            return 2.0 * (n - 1) / n
        case Collective.REDUCE_SCATTER | Collective.ALL_GATHER | Collective.ALL_TO_ALL:
            return (n - 1) / n
        case Collective.BROADCAST | Collective.REDUCE | Collective.SEND_RECV:
            return 1.0
    raise InputError(f"unknown collective {op!r}")


class ChoiceKind(StrEnum):
    """Why a CommModel ran the algorithm it ran (:class:`AlgorithmChoice`)."""

    FLAT = "flat"
    """A flat link: the drill's ring formula (all-to-all and send/recv: direct)."""
    NAMED = "named"
    """The algorithm was asked for by name."""
    ONLY = "only"
    """The only algorithm the backend runs for this op on this group."""
    FASTEST = "fastest"
    """The fastest of several the backend runs; the runner-up's terms beside it."""
    REGIME = "regime"
    """A calibrated profile's fitted size regime."""
    ONE_RANK = "one_rank"
    """One rank: nothing to send."""


@dataclass(frozen=True, slots=True, kw_only=True)
class AlgorithmChoice:
    """Why this algorithm priced a collective, as data (``report/`` words it: :mod:`commcost.report._choice`)."""

    kind: ChoiceKind
    """Which rule chose it."""
    backend: str = ""
    """The backend whose algorithms ``auto`` chose among (:data:`ChoiceKind.ONLY`, :data:`ChoiceKind.FASTEST`)."""
    ranked: tuple[Algorithm, ...] = ()
    """Every algorithm that could run, fastest first (:data:`ChoiceKind.FASTEST`)."""
    runner_up_latency_s: float = 0.0
    """The runner-up's latency term, seconds (:data:`ChoiceKind.FASTEST`)."""
    runner_up_bandwidth_s: float = 0.0
    """The runner-up's bandwidth term, seconds (:data:`ChoiceKind.FASTEST`)."""
    regime: int = 0
    """The fitted regime ``i`` holding the size, from 1 (:data:`ChoiceKind.REGIME`)."""
    regimes: int = 0
    """How many regimes the profile fitted (:data:`ChoiceKind.REGIME`)."""
    regime_fit: object = None
    """The fitted regime itself, whose ``describe()`` the report prints (:data:`ChoiceKind.REGIME`)."""


FLAT_CHOICE = AlgorithmChoice(kind=ChoiceKind.FLAT)
"""The drill's flat link: the ring formula, whatever the size."""
NAMED_CHOICE = AlgorithmChoice(kind=ChoiceKind.NAMED)
"""An algorithm asked for by name."""


@dataclass(frozen=True, slots=True, kw_only=True)
class CollectiveCost:
    """Time of one collective, split into its named alpha-beta terms."""

    op: Collective
    """Which collective."""
    algorithm: Algorithm
    """Which algorithm produced the terms."""
    gpus: int
    """Ranks P taking part."""
    message_bytes: float
    """Message size S, bytes (see the module docstring for what S is per op)."""
    latency_s: float
    """Latency term (the sum of per-step latencies), seconds."""
    bandwidth_s: float
    """Bandwidth term (bytes on the busiest link over its bandwidth), seconds."""
    protocol: str | None = None
    """NCCL protocol (LL, LL128, Simple) where the model has NCCL's protocols; None otherwise."""
    choice: AlgorithmChoice | None = None
    """Why this algorithm (and regime) priced the collective, as data for reports; None: priced directly."""

    @property
    def total_s(self) -> float:
        """``latency_s + bandwidth_s``, seconds."""
        return self.latency_s + self.bandwidth_s

    @property
    def algbw_bytes_per_s(self) -> float:
        """nccl-tests' algorithm bandwidth ``S / T`` (``inf`` when ``T`` is 0)."""
        return self.message_bytes / self.total_s if self.total_s > 0 else math.inf

    @property
    def busbw_bytes_per_s(self) -> float:
        """nccl-tests' bus bandwidth: algbw times :func:`bus_bandwidth_factor`."""
        return self.algbw_bytes_per_s * bus_bandwidth_factor(self.op, self.gpus)

    @property
    def dominant(self) -> Literal["latency", "bandwidth", "none"]:
        """Which term is larger (``"none"`` when there is no communication)."""
        if self.latency_s == 0 and self.bandwidth_s == 0:
            return "none"
        return "latency" if self.latency_s > self.bandwidth_s else "bandwidth"

    @property
    def dominance_factor(self) -> float:
        """Larger term over smaller term (``inf`` if the smaller is zero, 1 if none)."""
        big = max(self.latency_s, self.bandwidth_s)
        small = min(self.latency_s, self.bandwidth_s)
        if big == 0:
            return 1.0
        return big / small if small > 0 else float("inf")


def ring_latency_steps(op: Collective, gpus: int) -> int:
    """Ring steps ``k`` whose latency ``a`` each collective pays: ``2(P-1)`` all-reduce, 1 send/recv,
    ``P-1`` otherwise (the ``k`` of calibration's ``T = k a + f S/B``, ``f`` = :func:`bus_bandwidth_factor`)."""
    if gpus < 1:
        raise InputError(f"gpus must be >= 1, got {gpus}")
    if op is Collective.ALL_REDUCE:
        return 2 * (gpus - 1)
    if op is Collective.SEND_RECV:
        return 1
    return gpus - 1


def _check(message_bytes: float, gpus: int) -> None:
    require_finite_positive("message_bytes", message_bytes, allow_zero=True)
    require_at_most("message_bytes", message_bytes, MAX_MESSAGE_BYTES)
    require_count("gpus", gpus)
    require_at_most("gpus", gpus, MAX_GPUS)


def _ring(op: Collective, steps_per_rank_minus_one: int, message_bytes: float,
          gpus: int, link: Link, choice: AlgorithmChoice | None = None) -> CollectiveCost:
    """``T = k(P-1) a + k(P-1)/P * S/B`` with ``k`` = 2 for all-reduce, 1 otherwise."""
    _check(message_bytes, gpus)
    if not isinstance(link, Link):
        raise TypeError(f"link must be a commcost.Link, got {type(link).__name__}")
    k, P, S = steps_per_rank_minus_one, gpus, message_bytes
    a, B = link.latency_s, link.bandwidth_bytes_per_s
    return CollectiveCost(
        op=op, algorithm=Algorithm.RING, gpus=P, message_bytes=S,
        latency_s=k * (P - 1) * a,
        bandwidth_s=k * (P - 1) / P * S / B, choice=choice,
    )


def ring_all_reduce(message_bytes: float, gpus: int, link: Link, choice: AlgorithmChoice | None = None) -> CollectiveCost:
    """Ring all-reduce: ``T = 2(P-1) a + 2(P-1)/P * S/B``.

    Bandwidth-bound for ``S`` well above the crossover ``P a B``; latency-bound
    below it. Source: nccl-tests doc/PERFORMANCE.md (busbw factor 2(n-1)/n).
    """
    return _ring(Collective.ALL_REDUCE, 2, message_bytes, gpus, link, choice)


def ring_reduce_scatter(message_bytes: float, gpus: int, link: Link, choice: AlgorithmChoice | None = None) -> CollectiveCost:
    """Ring reduce-scatter of an ``S``-byte input: ``T = (P-1) a + (P-1)/P * S/B``."""
    return _ring(Collective.REDUCE_SCATTER, 1, message_bytes, gpus, link, choice)


def ring_all_gather(message_bytes: float, gpus: int, link: Link, choice: AlgorithmChoice | None = None) -> CollectiveCost:
    """Ring all-gather of an ``S``-byte output: ``T = (P-1) a + (P-1)/P * S/B``."""
    return _ring(Collective.ALL_GATHER, 1, message_bytes, gpus, link, choice)
