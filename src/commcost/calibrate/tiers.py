"""Calibration that crosses scales: fit a system preset's tiers to logs from small scales.

A flat alpha-beta profile fitted on 2 nodes and reused on 16 carries the 2-node bandwidth (where
a tree moves S per node and NVLink dominates) to a scale where the network dominates
measured a 40% median miss that way. Instead, :func:`fit_tiers` keeps the preset's topology and
protocol model (:mod:`commcost.comm.algorithms`) and fits three multipliers of its tiers to the
measured all-reduce times::

    B_i -> s_i B_i   (intra-node bandwidth, and the NVLS bandwidth with it)
    B_e -> s_e B_e   (per-NIC bandwidth)
    a_e -> m_e a_e   (network step latency)
    o_s -> max(1, m_s o_s)   (the spine's oversubscription, on a three-tier preset only)

by least squares on ``ln(t_pred / t_meas)`` with a prior that keeps each multiplier near the
preset's value unless the data move it (maximum a posteriori with ``ln t`` errors of
``sigma_t = 5%`` and ``ln s ~ N(0, sigma_s = 30%)``)::

    minimise  sum_samples ln(t_pred / t_meas)^2 + (sigma_t / sigma_s)^2 sum_k (ln s_k)^2

(coordinate search over ``ln s`` in [ln 1/8, ln 8], repeated until no coordinate moves). A
multiplier is fitted only if it is *identified*: on at least one sample, ``d ln t / d ln s`` is at
least :data:`MIN_SENSITIVITY` (the tier bounds a real share of that sample's time); otherwise it
stays 1 and is listed in ``not_fitted`` with the reason. The prior
matters where a tier is not the bottleneck of any sample: on 2 nodes the NVLS tree or the NVLink
chain often bounds the time, so the NIC's bandwidth is barely seen and, unpenalised, wanders to
wherever it helps a 2-node row by 0.1%, then dominates at 4 nodes. One-node samples pin ``s_i``;
multi-node samples pin ``s_e`` and ``m_e``; without multi-node samples those stay 1 and are
reported as not fitted; samples spanning several pods of a three-tier preset pin ``m_s``. :meth:`TierFit.topology` then predicts any node count through the
preset's topology (congestion rule included); :meth:`TierFit.extrapolated` names the
parameters a prediction at ``nodes`` uses outside the node counts they were fitted at.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass, replace
from typing import Sequence

from commcost.comm.algorithms import collective_cost
from commcost.comm.topology import Link, Topology, nodes_spanned, pods_spanned
from commcost.core.errors import InputError
from commcost.core.validation import require_count, require_finite_positive
from pathlib import Path
from commcost.calibrate.nccl_tests import collective_from_name
from commcost.calibrate.nccl_tests import parse_nccl_tests
from commcost.comm.systems import system_group
from commcost.comm.systems import system_topology

__all__ = ["TierSample", "TierFit", "fit_tiers", "scaled_topology", "nodes_spanned", "log_tier_samples",
           "MIN_TIER_SIZE_BYTES"]

_LOG_RANGE = math.log(8.0)
"""Each multiplier is searched in [1/8, 8]."""
MIN_SENSITIVITY = 0.25
"""A multiplier is fitted only where some sample's time moves by at least 0.25 ln-units per ln-unit of it."""
PRIOR_WEIGHT = (0.05 / 0.30) ** 2
"""``(sigma_t / sigma_s)^2``: 5% measurement scatter in ``ln t`` against a 30% prior spread of each multiplier."""
MIN_TIER_SIZE_BYTES = 2**20
"""Rows of a log below 1 MiB are not fitted (``commcost fit --tiers``): the tiers' bandwidths and the
network step latency are what the fit moves, and sizes from 1 MiB up carry both."""


@dataclass(frozen=True, slots=True, kw_only=True)
class TierSample:
    """One measured all-reduce on ``nodes`` nodes of the system."""

    nodes: int
    """Nodes the group spans."""
    gpus: int
    """Ranks P."""
    message_bytes: float
    """Size S, bytes (nccl-tests' size column)."""
    time_s: float
    """Measured time, seconds."""

    def __post_init__(self) -> None:
        require_count("nodes", self.nodes)
        require_count("gpus", self.gpus)
        require_finite_positive("message_bytes", self.message_bytes)
        require_finite_positive("time_s", self.time_s)


