"""Data-parallel speedup and efficiency over GPU counts (the scaling-analysis seed).

Symbols: ``N`` data-parallel GPUs; ``S = params * bytes_per_grad`` the gradient
message; ``T(N)`` its ring all-reduce time on ``N`` ranks,
``2(N-1) a + 2(N-1)/N * S/B`` (:func:`commcost.comm.collectives.ring_all_reduce`,
``T(1) = 0``); ``t_c`` the compute time of one step on one GPU, the same at
every ``N`` (the per-GPU batch is fixed: weak scaling); ``t_o`` a serial
overhead per step (sync, data loading); ``f`` the fraction of ``T`` that
overlaps compute.

Step time under the overlap assumptions (scaling-book, "roofline": overlap is
bounded by ``max(T_math, T_comms)`` and ``T_math + T_comms``)::

    seed's overlap    t_step = max(t_c, T) + t_o        the seed's compute_speedup: T hides behind the
                                                        whole step (the seed's assumption)
    perfect overlap   t_step = t_c + max(0, T - f_b t_c) + t_o
                                                        the shared physical bound
                                                        (:class:`commcost.step.overlap.OverlapBounds`):
                                                        gradients exist only once backward made them,
                                                        so T hides at most behind the backward share f_b
    overlap f         t_step = t_c + (1 - f) T + t_o    the seed's step_time_analysis (+ t_o)
    no overlap        t_step = t_c + T + t_o

Speedup, the throughput of ``N`` GPUs relative to one (the seed's
"effective throughput gain"; its 7B analysis prints it as "eff ... x")::

    X = N (t_c + t_o) / t_step          efficiency  E = X / N

With ``t_o = 0`` this is the seed's relative throughput ``N t_c / t_step``.

The seed's overlap-``f`` formula is not a bound: when ``f T > t_c`` it hides more
communication than there is compute to hide it behind, and its step is shorter
than the perfect-overlap step. Such rows are flagged
(:attr:`ScalingRow.partial_exceeds_perfect`) and the physical value
``t_c + max((1 - f) T, T - t_c) + t_o`` is kept beside it.

Source: the scaling-analysis seed ('Data Parallelism > Code: Scaling Analysis'); its numbers are the preset file
``hardware/scaling_seed.json``.
"""

from __future__ import annotations

from dataclasses import dataclass

from commcost.comm.collectives import Collective, CollectiveCost
from commcost.core.errors import InputError
from commcost.hardware import lookup
from commcost.analyses.scaling_seed import (SEED_PRESET_FILE, FabricPreset, ModelPreset, SeedDefaults, seed_defaults,
                                            seed_fabrics, seed_models, seed_two_tier)
from commcost.comm.model import CommModel
from commcost.step.overlap import OverlapBounds
from commcost.core.validation import require_count, require_finite_positive, require_fraction
from commcost.core.dtypes import gradient_bytes
import math

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing
if TYPE_CHECKING:
    from collections.abc import Mapping

__all__ = [
    "SEED_PRESET_FILE", "ModelPreset", "FabricPreset", "SeedDefaults",
    "ScalingInputs", "ScalingRow", "ScalingCurve",
    "seed_models", "seed_fabrics", "seed_defaults", "seed_inputs",
    "data_parallel_comm", "scaling_row", "scaling_curve", "seed_analysis", "seed_two_tier",
]

# --------------------------------------------------------------------------- inputs

def _require_gpu_counts(gpu_counts: tuple[int, ...]) -> None:
    if not isinstance(gpu_counts, tuple) or not gpu_counts:
        raise InputError(f"gpu_counts must be a non-empty tuple of GPU counts, got {gpu_counts!r}")
    for n in gpu_counts:
        if isinstance(n, bool) or not isinstance(n, int) or n < 1:
            raise InputError(f"every GPU count must be an integer >= 1, got {n!r} in {gpu_counts!r}")


