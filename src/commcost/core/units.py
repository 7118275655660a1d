"""SI constants, and parsing/formatting of sizes, rates and times at the edges.

Decimal and binary are kept apart (STYLE.md, convention 2): ``GB`` is 1e9 bytes
and ``GB/s`` is 1e9 bytes per second, as nccl-tests reports bandwidth; ``MiB`` and
``GiB`` are 2**20 and 2**30 bytes, as PyTorch's ``bucket_cap_mb`` is in MiB.
Parameter counts never use 1024. Everything inside the library is SI: bytes,
seconds, bytes per second, FLOP per second.
"""

from __future__ import annotations

import math
import re

from commcost.core.errors import InputError

__all__ = [
    "KB", "MB", "GB", "TB", "KiB", "MiB", "GiB", "TiB",
    "US", "MS", "BILLION", "TERA",
    "parse_size_bytes", "parse_rate_bytes_per_s", "parse_time_s",
    "RATE_MIN_BYTES_PER_S", "RATE_MAX_BYTES_PER_S", "LATENCY_MAX_S", "LATENCY_MIN_S",
    "format_bytes", "format_mb_mib", "format_seconds", "format_rate", "format_fraction",
]

KB = 1e3
MB = 1e6
GB = 1e9
TB = 1e12
KiB = float(2**10)
MiB = float(2**20)
GiB = float(2**30)
TiB = float(2**40)

US = 1e-6
MS = 1e-3

BILLION = 1e9
TERA = 1e12

_SIZE_UNITS_BYTES = {
    "": 1.0, "b": 1.0,
    "k": KB, "kb": KB, "m": MB, "mb": MB, "g": GB, "gb": GB, "t": TB, "tb": TB,
    "kib": KiB, "mib": MiB, "gib": GiB, "tib": TiB,
}
_SIZE_RE = re.compile(r"^\s*([0-9]*\.?[0-9]+(?:[eE][+-]?[0-9]+)?)\s*([A-Za-z]*)\s*$")


def parse_size_bytes(text: str) -> float:
    """Parse ``"8B"``, ``"1GiB"``, ``"25MB"``, ``"4096"`` into bytes.

    ``KB/MB/GB`` are decimal, ``KiB/MiB/GiB`` binary; a bare number is bytes.
    """
    match = _SIZE_RE.match(text)
    if match is None:
        raise InputError(f"cannot parse size {text!r} (expected e.g. 8B, 64KiB, 25MB, 1GiB)")
    number, unit = match.groups()
    factor = _SIZE_UNITS_BYTES.get(unit.lower())
    if factor is None:
        raise InputError(f"unknown size unit {unit!r} in {text!r} (use B, KB, MB, GB, KiB, MiB, GiB)")
    return float(number) * factor


RATE_MIN_BYTES_PER_S = 1e3
"""Slowest rate commcost prices, 1 kB/s (below it no training step is meaningful; the bound keeps
``S/B`` finite for every size the flags accept)."""
RATE_MAX_BYTES_PER_S = 1e15
"""Fastest rate commcost prices, 1 PB/s (over a thousand times an NVLink 5 GPU's 1.8 TB/s)."""
LATENCY_MAX_S = 10.0
"""Largest per-step latency commcost prices, 10 s (a thousand times a slow TCP hop)."""
LATENCY_MIN_S = 1e-12
"""Smallest non-zero per-step latency commcost prices, 1 ps (light crosses 0.3 mm in it; every real
hop is over 10**5 times longer). Below it a latency in microseconds underflows towards 0 s in SI and
the term ratios overflow."""

_PREFIX = {"": 1.0, "k": 1e3, "K": 1e3, "M": 1e6, "G": 1e9, "T": 1e12, "P": 1e15}
_BINARY_PREFIX = {"K": KiB, "k": KiB, "M": MiB, "G": GiB, "T": TiB}
_NUMBER = r"([0-9]*\.?[0-9]+(?:[eE][+-]?[0-9]+)?)"
_RATE_PATTERN = r"^\s*" + _NUMBER + r"\s*(?:([kKMGTP]?)(i?)(B|b|bit|Byte|byte)(/s|ps))?\s*$"
_TIME_PATTERN = r"^\s*" + _NUMBER + r"\s*([A-Za-z\u00b5]*)\s*$"
_TIME_UNITS_S = {"s": 1.0, "ms": MS, "us": US, "\u00b5s": US, "ns": 1e-9}


def _bare(text: str) -> float | None:
    """The finite number ``text`` is, if it is a bare number (no regular expression: the drill's flags
    are bare numbers, and start-up time counts); otherwise None."""
    try:
        value = float(text)
    except ValueError:
        return None
    return value if math.isfinite(value) else None


def _in_unit(number: float, factor: float, unit: float) -> float:
    """``number * factor / unit`` with one rounding when the ratio of the two decimal units is a
    whole number (``0.02 ms`` is exactly ``20 us``, as typed, not ``20.000000000000004``)."""
    ratio = factor / unit if factor >= unit else unit / factor
    if abs(ratio - round(ratio)) <= 1e-9 * ratio:  # 1e-3 / 1e-6 is 1000.0000000000001 in floats
        ratio = float(round(ratio))
    return number * ratio if factor >= unit else number / ratio


