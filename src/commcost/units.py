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

from commcost.errors import InputError

__all__ = [
    "KB", "MB", "GB", "TB", "KiB", "MiB", "GiB", "TiB",
    "US", "MS", "BILLION", "TERA",
    "parse_size_bytes", "parse_rate_bytes_per_s", "parse_time_s",
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


_RATE_UNITS_BYTES_PER_S = {
    "gb/s": GB, "gbyte/s": GB, "gbps": GB / 8, "gbit/s": GB / 8, "gb": GB,
    "mb/s": MB, "mbps": MB / 8, "mbit/s": MB / 8, "tb/s": TB, "tbps": TB / 8, "tbit/s": TB / 8,
    "gib/s": GiB, "mib/s": MiB,
}


def _number_and_unit(text: str, unit_chars: str) -> tuple[str, str] | None:
    """``"400Gbps"`` -> ``("400", "Gbps")``; a bare number -> ``(text, "")``; None if malformed.
    A bare number takes no regular expression (the drill's flags are bare: start-up time)."""
    try:
        float(text)
        return text.strip(), ""
    except ValueError:
        pass
    match = re.match(r"^\s*([0-9]*\.?[0-9]+(?:[eE][+-]?[0-9]+)?)\s*([" + unit_chars + r"]*)\s*$", text)
    return None if match is None else (match.group(1), match.group(2))


def parse_rate_bytes_per_s(text: str, *, bare_unit_bytes_per_s: float = GB) -> float:
    """``"50"`` (bare: GB/s), ``"50GB/s"``, ``"400Gbps"`` / ``"400Gbit/s"`` (bits: /8) -> bytes/s.

    ``GB/s`` is 1e9 bytes/s, as nccl-tests reports; ``Gbps`` is 1e9 *bits*/s, as NIC line rates
    are quoted, so ``400Gbps`` = ``50GB/s``. The case of the B/b is what tells bytes from bits
    (``GB/s`` bytes, ``Gb/s`` bits).
    """
    parts = _number_and_unit(text, "A-Za-z/")
    if parts is None:
        raise InputError(f"cannot parse rate {text!r} (expected e.g. 50, 50GB/s, 400Gbps)")
    number, unit = parts
    if not unit:
        return float(number) * bare_unit_bytes_per_s
    key = unit.lower()
    if unit.endswith("b/s") and not unit.endswith("B/s"):  # Gb/s: bits
        key = key[:-3] + "bit/s"
    factor = _RATE_UNITS_BYTES_PER_S.get(key)
    if factor is None:
        raise InputError(f"unknown rate unit {unit!r} in {text!r} (use GB/s, MB/s, TB/s, Gbps, Gbit/s)")
    return float(number) * factor


_TIME_UNITS_S = {"s": 1.0, "ms": MS, "us": US, "µs": US, "ns": 1e-9}


def parse_time_s(text: str, *, bare_unit_s: float) -> float:
    """``"20"`` (bare: ``bare_unit_s``), ``"20us"``, ``"0.02ms"``, ``"2e-5s"`` -> seconds."""
    parts = _number_and_unit(text, "A-Za-zµ")
    if parts is None:
        raise InputError(f"cannot parse time {text!r} (expected e.g. 20, 20us, 0.02ms)")
    number, unit = parts
    factor = bare_unit_s if not unit else _TIME_UNITS_S.get(unit.lower())
    if factor is None:
        raise InputError(f"unknown time unit {unit!r} in {text!r} (use s, ms, us, ns)")
    return float(number) * factor


def format_bytes(n_bytes: float, *, binary: bool = False) -> str:
    """``2.6e9`` -> ``"2.60 GB"``; with ``binary=True`` -> ``"2.42 GiB"``."""
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