def log_tier_samples(samples, *, gpus: int, gpus_per_node: int,
                     min_size_bytes: int = MIN_TIER_SIZE_BYTES) -> tuple[int, list[TierSample]]:
    """One log's all-reduce rows as :class:`TierSample` s: ``(nodes, samples)`` with ``nodes =``
    :func:`nodes_spanned` ``(gpus, gpus_per_node)``, keeping the rows of at least ``min_size_bytes``
    (``samples``: :class:`commcost.calibrate.fit.Sample` s, each with ``size_bytes`` and ``time_s``)."""
    nodes = nodes_spanned(gpus, gpus_per_node)
    return nodes, [TierSample(nodes=nodes, gpus=gpus, message_bytes=s.size_bytes, time_s=s.time_s)
                   for s in samples if s.size_bytes >= min_size_bytes]


def scaled_topology(topo: Topology, s_i: float, s_e: float, m_e: float, m_s: float = 1.0) -> Topology:
    """``topo`` with its intra (and NVLS) bandwidth times ``s_i``, NIC bandwidth times ``s_e``, NIC step times
    ``m_e`` and, on a three-tier topology, the spine's oversubscription times ``m_s`` (at least 1: non-blocking)."""
    intra = Link(bandwidth_bytes_per_s=topo.intra.bandwidth_bytes_per_s * s_i, latency_s=topo.intra.latency_s)
    inter = Link(bandwidth_bytes_per_s=topo.inter.bandwidth_bytes_per_s * s_e, latency_s=topo.inter.latency_s * m_e)
    nvls = None if topo.in_network is None else Link(
        bandwidth_bytes_per_s=topo.in_network.bandwidth_bytes_per_s * s_i, latency_s=topo.in_network.latency_s)
    out = replace(topo, intra=intra, inter=inter, in_network=nvls)
    if topo.pod_nodes is not None and m_s != 1.0:
        out = replace(out, spine_oversubscription=max(1.0, topo.spine_oversubscription * m_s))
    return out


@dataclass(frozen=True, slots=True, kw_only=True)
class TierFit:
    """Per-tier multipliers of a system preset, fitted to measured all-reduce times."""

    system: str
    """The system preset."""
    intra_bandwidth_scale: float
    """``s_i``: measured / preset intra-node (and NVLS) bandwidth."""
    inter_bandwidth_scale: float
    """``s_e``: measured / preset per-NIC bandwidth."""
    inter_latency_scale: float
    """``m_e``: measured / preset network step latency."""
    fitted_nodes: tuple[int, ...]
    """Node counts of the samples (sorted, distinct)."""
    not_fitted: tuple[str, ...]
    """Multipliers no sample identifies (left at 1): no sample's time depends on them by
    :data:`MIN_SENSITIVITY` or more."""
    median_abs_error: float
    """Median |t_pred / t_meas - 1| over the samples, after the fit."""
    spine_oversubscription_scale: float = 1.0
    """``m_s``: measured / preset spine oversubscription (three-tier presets; 1 elsewhere or when no
    sample spans pods)."""

    def topology(self, nodes: int) -> Topology:
        """The preset's topology on ``nodes`` nodes with the fitted multipliers."""

        return scaled_topology(system_topology(self.system, nodes=nodes), self.intra_bandwidth_scale,
                               self.inter_bandwidth_scale, self.inter_latency_scale,
                               self.spine_oversubscription_scale)

    def extrapolated(self, nodes: int) -> tuple[str, ...]:
        """The fitted parameters a prediction on ``nodes`` nodes uses beyond the scales they were fitted at."""
        out = []
        if nodes > 1 and max(self.fitted_nodes) < nodes:
            out += [p for p in ("inter_bandwidth_scale", "inter_latency_scale") if p not in self.not_fitted]
        if nodes > 1 and max(self.fitted_nodes) == 1:
            out += ["intra_bandwidth_scale (one-node fit used across nodes)"]
        topo = self.topology(nodes)
        pods, fitted_pods = pods_spanned(topo, nodes), pods_spanned(topo, max(self.fitted_nodes))
        if pods > 1 and fitted_pods == 1:
            out += [f"spine_oversubscription (the preset's {topo.spine_oversubscription:g}: no log spans pods of "
                    f"{topo.pod_nodes} nodes, this group spans {pods})"]
        elif pods > fitted_pods and "spine_oversubscription_scale" not in self.not_fitted:
            out += ["spine_oversubscription_scale"]
        return tuple(out)


_KEYS = ("i", "e", "m", "s")
_NAMES = {"i": "intra_bandwidth_scale", "e": "inter_bandwidth_scale", "m": "inter_latency_scale",
          "s": "spine_oversubscription_scale"}