@dataclass(frozen=True, slots=True, kw_only=True)
class ScalingInputs:
    """One model on one fabric over a list of GPU counts (SI units)."""

    model: str
    """Display name of the model."""
    fabric: str
    """Display name of the fabric."""
    params: float
    """Parameter count ``params``."""
    bytes_per_grad: int
    """Bytes per gradient element (bf16: 2)."""
    compute_s: float
    """Compute time of one step on one GPU ``t_c``, seconds (> 0)."""
    overhead_s: float
    """Serial overhead per step ``t_o``, seconds (>= 0)."""
    comm: CommModel
    """What prices the all-reduce: a flat link every rank of the ring uses (``B`` and ``a``, the
    seed's model), a two-tier fabric (NVLink inside a node, NICs across) or a calibrated profile."""
    gpu_counts: tuple[int, ...]
    """GPU counts ``N`` to evaluate, each >= 1."""
    overlap_fraction: float
    """Overlap fraction ``f`` in [0, 1] of the partial-overlap variant."""
    flat_ring_max_gpus: int | None = None
    """Largest ``N`` for which this flat fabric exists on common systems; rows
    beyond it are flagged, not changed. ``None``: no limit known."""
    flat_ring_note: str | None = None
    """Why the flat ring is unphysical beyond ``flat_ring_max_gpus`` (for the report)."""
    algorithm: str = "auto"
    """All-reduce algorithm asked of ``comm``; ``auto`` is the backend's fastest per N (on the
    seed's flat link: the ring)."""
    backward_fraction: float = 2.0 / 3.0
    """f_b: share of the step in backward, the window of the physical perfect-overlap bound."""
    compute_source: str = ""
    """Where ``compute_s`` comes from when not given (:mod:`commcost.analyses.scaling_compute`); empty: given."""
    gpu: str | None = None
    """The GPU preset, where known (a system): the memory verdict of each point
    (:func:`commcost.analyses.scaling_compute.states_memory`)."""

    def __post_init__(self) -> None:
        if not isinstance(self.comm, CommModel):
            raise InputError(f"comm must be a CommModel, got {type(self.comm).__name__}")
        limit = self.comm.max_gpus()
        if limit is not None and max(self.gpu_counts, default=1) > limit:
            raise InputError(f"{self.comm.describe()} holds at most {limit} GPUs; N = {max(self.gpu_counts)} "
                             f"does not fit")
        require_fraction("backward_fraction", self.backward_fraction)
        require_finite_positive("params", self.params)
        require_count("bytes_per_grad", self.bytes_per_grad)
        require_finite_positive("compute_s", self.compute_s)
        require_finite_positive("overhead_s", self.overhead_s, allow_zero=True)
        _require_gpu_counts(self.gpu_counts)
        require_fraction("overlap_fraction", self.overlap_fraction, allow_zero=True)
        if self.flat_ring_max_gpus is not None and (
                isinstance(self.flat_ring_max_gpus, bool) or not isinstance(self.flat_ring_max_gpus, int)
                or self.flat_ring_max_gpus < 1):
            raise InputError(f"flat_ring_max_gpus must be an integer >= 1 or None, "
                             f"got {self.flat_ring_max_gpus!r}")

    @property
    def message_bytes(self) -> float:
        """Gradient message ``S = params * bytes_per_grad``, bytes."""
        return gradient_bytes(self.params, self.bytes_per_grad)


def seed_inputs(model_key: str, fabric_key: str, comm: CommModel, *, gpu_counts: tuple[int, ...] | None = None,
                overlap_fraction: float | None = None, overhead_s: float | None = None) -> ScalingInputs:
    """The seed's model ``model_key`` on fabric ``fabric_key``, priced by ``comm`` (the caller's resolver
    builds it from the fabric's link: :func:`commcost.cli._fabric.seed_fabric_models`); unset options take
    the seed's values."""
    d = seed_defaults()
    m = lookup(seed_models(), model_key, "model")
    fab = lookup(seed_fabrics(), fabric_key, "fabric")
    return ScalingInputs(
        model=m.name, fabric=fab.name, params=m.params, bytes_per_grad=d.bytes_per_grad,
        compute_s=m.compute_s, overhead_s=d.overhead_s if overhead_s is None else overhead_s,
        comm=comm, gpu_counts=d.gpu_counts if gpu_counts is None else gpu_counts,
        overlap_fraction=d.overlap_fraction if overlap_fraction is None else overlap_fraction,
        flat_ring_max_gpus=fab.flat_ring_max_gpus, flat_ring_note=fab.flat_ring_note,
    )


# --------------------------------------------------------------------------- results

