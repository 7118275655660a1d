"""Profile files: a fitted alpha-beta model and where it came from.

Schema (JSON, SI units, version 1)::

    {
      "version": 1,                      # this schema; other versions are refused
      "kind": "commcost-profile",
      "op": "all_reduce",                # commcost.comm.collectives.Collective value
      "algorithm": "ring",               # commcost.comm.collectives.Algorithm value
      "gpus": 16,                        # ranks P of the measurement
      "alpha_s": 8.9e-07,                # headline: first regime's per-ring-step latency, s
      "bandwidth_bytes_per_s": 4.7e+11,  # headline: last regime's per-rank bus bandwidth, bytes/s
      "crossover_bytes": 6.7e+06,        # k alpha B / f (P alpha B for all-reduce), bytes
      "model": "T(S) = k*alpha_i + f*S/B_i ...",   # the equation, for a human reader
      "regimes": [                       # contiguous size ranges, first from 0, last to null (= no upper end)
        {"min_size_bytes": 0, "max_size_bytes": 741455.0, "alpha_s": 8.9e-07, "bandwidth_bytes_per_s": 1.9e+10},
        ...
      ],
      "quality": {"r2": 0.9994, "median_abs_rel_error": 0.01, "max_abs_rel_error": 0.09, "points": 32},
      "provenance": {"source": "all_reduce_perf.log", "source_kind": "nccl-tests", "created": "...",
                     "commcost_version": "0.1.0", "nodes": 2, "hosts": [...], "devices": [...], ...}
    }

``load_profile(path).link`` is the :class:`~commcost.comm.topology.Link` (headline
bandwidth and alpha) that every command accepts through ``--profile``.
"""

from __future__ import annotations

import datetime as dt
import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import commcost
from commcost.calibrate.fit import AlphaBetaFit, Comparison, Regime
from commcost.comm.collectives import Algorithm, Collective
from commcost.core.errors import InputError
from commcost.comm.topology import Link
from commcost.core.files import write_atomic
from commcost.core.units import LATENCY_MAX_S, RATE_MAX_BYTES_PER_S, RATE_MIN_BYTES_PER_S
from commcost.calibrate.tiers import tier_fit_from_dict
from commcost.comm.model import ProfileModel
from commcost.comm.model import ProfileScope
from commcost.core.errors import long_integer_field

SIZE_MAX_BYTES = 2.0**60
"""Largest size a profile's regime edge may name, 1 EiB (as the ``--size`` flags)."""

__all__ = ["PROFILE_VERSION", "Profile", "load_profile", "save_profile", "profile_to_dict",
           "stamped_provenance"]

PROFILE_VERSION = 1
"""The profile schema this code reads and writes."""

MODEL_TEXT = ("T(S) = k*alpha_i + f*S/B_i for the regime i whose [min_size_bytes, max_size_bytes) holds S; "
              "k = ring latency steps (2(P-1) all-reduce, 1 send/recv, P-1 otherwise), "
              "f = nccl-tests bus-bandwidth factor (2(P-1)/P all-reduce, (P-1)/P all-gather/reduce-scatter/"
              "all-to-all, 1 otherwise)")


@dataclass(frozen=True, slots=True, kw_only=True)
class Profile:
    """A calibrated model as stored in a profile file."""

    fit: AlphaBetaFit
    """The fitted model (op, algorithm, gpus, regimes)."""
    r2: float
    """R^2 of the fit on ln T over the points it was fitted on."""
    median_abs_rel_error: float
    """Median |relative error| over those points."""
    max_abs_rel_error: float
    """Largest |relative error| over those points."""
    points: int
    """How many measured points the fit used."""
    provenance: dict[str, Any] = field(default_factory=dict)
    """Where the data came from (source file, kind, hosts, devices, date, versions)."""
    path: str | None = None
    """The file it was loaded from, if any (for reports that name the profile)."""

    @property
    def link(self) -> Link:
        """The calibrated link: headline bus bandwidth and per-step latency."""
        return self.fit.link

    @classmethod
    def from_fit(cls, fit: AlphaBetaFit, quality: Comparison, provenance: dict[str, Any]) -> Profile:
        """A profile of ``fit`` with the quality measured on its own points."""
        return cls(fit=fit, r2=quality.r2, median_abs_rel_error=quality.median_abs_rel_error,
                   max_abs_rel_error=quality.max_abs_rel_error, points=len(quality.points),
                   provenance=dict(provenance))


def stamped_provenance(provenance: dict[str, Any], *, now=None) -> dict[str, Any]:
    """A copy of ``provenance`` as a profile written now keeps it: ``created`` (UTC, to the second; the
    source's own date where it has one) and ``commcost_version`` (this version, always). ``now``: the
    time to stamp (default the clock)."""
    out = dict(provenance)
    out.setdefault("created", (now or dt.datetime.now(dt.timezone.utc)).isoformat(timespec="seconds"))
    out["commcost_version"] = commcost.__version__
    return out