def _predict(system: str, x: TierSample, s: dict[str, float]) -> float:

    topo, P = system_group(system, nodes=x.nodes, gpus=x.gpus)
    return collective_cost("all_reduce", x.message_bytes, P,
                           scaled_topology(topo, s["i"], s["e"], s["m"], s.get("s", 1.0))).total_s


def _loss(system: str, samples: Sequence[TierSample], s: dict[str, float]) -> float:
    total = sum(math.log(_predict(system, x, s) / x.time_s) ** 2 for x in samples)
    return total + PRIOR_WEIGHT * sum(math.log(v) ** 2 for v in s.values())


def _sensitivity(system: str, samples: Sequence[TierSample], k: str) -> float:
    """``max over samples of |d ln t / d ln s_k|`` at the preset (central difference, s_k = 1.1^(+-1))."""
    best = 0.0
    for x in samples:
        t = [_predict(system, x, {"i": 1.0, "e": 1.0, "m": 1.0, "s": 1.0, k: v}) for v in (1 / 1.1, 1.1)]
        best = max(best, abs(math.log(t[1] / t[0])) / (2 * math.log(1.1)))
    return best


def _line_search(f, x0: float) -> float:
    """Minimise ``f`` over ``ln x`` in [-_LOG_RANGE, _LOG_RANGE]: a 17-point grid, then golden-section refinement."""
    grid = [-_LOG_RANGE + 2 * _LOG_RANGE * k / 16 for k in range(17)]
    best = min(grid + [math.log(x0)], key=lambda u: f(math.exp(u)))
    lo, hi = best - 2 * _LOG_RANGE / 16, best + 2 * _LOG_RANGE / 16
    g = (math.sqrt(5) - 1) / 2
    for _ in range(20):
        a, b = hi - g * (hi - lo), lo + g * (hi - lo)
        if f(math.exp(a)) < f(math.exp(b)):
            hi = b
        else:
            lo = a
    return math.exp((lo + hi) / 2)


def fit_tiers(system: str, samples: Sequence[TierSample]) -> TierFit:
    """Fit ``s_i``, ``s_e``, ``m_e`` of ``system`` to ``samples`` (module docstring)."""

    if not samples:
        raise InputError("fit_tiers needs at least one sample")
    for x in samples:
        if not isinstance(x, TierSample):
            raise InputError(f"samples must be TierSample objects, got {type(x).__name__}")
        system_group(system, nodes=x.nodes, gpus=x.gpus)  # the placement exists (or the error says why)

    keys = _KEYS if system_topology(system).pod_nodes is not None else _KEYS[:3]  # m_s: three-tier presets only
    s = {k: 1.0 for k in keys}
    free = [k for k in keys if _sensitivity(system, samples, k) >= MIN_SENSITIVITY]
    for _ in range(4):
        moved = False
        for k in free:
            def f(v, k=k):
                return _loss(system, samples, dict(s, **{k: v}))
            v = _line_search(f, s[k])
            moved |= abs(math.log(v / s[k])) > 1e-3
            s[k] = v
        if not moved:
            break
    errors = [abs(_predict(system, x, s) / x.time_s - 1) for x in samples]
    not_fitted = tuple(_NAMES[k] for k in keys if k not in free)
    return TierFit(system=system, intra_bandwidth_scale=s["i"], inter_bandwidth_scale=s["e"],
                   inter_latency_scale=s["m"], spine_oversubscription_scale=s.get("s", 1.0),
                   fitted_nodes=tuple(sorted({x.nodes for x in samples})),
                   not_fitted=not_fitted, median_abs_error=statistics.median(errors))


TIER_PROFILE_KIND = "commcost-tier-profile"
"""``kind`` of a tier profile file (``commcost fit --tiers SYSTEM``), told apart from an alpha-beta profile."""


def tier_fit_to_dict(fit: TierFit, provenance: dict) -> dict:
    """The tier profile's JSON object (version 1)."""
    return {"version": 1, "kind": TIER_PROFILE_KIND, "system": fit.system,
            "intra_bandwidth_scale": fit.intra_bandwidth_scale, "inter_bandwidth_scale": fit.inter_bandwidth_scale,
            "inter_latency_scale": fit.inter_latency_scale,
            "spine_oversubscription_scale": fit.spine_oversubscription_scale, "fitted_nodes": list(fit.fitted_nodes),
            "not_fitted": list(fit.not_fitted), "median_abs_error": fit.median_abs_error, "provenance": provenance}