def parse_rate_bytes_per_s(text: str, *, bare_unit_bytes_per_s: float = GB, unit_bytes_per_s: float = 1.0) -> float:
    """Parse a rate: ``"50"`` (a bare number is in ``bare_unit_bytes_per_s``, GB/s by default, the
    drill's unit), ``"50GB/s"``, ``"50GBps"``, ``"400Gbps"``/``"400Gb/s"`` (bits: divided by 8),
    ``"46.6GiB/s"``, ``"400Gbit/s"``, ``"50GByte/s"``; returned in ``unit_bytes_per_s`` (default bytes/s).

    Byte prefixes are decimal (GB/s is 1e9 bytes/s, as nccl-tests reports); ``Gi`` is 2**30.
    ``B`` is bytes and ``b`` bits, so case matters there (as on a NIC's data sheet)."""
    bare = _bare(text)
    if bare is not None:
        return _in_unit(bare, bare_unit_bytes_per_s, unit_bytes_per_s)
    match = re.match(_RATE_PATTERN, text)  # re caches the compiled pattern; none at import
    if match is None:
        raise InputError(f"cannot parse rate {text!r} (expected e.g. 50 (GB/s), 50GB/s, 400Gbps, 12.5GiB/s)")
    number, prefix, binary, unit, _ = match.groups()
    value = float(number)
    if unit is not None:
        unit = "b" if unit == "bit" else "B" if unit.lower() == "byte" else unit
    if unit is None:
        return _in_unit(value, bare_unit_bytes_per_s, unit_bytes_per_s)
    if binary:
        if unit == "b" or prefix not in _BINARY_PREFIX:
            raise InputError(f"cannot parse rate {text!r}: binary prefixes go with bytes (KiB/s, MiB/s, GiB/s)")
        return _in_unit(value, _BINARY_PREFIX[prefix], unit_bytes_per_s)
    rate = _in_unit(value, _PREFIX[prefix], unit_bytes_per_s)
    return rate if unit == "B" else rate / 8.0


def parse_time_s(text: str, *, bare_unit_s: float = US, unit_s: float = 1.0) -> float:
    """Parse a time: ``"20"`` (a bare number is in ``bare_unit_s``, microseconds by default, the
    drill's latency unit), ``"20us"``, ``"0.02ms"``, ``"2e-5s"``, ``"500ns"``; returned in
    ``unit_s`` (default seconds)."""
    bare = _bare(text)
    if bare is not None:
        return _in_unit(bare, bare_unit_s, unit_s)
    match = re.match(_TIME_PATTERN, text)
    if match is None:
        raise InputError(f"cannot parse time {text!r} (expected e.g. 20 (us), 20us, 0.02ms, 500ns)")
    number, unit = match.groups()
    factor = bare_unit_s if not unit else _TIME_UNITS_S.get(unit.lower())
    if factor is None:
        raise InputError(f"unknown time unit {unit!r} in {text!r} (use s, ms, us, ns)")
    return _in_unit(float(number), factor, unit_s)


def format_bytes(n_bytes: float, *, binary: bool = False) -> str:
    """``2.6e9`` -> ``"2.60 GB"``; with ``binary=True`` -> ``"2.42 GiB"``; beyond a million TB (or
    TiB), or not finite, in scientific notation (``"1e+180 B"``), never a wall of digits."""
    if not math.isfinite(n_bytes) or abs(n_bytes) >= 1e18:
        return f"{n_bytes:.3g} B"
    if binary:
        steps = [(TiB, "TiB"), (GiB, "GiB"), (MiB, "MiB"), (KiB, "KiB")]
    else:
        steps = [(TB, "TB"), (GB, "GB"), (MB, "MB"), (KB, "kB")]
    for factor, name in steps:
        if abs(n_bytes) >= factor:
            return f"{n_bytes / factor:.2f} {name}"
    return f"{n_bytes:.0f} B"


def format_mb_mib(n_bytes: float) -> str:
    """Both decimal and binary: ``16e6`` -> ``"16.00 MB = 15.26 MiB"``."""
    return f"{n_bytes / MB:,.2f} MB = {n_bytes / MiB:,.2f} MiB"


def format_seconds(t_s: float) -> str:
    """A time with a unit that keeps 3-4 significant digits: s, ms or us."""
    if t_s == 0:
        return "0 ms"
    if not math.isfinite(t_s) or abs(t_s) >= 1e6 or abs(t_s) < 1e-9:
        return f"{t_s:.3g} s"  # beyond 11 days or under a nanosecond: no fixed-point wall of digits
    if abs(t_s) >= 10.0:
        return f"{t_s:.1f} s"
    if abs(t_s) >= 1.0:
        return f"{t_s:.3f} s"
    if abs(t_s) >= 1e-3:
        return f"{t_s / MS:.2f} ms"
    return f"{t_s / US:.2f} us"


def format_rate(bytes_per_s: float) -> str:
    """Bandwidth in decimal GB/s (as nccl-tests prints it)."""
    return f"{bytes_per_s / GB:.2f} GB/s"


def format_fraction(x: float) -> str:
    """``0.507`` -> ``"50.7%"``; beyond 1e6 % in scientific notation."""
    if not math.isfinite(x) or abs(x) >= 1e4:
        return f"{100.0 * x:.3g}%"
    return f"{100.0 * x:.1f}%"
