"""argparse's value types shared by every subcommand: each flag's text parsed straight into SI (rates, latencies,
sizes, lists, counts) and the checks a flag's value needs before any work; with the plumbing of
:mod:`commcost.cli._parser` (:class:`Parser`, :func:`fail`, :func:`warn`, the bounds) under the same names, so a
subcommand reads every flag helper as ``A.name``.

Every type converter raises ``argparse.ArgumentTypeError`` with the value it got; :class:`Parser` turns any parse
error into one line on stderr and exit 2.
"""

from __future__ import annotations

import argparse
import math
from collections.abc import Callable

from commcost.core.errors import InputError
from commcost.core.units import parse_size_bytes
from commcost.cli._interrupt import Terminated, clear_interrupt_notes, interrupt_note, last_interrupt_signal, on_interrupt
from commcost.cli._parser import (FLAG_BOUNDS, MAX_INT, OUTPUT_FLAGS, PROG, Parser, check_bounds, check_output_path,
                                  fail, given_flags, hold_warnings, release_warnings, signal_exit_status, warn)

__all__ = [
    "Parser", "fail", "warn", "positive_int", "nonneg_int", "positive_float", "nonneg_float",
    "fraction", "open_fraction", "size_list", "mib_list", "int_list", "size", "mib_or_auto",
    "name_list", "preset_name",
    "size_range", "size_bounds", "collective_list", "collective",
    "bucket_mib_list", "check_output_path", "check_bucket_count",
    "rate_gb_per_s", "latency_us", "nonneg_latency_us", "params_billions", "algorithm_name", "FLAG_BOUNDS",
    "check_bounds",
    "on_interrupt", "interrupt_note", "clear_interrupt_notes", "Terminated", "MAX_INT", "OUTPUT_FLAGS", "SIZE_MAX_BYTES",
    "last_interrupt_signal", "signal_exit_status", "hold_warnings", "release_warnings", "PROG", "given_flags",
    "token_count",
]


def _number(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
    if not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"must be finite, got {text!r}")
    return value


def positive_float(text: str) -> float:
    """A finite number > 0."""
    value = _number(text)
    if value <= 0:
        raise argparse.ArgumentTypeError(f"must be > 0, got {text!r}")
    return value