@dataclass(frozen=True, slots=True, kw_only=True)
class ScalingRow:
    """One GPU count: the all-reduce and the step under each overlap assumption."""

    gpus: int
    """GPU count ``N``."""
    comm: CollectiveCost
    """The gradient all-reduce ``T(N)`` with its latency and bandwidth terms."""
    compute_s: float
    """``t_c``, seconds."""
    overhead_s: float
    """``t_o``, seconds."""
    overlap_fraction: float
    """``f``."""
    step_s: float
    """The seed's overlap assumption (T hides behind the whole step): ``max(t_c, T) + t_o``, seconds."""
    step_perfect_s: float
    """The shared physical bound: ``t_c + max(0, T - f_b t_c) + t_o`` (:class:`OverlapBounds`), seconds."""
    step_partial_s: float
    """Overlap ``f`` as the seed computes it: ``t_c + (1 - f) T + t_o``, seconds."""
    step_no_overlap_s: float
    """No overlap: ``t_c + T + t_o``, seconds."""
    step_partial_bounded_s: float
    """Overlap ``f`` capped by the compute there is to hide behind:
    ``t_c + max((1 - f) T, T - t_c) + t_o``, seconds."""
    beyond_flat_ring: bool
    """``N`` exceeds the fabric's ``flat_ring_max_gpus``: the flat ring is an idealization."""
    crosses_nodes: bool = False
    """Two-tier fabric and ``N > G``: the all-reduce leaves the NVLink domain (a knee where the curve bends: :func:`knee`)."""

    @property
    def comm_s(self) -> float:
        """``T(N)``, seconds."""
        return self.comm.total_s

    @property
    def overlapped_comm_s(self) -> float:
        """``f T``: the communication the overlap-``f`` step assumes hidden behind compute, seconds."""
        return self.overlap_fraction * self.comm.total_s

    def _speedup(self, step_s: float) -> float:
        return self.gpus * (self.compute_s + self.overhead_s) / step_s

    @property
    def speedup(self) -> float:
        """The seed's overlap ``X = N (t_c + t_o) / step_s`` (the seed's ``speedups``)."""
        return self._speedup(self.step_s)

    @property
    def speedup_perfect(self) -> float:
        """The physical perfect-overlap bound: ``N (t_c + t_o) / step_perfect_s``."""
        return self._speedup(self.step_perfect_s)

    @property
    def efficiency_perfect(self) -> float:
        """``X / N`` at the physical perfect-overlap bound, a fraction."""
        return self.speedup_perfect / self.gpus

    @property
    def speedup_partial(self) -> float:
        """Overlap ``f``: ``N (t_c + t_o) / step_partial_s`` (the seed's "eff ... x" when t_o = 0)."""
        return self._speedup(self.step_partial_s)

    @property
    def speedup_no_overlap(self) -> float:
        """No overlap: ``N (t_c + t_o) / step_no_overlap_s``."""
        return self._speedup(self.step_no_overlap_s)

    @property
    def speedup_partial_bounded(self) -> float:
        """``N (t_c + t_o) / step_partial_bounded_s``."""
        return self._speedup(self.step_partial_bounded_s)

    @property
    def efficiency(self) -> float:
        """``X / N`` at perfect overlap, a fraction (the seed's ``efficiencies`` / 100)."""
        return self.speedup / self.gpus

    @property
    def efficiency_partial(self) -> float:
        """``X / N`` at overlap ``f``, a fraction."""
        return self.speedup_partial / self.gpus

    @property
    def efficiency_no_overlap(self) -> float:
        """``X / N`` with no overlap, a fraction."""
        return self.speedup_no_overlap / self.gpus

    @property
    def partial_exceeds_perfect(self) -> bool:
        """``f T > t_c``: the seed's overlap-``f`` step hides more than the compute can
        cover, so it beats perfect overlap -- unphysical."""
        return self.step_partial_s < self.step_s


@dataclass(frozen=True, slots=True, kw_only=True)
class ScalingCurve:
    """One model on one fabric over all requested GPU counts."""

    inputs: ScalingInputs
    """What was evaluated."""
    rows: tuple[ScalingRow, ...]
    """One row per GPU count, in the order of ``inputs.gpu_counts``."""

    @property
    def message_bytes(self) -> float:
        """``S``, bytes."""
        return self.inputs.message_bytes


# --------------------------------------------------------------------------- model

def data_parallel_comm(message_bytes: float, gpus: int, comm: CommModel, algorithm: str = "auto") -> CollectiveCost:
    """Gradient all-reduce of one data-parallel step: ``comm.cost`` at ``N`` ranks (a fabric gains the
    nodes ``N`` needs). On the seed's flat link this is the ring (the seed's ``ring_allreduce_time_ms``),
    ``T = 2(N-1) a + 2(N-1)/N * S/B``, ``T(1) = 0``. Every scaling number gets its communication
    time here and only here."""
    return comm.scaled().cost(Collective.ALL_REDUCE, message_bytes, gpus, algorithm)