def tier_fit_from_dict(obj: dict, where: str) -> TierFit:
    """Validate and build a :class:`TierFit` from a tier profile's JSON object."""
    def number(key: str) -> float:
        v = obj.get(key)
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or v <= 0:
            raise InputError(f"{where}: field {key!r} must be a finite number > 0, got {v!r}")
        return float(v)

    if type(obj.get("version")) is not int or obj.get("version") != 1:  # true and 1.0 equal 1: no version
        raise InputError(f"{where}: tier profile version {obj.get('version')!r} is not supported (this commcost reads 1)")
    system = obj.get("system")
    if not isinstance(system, str):
        raise InputError(f"{where}: field 'system' must be a system preset name, got {system!r}")
    nodes = obj.get("fitted_nodes")
    if not isinstance(nodes, list) or not nodes or any(isinstance(n, bool) or not isinstance(n, int) or n < 1
                                                        for n in nodes):
        raise InputError(f"{where}: field 'fitted_nodes' must be a list of node counts, got {nodes!r}")
    not_fitted = obj.get("not_fitted", [])
    if not isinstance(not_fitted, list) or not all(isinstance(x, str) for x in not_fitted):
        raise InputError(f"{where}: field 'not_fitted' must be a list of names, got {not_fitted!r}")
    err = obj.get("median_abs_error", 0.0)
    if isinstance(err, bool) or not isinstance(err, (int, float)) or not math.isfinite(err) or err < 0:
        raise InputError(f"{where}: field 'median_abs_error' must be a finite number >= 0, got {err!r}")
    return TierFit(system=system, intra_bandwidth_scale=number("intra_bandwidth_scale"),
                   inter_bandwidth_scale=number("inter_bandwidth_scale"),
                   inter_latency_scale=number("inter_latency_scale"),
                   spine_oversubscription_scale=number("spine_oversubscription_scale")
                   if "spine_oversubscription_scale" in obj else 1.0, fitted_nodes=tuple(sorted(set(nodes))),
                   not_fitted=tuple(not_fitted), median_abs_error=float(err))


def split_log_ranks(spec: str) -> tuple[str, int | None]:
    """``"run.log:16"`` -> ``("run.log", 16)``; ``"run.log"`` -> ``("run.log", None)``.

    The suffix is the group size of that one log (``LOG:RANKS``); a path whose last ``:`` part is
    not a positive integer is a path.
    """
    head, sep, tail = spec.rpartition(":")
    if sep and head and tail.isdigit():
        ranks = int(tail)
        if ranks < 1:
            raise InputError(f"{spec}: the group size after ':' must be >= 1, got {ranks}")
        return head, ranks
    return spec, None


def log_group_size(path: str, given: int | None, gpus_flag: int | None, n_logs: int) -> int | None:
    """The group size one log of a cross-scale fit is fitted at, or an error naming the ambiguity.

    In order: ``LOG:RANKS`` (``given``), which must agree with the ranks the log lists under
    ``# Using devices`` when it lists them; else the ranks the log lists; else ``--gpus`` when it is
    the only log (with several logs one ``--gpus`` cannot say which log it is for: refused); else
    None (the reader's own error says the log lists no ranks). ``--gpus`` that disagrees with a log's
    listed ranks is refused too, rather than fitting a one-node log as two nodes.
    """


    listed: set[int] = set()
    try:
        text = Path(path).read_text(encoding="utf-8", errors="replace")
        if "# Using devices" in text or "_perf" in text or "busbw" in text:
            listed = {r.gpus for r in parse_nccl_tests(text, source=path, op_hint=collective_from_name(Path(path).name))
                      if r.gpus}
    except (OSError, InputError):
        listed = set()  # not a readable nccl-tests log: load_series says why
    if given is not None:
        if listed and given not in listed:
            raise InputError(f"{path}: the log lists {'/'.join(map(str, sorted(listed)))} ranks, "
                             f"{path}:{given} says {given}")
        return given
    if listed:
        if len(listed) > 1:
            raise InputError(f"{path}: the log holds runs of {'/'.join(map(str, sorted(listed)))} ranks; "
                             f"give {path}:RANKS")
        (ranks,) = listed
        if gpus_flag is not None and gpus_flag != ranks:
            raise InputError(f"{path}: the log lists {ranks} ranks but --gpus says {gpus_flag}; drop --gpus (each "
                             "log is fitted at the ranks it lists)")
        return ranks
    if gpus_flag is not None and n_logs > 1:
        raise InputError(f"{path}: the log lists no ranks and --gpus {gpus_flag} would apply to all {n_logs} logs; "
                         f"give each log its group size as {path}:RANKS")
    return gpus_flag