def profile_to_dict(profile: Profile) -> dict[str, Any]:
    """The JSON object of the module docstring."""
    fit = profile.fit
    return {
        "version": PROFILE_VERSION,
        "kind": "commcost-profile",
        "op": fit.op.value,
        "algorithm": fit.algorithm.value,
        "gpus": fit.gpus,
        "alpha_s": fit.alpha_s,
        "bandwidth_bytes_per_s": fit.bandwidth_bytes_per_s,
        "crossover_bytes": fit.crossover_bytes,
        "model": MODEL_TEXT,
        "regimes": [{
            "min_size_bytes": r.min_size_bytes,
            "max_size_bytes": None if math.isinf(r.max_size_bytes) else r.max_size_bytes,
            "alpha_s": r.alpha_s,
            "bandwidth_bytes_per_s": r.bandwidth_bytes_per_s,
        } for r in fit.regimes],
        "quality": {"r2": profile.r2, "median_abs_rel_error": profile.median_abs_rel_error,
                    "max_abs_rel_error": profile.max_abs_rel_error, "points": profile.points},
        "provenance": profile.provenance,
    }


def save_profile(profile: Profile, path: str | Path) -> None:
    """Write ``profile`` as JSON (atomically)."""
    obj = profile_to_dict(profile)
    try:
        profile_from_dict(obj, where=f"{path} (as fitted)")  # never write a profile that load_profile refuses
    except InputError as exc:
        raise InputError(f"not writing the profile: {exc}") from None
    write_atomic(path, json.dumps(obj, indent=2, allow_nan=False) + "\n")


def _get(obj: dict[str, Any], key: str, where: str, kind: type | tuple[type, ...]) -> Any:
    if key not in obj:
        raise InputError(f"{where}: missing field {key!r}")
    value = obj[key]
    if isinstance(value, bool) or not isinstance(value, kind):
        raise InputError(f"{where}: field {key!r} has the wrong type: {_shown(value)}")
    return value


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else f"{text[:40]}... ({len(text)} characters)"


def _num(obj: dict[str, Any], key: str, where: str, lo: float, hi: float, kind: Any = (int, float)) -> Any:
    """A numeric field, finite and within ``[lo, hi]`` (a profile must price every size finitely)."""
    value = _get(obj, key, where, kind)
    if isinstance(value, float) and not math.isfinite(value):
        raise InputError(f"{where}: field {key!r} must be a finite number, got {value}")
    if not lo <= value <= hi:
        shown = f"{value:.4g}" if isinstance(value, float) or abs(value) < 10**15 else _shown(value)
        raise InputError(f"{where}: field {key!r} must be between {lo:g} and {hi:g}, got {shown}")
    return value


def _enum(cls: type, value: str, what: str, where: str) -> Any:
    try:
        return cls(value)
    except ValueError:
        valid = ", ".join(m.value for m in cls)  # type: ignore[attr-defined]
        raise InputError(f"{where}: unknown {what} {value!r} (valid: {valid})") from None


def profile_from_dict(obj: Any, where: str = "profile") -> Profile:
    """Validate and build a :class:`Profile` from its JSON object."""
    if not isinstance(obj, dict):
        raise InputError(f"{where}: expected a JSON object, got {type(obj).__name__}")
    kind = obj.get("kind", "missing")
    if kind != "commcost-profile":
        raise InputError(f"{where}: field 'kind' must be \"commcost-profile\", got {_shown(kind)} "
                         "(not a profile written by commcost fit)")
    version = obj.get("version")
    if type(version) is not int or version != PROFILE_VERSION:  # true and 1.0 equal 1, but are no version
        raise InputError(f"{where}: profile version {version!r} is not supported (this commcost reads "
                         f"version {PROFILE_VERSION}); refit it with: commcost fit DATA -o PROFILE")
    op = _enum(Collective, _get(obj, "op", where, str), "op", where)
    algorithm = _enum(Algorithm, _get(obj, "algorithm", where, str), "algorithm", where)
    gpus = _num(obj, "gpus", where, 1, 10**6, int)
    raw_regimes = _get(obj, "regimes", where, list)
    regimes = []
    for idx, r in enumerate(raw_regimes):
        w = f"{where}: regimes[{idx}]"
        if not isinstance(r, dict):
            raise InputError(f"{w}: expected an object, got {r!r}")
        hi = r.get("max_size_bytes", "missing")
        if hi == "missing":
            raise InputError(f"{w}: missing field 'max_size_bytes'")
        if hi is not None:
            hi = _num(r, "max_size_bytes", w, 0, SIZE_MAX_BYTES)
        regimes.append(Regime(
            min_size_bytes=float(_num(r, "min_size_bytes", w, 0, SIZE_MAX_BYTES)),
            max_size_bytes=math.inf if hi is None else float(hi),
            alpha_s=float(_num(r, "alpha_s", w, 0, LATENCY_MAX_S)),
            bandwidth_bytes_per_s=float(_num(r, "bandwidth_bytes_per_s", w, RATE_MIN_BYTES_PER_S,
                                             RATE_MAX_BYTES_PER_S))))
    if not regimes:
        raise InputError(f"{where}: field 'regimes' is empty (a profile needs at least one)")
    fit = AlphaBetaFit(op=op, algorithm=algorithm, gpus=gpus, regimes=tuple(regimes))
    quality = _get(obj, "quality", where, dict)
    provenance = obj.get("provenance", {})
    if not isinstance(provenance, dict):
        raise InputError(f"{where}: field 'provenance' has the wrong type: {provenance!r}")
    return Profile(
        fit=fit,
        r2=float(_num(quality, "r2", f"{where}: quality", -1e300, 1)),
        median_abs_rel_error=float(_num(quality, "median_abs_rel_error", f"{where}: quality", 0, 1e300)),
        max_abs_rel_error=float(_num(quality, "max_abs_rel_error", f"{where}: quality", 0, 1e300)),
        points=_num(quality, "points", f"{where}: quality", 0, 10**9, int),
        provenance=provenance)