def nonneg_float(text: str) -> float:
    """A finite number >= 0."""
    value = _number(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be >= 0, got {text!r}")
    return value


PARAMS_BILLIONS_MAX = 1e6
"""``--params`` is in billions: a value this large (a million billion) is surely a raw count."""


def params_billions(text: str) -> float:
    """A parameter count in billions (> 0); a raw count such as ``7e9`` is refused with the likely intent."""
    value = positive_float(text)
    if value >= PARAMS_BILLIONS_MAX:
        raise argparse.ArgumentTypeError(f"is in billions: {text} would be {value:g} billion parameters; "
                                         f"did you mean {value / 1e9:g} (billions)?")
    return value


def algorithm_name(text: str) -> str:
    """``auto`` or an algorithm name (``ring``, ``tree``, ``in_network`` ...); unknown names list the valid ones."""
    if text == "auto":  # the default: no import on the drill's start-up path
        return text
    from commcost.comm.algorithms import parse_algorithm

    try:
        return str(parse_algorithm(text))
    except InputError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def fraction(text: str) -> float:
    """A number in [0, 1]."""
    value = _number(text)
    if not 0 <= value <= 1:
        raise argparse.ArgumentTypeError(f"must be in [0, 1], got {text!r}")
    return value


def open_fraction(text: str) -> float:
    """A number in (0, 1]."""
    value = _number(text)
    if not 0 < value <= 1:
        raise argparse.ArgumentTypeError(f"must be in (0, 1], got {text!r}")
    return value


def efficiency(text: str) -> float:
    """A compute efficiency: a fraction of peak in [1e-3, 1] (:func:`commcost.core.validation.require_efficiency`)."""
    value = _number(text)
    if not 1e-3 <= value <= 1:
        raise argparse.ArgumentTypeError(f"must be a fraction of peak between 0.001 and 1, got {text!r}")
    return value


def _int(text: str, minimum: int) -> int:
    if len(text.strip()) > 40:  # int() of a 5,000-digit string is refused by Python anyway
        raise argparse.ArgumentTypeError(f"expected an integer <= {MAX_INT:.0e}, got {len(text.strip())} characters")
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an integer, got {text!r}") from None
    if value < minimum:
        raise argparse.ArgumentTypeError(f"must be an integer >= {minimum}, got {text!r}")
    if value > MAX_INT:
        raise argparse.ArgumentTypeError(f"must be an integer <= {MAX_INT:.0e}, got {text!r}")
    return value


def positive_int(text: str) -> int:
    """An integer >= 1."""
    return _int(text, 1)


def nonneg_int(text: str) -> int:
    """An integer >= 0."""
    return _int(text, 0)


def _bare_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def rate_gb_per_s(text: str) -> float:
    """A rate in GB/s (1e9 bytes/s): ``"50"`` (bare: GB/s, the drill's unit), ``"50GB/s"``,
    ``"400Gbps"`` (bits), ``"46.6GiB/s"``; between 1 kB/s and 1 PB/s
    (:data:`commcost.core.units.RATE_MIN_BYTES_PER_S`, :data:`~commcost.core.units.RATE_MAX_BYTES_PER_S`)."""
    from commcost.core.units import GB, RATE_MAX_BYTES_PER_S, RATE_MIN_BYTES_PER_S, parse_rate_bytes_per_s

    if _bare_number(text):
        value = _number(text)  # as typed, so the drill's numbers are exactly what they were
    else:
        try:
            value = parse_rate_bytes_per_s(text, unit_bytes_per_s=GB)
        except InputError as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None
    if not RATE_MIN_BYTES_PER_S / GB <= value <= RATE_MAX_BYTES_PER_S / GB:
        raise argparse.ArgumentTypeError(f"must be between {RATE_MIN_BYTES_PER_S / GB:g} and "
                                         f"{RATE_MAX_BYTES_PER_S / GB:g} GB/s (1 kB/s to 1 PB/s), got {text!r}")
    return value


def _latency_value_us(text: str) -> float:
    """A latency in microseconds: ``"20"`` (bare: us, the drill's unit), ``"20us"``, ``"0.02ms"``,
    ``"500ns"``; 0, or between 1 ps and 10 s (:data:`commcost.core.units.LATENCY_MIN_S`,
    :data:`~commcost.core.units.LATENCY_MAX_S`)."""
    from commcost.core.units import LATENCY_MAX_S, LATENCY_MIN_S, US, parse_time_s

    if _bare_number(text):
        value = _number(text)  # as typed, so the drill's numbers are exactly what they were
    else:
        try:
            value = parse_time_s(text, bare_unit_s=US, unit_s=US)
        except InputError as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None
    if not 0 <= value <= LATENCY_MAX_S / US:
        raise argparse.ArgumentTypeError(f"must be between 0 and {LATENCY_MAX_S / US:g} us "
                                         f"({LATENCY_MAX_S:g} s), got {text!r}")
    if 0 < value < LATENCY_MIN_S / US:
        raise argparse.ArgumentTypeError(f"a non-zero latency must be at least {LATENCY_MIN_S / US:g} us "
                                         f"({LATENCY_MIN_S:g} s), got {text!r}")
    return value


def latency_us(text: str) -> float:
    """A latency > 0 in microseconds (bare number: us, the drill's unit; or ``20us``, ``0.02ms``), at most 10 s."""
    value = _latency_value_us(text)
    if value <= 0:
        raise argparse.ArgumentTypeError(f"must be a latency > 0, got {text!r}")
    return value


def nonneg_latency_us(text: str) -> float:
    """A latency >= 0 in microseconds (bare number: us; or with a unit), at most 10 s."""
    return _latency_value_us(text)


def _list(text: str, item: Callable[[str], float], what: str) -> tuple:
    tokens = text.split(",")
    if not text.strip() or any(not t.strip() for t in tokens):
        raise argparse.ArgumentTypeError(
            f"expected a comma-separated list of {what} with no empty items, got {text!r}")
    out = []
    for token in tokens:
        try:
            out.append(item(token.strip()))
        except argparse.ArgumentTypeError as exc:
            raise argparse.ArgumentTypeError(f"item {token.strip()!r} of {text!r}: {exc}") from None
    return tuple(out)


def mib_list(text: str) -> tuple[float, ...]:
    """``"1,8,25"`` (MiB, as PyTorch's ``bucket_cap_mb``) -> bytes."""
    return tuple(v * 2**20 for v in _list(text, positive_float, "positive sizes in MiB"))


def int_list(text: str) -> tuple[int, ...]:
    """``"1,8,64"`` -> positive integers."""
    return _list(text, positive_int, "positive integers")


def size(text: str) -> float:
    """``"1GiB"``, ``"25MB"``, ``"4096"`` -> bytes (> 0)."""
    try:
        value = parse_size_bytes(text)
    except InputError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    if value <= 0:
        raise argparse.ArgumentTypeError(f"must be > 0, got {text!r}")
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1 byte, got {text!r}")
    if value > SIZE_MAX_BYTES:
        raise argparse.ArgumentTypeError(f"must be at most 1 EiB (2**60 bytes), got {text!r}")
    return value


SIZE_MAX_BYTES = 2.0**60
"""Largest message size a flag accepts, 1 EiB (a million times a 1-trillion-parameter gradient)."""


def size_list(text: str) -> tuple[float, ...]:
    """``"1MiB,8MiB"`` -> bytes."""
    return _list(text, size, "sizes")


def size_range(text: str) -> tuple[float, ...]:
    """``"8B:8GiB"`` (doubling, as nccl-tests ``-b -e -f 2``), ``"1MiB:1GiB:4"`` (factor 4)
    or ``"1MiB,8MiB"`` (a list) -> sizes in bytes; a bad token is named."""
    if ":" not in text:
        return size_list(text)
    parts = text.split(":")
    if len(parts) not in (2, 3) or any(not p.strip() for p in parts):
        raise argparse.ArgumentTypeError(f"expected MIN:MAX or MIN:MAX:FACTOR, got {text!r}")
    bounds = []
    for token in parts[:2]:
        try:
            bounds.append(size(token.strip()))
        except argparse.ArgumentTypeError as exc:
            raise argparse.ArgumentTypeError(f"item {token.strip()!r} of {text!r}: {exc}") from None
    lo, hi = bounds
    factor = 2.0
    if len(parts) == 3:
        try:
            factor = positive_float(parts[2].strip())
        except argparse.ArgumentTypeError as exc:
            raise argparse.ArgumentTypeError(f"factor {parts[2].strip()!r} of {text!r}: {exc}") from None
        if factor <= 1:
            raise argparse.ArgumentTypeError(f"factor must be > 1, got {parts[2].strip()!r} in {text!r}")
    if hi < lo:
        raise argparse.ArgumentTypeError(f"MAX must be >= MIN in {text!r}")
    out = [lo]
    while out[-1] * factor <= hi * (1 + 1e-12) and len(out) < 200:
        out.append(out[-1] * factor)
    return tuple(out)


def name_list(text: str) -> tuple[str, ...]:
    """``"7b,1.3b"`` -> ``("7b", "1.3b")``: non-empty names, checked against presets later."""
    return _list(text, str, "names")


def mib_or_auto(text: str) -> float | str:
    """``"25"`` (MiB, as ``bucket_cap_mb``) -> 25.0; ``"auto"`` -> ``"auto"``."""
    if text.strip().lower() == "auto":
        return "auto"
    try:
        return positive_float(text)
    except argparse.ArgumentTypeError as exc:
        raise argparse.ArgumentTypeError(f"expected a size in MiB or 'auto': {exc}") from None



def size_bounds(text: str) -> tuple[float, float]:
    """``"1KiB:64MiB"`` -> (1024, 67108864) bytes; a single size ``"4MiB"`` is a range of one."""
    lo_text, sep, hi_text = text.partition(":")
    lo = size(lo_text.strip())
    hi = size(hi_text.strip()) if sep else lo
    if hi < lo:
        raise argparse.ArgumentTypeError(f"range must go from small to large, got {text!r}")
    return lo, hi


def collective_list(text: str) -> tuple:
    """``"all_reduce,all_gather"`` or ``"all"`` -> Collective members (names as in torch.distributed)."""
    from commcost.comm.collectives import Collective

    if text.strip() == "all":
        return tuple(Collective)
    valid = ", ".join(c.value for c in Collective)

    def one(token: str) -> Collective:
        try:
            return Collective(token)
        except ValueError:
            raise argparse.ArgumentTypeError(f"unknown collective {token!r} (valid: {valid}, or all)") from None
    return _list(text, one, "collectives")  # type: ignore[arg-type]


def collective(text: str):
    """One collective name, e.g. ``"all_reduce"``."""
    ops = collective_list(text)
    if len(ops) != 1:
        raise argparse.ArgumentTypeError(f"expected one collective, got {text!r}")
    return ops[0]


def bucket_mib_list(text: str) -> tuple[float, ...]:
    """``"1,8,25"`` bucket caps (MiB, as ``bucket_cap_mb``) -> bytes; each at least one byte,
    as DDP's ``int(bucket_cap_mb * 2**20)`` is otherwise 0."""
    caps = mib_list(text)
    for token, cap in zip(text.split(","), caps):
        if cap < 1:
            raise argparse.ArgumentTypeError(
                f"item {token.strip()!r} of {text!r}: a bucket cap must be at least 1 byte "
                f"(1/1048576 MiB), got {cap:g} bytes")
    return caps


def check_bucket_count(flag: str, message_bytes: float, cap_bytes: float) -> None:
    """Refuse a gradient/cap pair that would make the DDP timeline simulate more buckets than
    :data:`commcost.step.timeline.MAX_SIMULATED_BUCKETS` (it would take minutes and gigabytes)."""
    from commcost.step.timeline import MAX_SIMULATED_BUCKETS

    count = message_bytes / cap_bytes
    if count > MAX_SIMULATED_BUCKETS:
        fail(f"{flag}: a {message_bytes:.4g}-byte gradient in {cap_bytes / 2**20:g} MiB buckets is "
             f"{count:.3g} buckets; the timeline simulates at most {MAX_SIMULATED_BUCKETS:,} "
             f"(gradient <= {MAX_SIMULATED_BUCKETS * cap_bytes:.4g} bytes at this cap)")


def token_count(text: str) -> float:
    """A token count > 0: ``2e12``, ``2T``, ``300B`` (:func:`commcost.analyses.plan.training_cost.parse_token_count`)."""
    from commcost.core.errors import InputError
    from commcost.analyses.plan.training_cost import parse_token_count

    try:
        return parse_token_count(text)
    except InputError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def preset_name(text: str) -> str:
    """A preset's name (``--gpu h100-sxm``): not empty, looked up exactly where it is used."""
    if not text.strip():
        raise argparse.ArgumentTypeError("is empty: give a preset name (commcost presets lists them)")
    return text