def scaling_row(*, gpus: int, message_bytes: float, compute_s: float, overhead_s: float,
                overlap_fraction: float, comm: CommModel, flat_ring_max_gpus: int | None = None,
                algorithm: str = "auto", backward_fraction: float = 2.0 / 3.0) -> ScalingRow:
    """Step times at one GPU count ``N`` (equations in the module docstring).

    ``seed = max(t_c, T) + t_o``; ``perfect = t_c + max(0, T - f_b t_c) + t_o``;
    ``partial = t_c + (1-f) T + t_o``; ``none = t_c + T + t_o``;
    ``bounded = t_c + max((1-f) T, T - t_c) + t_o``.
    """
    _require_gpu_counts((gpus,))
    require_finite_positive("compute_s", compute_s)
    require_finite_positive("overhead_s", overhead_s, allow_zero=True)
    require_fraction("overlap_fraction", overlap_fraction, allow_zero=True)
    c = data_parallel_comm(message_bytes, gpus, comm, algorithm)
    T, t_c, t_o, f = c.total_s, compute_s, overhead_s, overlap_fraction
    bounds = OverlapBounds(compute_s=t_c, comm_s=T, window_s=backward_fraction * t_c, after_s=t_o)
    topo = getattr(comm, "topology", None)
    return ScalingRow(
        gpus=gpus, comm=c, compute_s=t_c, overhead_s=t_o, overlap_fraction=f,
        step_s=max(t_c, T) + t_o,
        step_perfect_s=bounds.perfect_overlap_s,
        step_partial_s=t_c + (1.0 - f) * T + t_o,
        step_no_overlap_s=bounds.no_overlap_s,
        step_partial_bounded_s=t_c + max((1.0 - f) * T, T - t_c) + t_o,
        beyond_flat_ring=flat_ring_max_gpus is not None and gpus > flat_ring_max_gpus,
        crosses_nodes=topo is not None and gpus > topo.gpus_per_node,
    )


KNEE_SLOPE_RATIO = 2.0
"""A knee is announced where the all-reduce's growth per doubling of N at least doubles (:func:`knee`)."""


def knee(curve: ScalingCurve) -> ScalingRow | None:
    """The row where the curve bends as the group leaves the node, or None.

    With ``k`` the first row whose group crosses nodes and the slope of ``T`` per doubling of ``N``,
    ``s(i) = (T_i - T_{i-1}) / log2(N_i / N_{i-1})``, the knee is row ``k`` when ``s(k) > 0`` and ``s(k) >=``
    :data:`KNEE_SLOPE_RATIO` ``x max s(i)`` over the intervals inside the node (``1 < N_{i-1}``, ``i < k``; from one
    GPU ``T`` starts at 0, no slope of the fabric): the cost of adding GPUs grows faster from there. It needs one such
    interval (with none, nothing says the slope changed), and no knee is announced where the crossing costs no more
    than the GPUs added inside the node did (an in-network reduction across nodes, a fast fabric)."""
    rows = curve.rows
    k = next((i for i, r in enumerate(rows) if r.crosses_nodes), None)
    if k is None:
        return None

    def slope(i: int) -> float:
        return (rows[i].comm_s - rows[i - 1].comm_s) / math.log2(rows[i].gpus / rows[i - 1].gpus)

    inside = [slope(i) for i in range(1, k) if rows[i - 1].gpus > 1]
    if not inside:
        return None
    s_k = slope(k)
    return rows[k] if s_k > 0 and s_k >= KNEE_SLOPE_RATIO * max(max(inside), 0.0) else None


def scaling_curve(inputs: ScalingInputs) -> ScalingCurve:
    """Evaluate :func:`scaling_row` at every GPU count of ``inputs``."""
    i = inputs
    rows = tuple(scaling_row(gpus=n, message_bytes=i.message_bytes, compute_s=i.compute_s,
                             overhead_s=i.overhead_s, overlap_fraction=i.overlap_fraction,
                             comm=i.comm, flat_ring_max_gpus=i.flat_ring_max_gpus,
                             algorithm=i.algorithm, backward_fraction=i.backward_fraction)
                 for n in i.gpu_counts)
    return ScalingCurve(inputs=i, rows=rows)


def seed_analysis(comms: Mapping[str, CommModel]) -> tuple[tuple[ScalingCurve, ...], tuple[ScalingCurve, ...]]:
    """Everything the seed computes: ``(results, overlap_analysis)``, each fabric key of ``comms`` (in its
    order) priced by its CommModel (the seed's fabrics: :func:`commcost.cli._fabric.seed_fabric_models`).

    ``results``: every model on every fabric at the seed's GPU counts, serial
    overhead 0.5 ms (the seed's ``results`` dict). ``overlap_analysis``: the 7B
    model on every fabric at N = 1..32, overlap 0.85, no serial overhead (the
    seed's printed analysis).
    """
    d = seed_defaults()
    fabrics = tuple(comms)
    results = tuple(scaling_curve(seed_inputs(m, f, comms[f])) for m in seed_models() for f in fabrics)
    overlap = tuple(scaling_curve(seed_inputs(d.overlap_model_key, f, comms[f], gpu_counts=d.overlap_gpu_counts,
                                              overlap_fraction=d.overlap_fraction,
                                              overhead_s=d.overlap_overhead_s))
                    for f in fabrics)
    return results, overlap