def load_profile(path: str | Path) -> Profile:
    """Read and validate a profile file; ``.link`` is the calibrated :class:`Link`."""
    profile = load_any_profile(path)
    if not isinstance(profile, Profile):
        raise InputError(f"{path}: a tier profile (commcost fit --tiers), not an alpha-beta profile")
    return profile


def load_any_profile(path: str | Path):
    """An alpha-beta :class:`Profile`, or the :class:`commcost.calibrate.tiers.TierFit` of a tier
    profile (``kind`` ``commcost-tier-profile``, written by ``commcost fit --tiers``)."""
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except IsADirectoryError:
        raise InputError(f"{p}: is a directory, expected a profile file") from None
    except OSError as exc:  # a read error (EIO from /proc/self/mem) carries no file name: name it
        raise OSError(exc.errno, exc.strerror, str(p)) from None
    except UnicodeDecodeError as exc:
        raise InputError(f"{p}: not a commcost profile: not UTF-8 text (byte {exc.start})") from None
    if not text.strip():
        raise InputError(f"{p}: empty file (expected a commcost profile, JSON)")
    try:
        obj = json.loads(text)
    except json.JSONDecodeError as exc:
        raise InputError(f"{p}: not a commcost profile: invalid JSON at line {exc.lineno}: {exc.msg}") from None
    except RecursionError:
        raise InputError(f"{p}: not a commcost profile: JSON nested too deeply to read") from None
    except ValueError:  # an integer past Python's 4,300-digit limit

        raise InputError(f"{p}: {long_integer_field(text)} is an integer of more than 4300 digits "
                         "(Python's limit for reading one; no profile value is that long)") from None
    if isinstance(obj, dict) and obj.get("kind") == "commcost-tier-profile":

        return tier_fit_from_dict(obj, where=str(p))
    profile = profile_from_dict(obj, where=str(p))
    return Profile(fit=profile.fit, r2=profile.r2, median_abs_rel_error=profile.median_abs_rel_error,
                   max_abs_rel_error=profile.max_abs_rel_error, points=profile.points,
                   provenance=profile.provenance, path=str(p))


def profile_model(profile: Profile, *, extrapolate: bool = False):
    """The :class:`commcost.comm.model.ProfileModel` of ``profile``: every fitted regime, with the
    scope (op, ranks, nodes, GPUs per node, backend) its provenance records."""

    prov = profile.provenance
    nodes = prov.get("nodes")
    nodes = nodes if isinstance(nodes, int) and not isinstance(nodes, bool) and nodes >= 1 else None
    gpn = prov.get("gpus_per_node")
    gpn = gpn if isinstance(gpn, int) and not isinstance(gpn, bool) and gpn >= 1 else None
    if gpn is None and nodes:
        gpn = -(-profile.fit.gpus // nodes)
    backend = prov.get("backend")
    if not isinstance(backend, str):
        backend = "nccl" if prov.get("source_kind") == "nccl-tests" else None
    scope = ProfileScope(op=profile.fit.op, gpus=profile.fit.gpus, nodes=nodes, gpus_per_node=gpn, backend=backend)
    return ProfileModel(fit=profile.fit, scope=scope, extrapolate=extrapolate, source=profile.path or "")
