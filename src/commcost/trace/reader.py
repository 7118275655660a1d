"""A streaming reader of PyTorch profiler (Kineto) JSON traces, ``.json`` or ``.json.gz``.

A Kineto trace is one JSON object whose ``traceEvents`` array holds every event
(a 1 GB trace holds millions). :func:`iter_trace` never loads the whole file: it
reads the text in chunks (:data:`CHUNK_CHARS`) and decodes the top-level object
key by key and the ``traceEvents`` array event by event with the standard
library's C scanner (``json.JSONDecoder.scan_once``, what ``raw_decode`` calls),
so memory holds one chunk plus what the caller keeps. The other top-level keys
(``distributedInfo``, ``baseTimeNanoseconds``, ``deviceProperties`` ...) are small
and collected into :attr:`TraceHeader.metadata`, in whatever order they come.

Truncated or malformed files raise :class:`~commcost.core.errors.InputError` naming the
file, the character offset and what was expected. Reading is bounded: a file expanding past
:data:`MAX_TRACE_CHARS` characters of JSON, holding more than :data:`MAX_TRACE_EVENTS` events, or
gzipped more than :data:`MAX_GZIP_RATIO` to 1 (a gzip bomb; no profiler trace compresses that well)
is refused as soon as the reader gets there. Files over :data:`PROGRESS_MIN_BYTES` of JSON (gzip:
:data:`GZIP_RATIO` times the size on disk), and any file once that much JSON has been read, show a
progress line on stderr: the fraction of the file's bytes read (compressed bytes for ``.gz``) and
the JSON read so far. Time is linear in the file: whitespace is consumed as it is skipped, and a
long value is refilled in doubling reads.
"""

from __future__ import annotations

import gzip
import json
import os
import re
import sys
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from commcost.core.errors import InputError
import io
import stat
from commcost.core.errors import long_integer_field

__all__ = ["CHUNK_CHARS", "PROGRESS_MIN_BYTES", "GZIP_RATIO", "MAX_EVENT_CHARS", "MAX_TRACE_CHARS", "MAX_TRACE_EVENTS",
           "MAX_GZIP_RATIO", "TraceHeader", "iter_trace", "trace_files"]

CHUNK_CHARS = 1 << 20
"""Characters read per chunk (1 Mi)."""
PROGRESS_MIN_BYTES = 50_000_000
"""Files above this many bytes (50 MB, on disk) get a progress bar on stderr."""
GZIP_RATIO = 10
"""Uncompressed/compressed size of a typical gzipped Kineto trace (the six in tests/data/traces: 9.9 to 14.2)."""
MAX_EVENT_CHARS = 64 << 20
"""One event or top-level value longer than this (64 Mi characters) is taken as a malformed file."""
MAX_TRACE_CHARS = 4 << 30
"""Most characters of JSON read from one trace (4 Gi, after decompression): a 1 GB Kineto trace holds
a few million events; past this the file is refused rather than read for many minutes."""
MAX_TRACE_EVENTS = 20_000_000
"""Most events in one trace's ``traceEvents`` (20 million, ~5 times a 1 GB trace)."""
MAX_GZIP_RATIO = 200
"""Most JSON characters per compressed byte of a ``.gz`` trace, checked once :data:`RATIO_CHECK_CHARS`
have been read: real Kineto traces expand 10 to 15 times (:data:`GZIP_RATIO`), a gzip bomb thousands."""
RATIO_CHECK_CHARS = 64 << 20
"""JSON characters read before :data:`MAX_GZIP_RATIO` is checked (a small file may compress well)."""

_WS = re.compile(r"[ \t\n\r]*")
_NUMBER_TAIL = re.compile(r"[0-9.eE+-]*")
_WS_COMMA = re.compile(r"[ \t\n\r]*(,?)[ \t\n\r]*")


@dataclass(slots=True, kw_only=True)
class TraceHeader:
    """The top-level keys of a trace other than ``traceEvents`` (filled while reading)."""

    path: str
    """The file."""
    metadata: dict[str, Any] = field(default_factory=dict)
    """``distributedInfo``, ``baseTimeNanoseconds``, ``deviceProperties``, ... as decoded."""
    events: int = 0
    """Events decoded from ``traceEvents``."""


class _Progress:
    """A one-line progress bar on stderr: ``reading f.json.gz [#####     ]  52%  812 MB of JSON``.

    Shown for a file expected to hold more than :data:`PROGRESS_MIN_BYTES` of JSON, and for any
    file once that much has been read (a well-compressed file is not known to be large up front)."""

    def __init__(self, path: str, total_bytes: int, raw, gz: bool) -> None:
        self.path, self.total, self.raw, self.shown = path, total_bytes, raw, None
        # a gzipped trace holds ~GZIP_RATIO times its size in JSON
        self.enabled = total_bytes * (GZIP_RATIO if gz else 1) > PROGRESS_MIN_BYTES
        self.drawn, self.width = False, 0
        self.terminal = sys.stderr.isatty()  # a log file gets no bar: stderr is one line on failure

    def update(self, chars_read: int) -> None:
        if not self.terminal:
            return
        if not self.enabled:
            if chars_read <= PROGRESS_MIN_BYTES:
                return
            self.enabled = True
        try:
            done = self.raw.tell()
        except (OSError, ValueError):
            return
        pct = min(100, int(100 * done / self.total)) if self.total > 0 else 0
        mb = chars_read // 10**6
        if (pct, mb // 100) != self.shown:  # redraw per percent, and per 100 MB of JSON
            self.shown = (pct, mb // 100)
            bar = "#" * (pct // 4)
            line = f"reading {os.path.basename(self.path)} [{bar:<25}] {pct:3d}%  {mb:,} MB of JSON"
            sys.stderr.write(f"\r{line}")
            sys.stderr.flush()
            self.drawn, self.width = True, max(self.width, len(line))

    def close(self, ok: bool = True) -> None:
        """End the bar's line; after a failure erase it, so the error is the one line left."""
        if self.drawn:
            sys.stderr.write("\n" if ok else "\r" + " " * self.width + "\r")
            sys.stderr.flush()


class _Buffer:
    """A sliding window of text over the file, refilled on demand, with the reading bounds."""

    def __init__(self, read: Callable[[int], str], where: str, progress: _Progress,
                 compressed_pos: Callable[[], int] | None = None) -> None:
        self.read, self.where, self.progress = read, where, progress
        self.compressed_pos = compressed_pos
        self.text, self.pos, self.base, self.eof = "", 0, 0, False
        self.chars_read = 0
        self.batch_from = 0  # absolute offset before which batch() is not tried again (it failed there)

    def fill(self, min_chars: int = 0) -> bool:
        """Drop consumed text and append at least a chunk (``min_chars`` if larger); False at end of file."""
        if self.eof:
            return False
        try:
            chunk = self.read(max(CHUNK_CHARS, min_chars))
        except (EOFError, OSError, zlib.error) as exc:
            raise InputError(f"{self.where}: cannot read: {exc} (truncated or corrupt file)") from None
        except UnicodeDecodeError as exc:
            raise InputError(f"{self.where}: not UTF-8 text near character {self.base + len(self.text)}: "
                             f"{exc.reason}") from None
        self.chars_read += len(chunk)
        self._check_size()
        self.progress.update(self.chars_read)
        if not chunk:
            self.eof = True
            return False
        self.base += self.pos
        self.text = self.text[self.pos:] + chunk
        self.pos = 0
        return True

    def _check_size(self) -> None:
        """Refuse a file past :data:`MAX_TRACE_CHARS`, or a gzip stream past :data:`MAX_GZIP_RATIO`."""
        n = self.chars_read
        if n > MAX_TRACE_CHARS:
            raise InputError(f"{self.where}: more than {MAX_TRACE_CHARS / 2**30:g} GiB of JSON (the most a "
                             "trace may hold); profile fewer steps per trace")
        if self.compressed_pos is not None and n > RATIO_CHECK_CHARS:
            try:
                packed = max(1, self.compressed_pos())
            except (OSError, ValueError):
                return
            if n > MAX_GZIP_RATIO * packed:
                raise InputError(f"{self.where}: {n / 1e6:,.0f} MB of JSON from {packed / 1e6:.3g} MB compressed "
                                 f"({n / packed:,.0f} to 1, more than the {MAX_GZIP_RATIO} to 1 any profiler trace "
                                 "compresses): not a trace (a gzip bomb?)")

    def skip(self, pattern: re.Pattern) -> None:
        """Consume ``pattern`` (whitespace) at the cursor, refilling while it runs to the end; linear
        in the run's length (what was matched is consumed before each refill)."""
        while True:
            self.pos = pattern.match(self.text, self.pos).end()
            if self.pos < len(self.text) or not self.fill():
                return

    def skip_comma(self) -> bool:
        """Consume whitespace, at most one ',' and whitespace; True when a ',' was there."""
        self.skip(_WS)
        if self.peek() != ",":
            return False
        self.pos += 1
        self.skip(_WS)
        return True

    def peek(self) -> str:
        """The character at the cursor ('' at end of file)."""
        while self.pos >= len(self.text):
            if not self.fill():
                return ""
        return self.text[self.pos]

    def expect(self, char: str, what: str) -> None:
        self.skip(_WS)
        got = self.peek()
        if got != char:
            self.fail(what, got)
        self.pos += 1

    def fail(self, what: str, got: str) -> None:
        at = self.base + self.pos
        if got == "":
            raise InputError(f"{self.where}: truncated at character {at}: expected {what}, found end of file")
        raise InputError(f"{self.where}: malformed at character {at}: expected {what}, found {got!r}")

    def value(self, scan, what: str):
        """Decode one JSON value at the cursor, refilling until it is whole."""
        self.skip(_WS)
        while True:
            try:
                obj, end = scan(self.text, self.pos)
            except (StopIteration, json.JSONDecodeError):
                pass
            else:
                # strings, objects, arrays and literals end with themselves; a number is whole only
                # if something other than a digit, '.', 'e' or a sign follows it in the buffer
                if self.eof or not isinstance(obj, (int, float)) or isinstance(obj, bool) \
                        or _NUMBER_TAIL.match(self.text, end).end() < len(self.text):
                    self.pos = end
                    return obj
            if self.eof:
                self._diagnose(what)
            if len(self.text) - self.pos > MAX_EVENT_CHARS:
                self.fail(f"{what} to end within {MAX_EVENT_CHARS} characters", self.peek())
            self.fill(len(self.text) - self.pos)  # doubling reads: a long value is rescanned O(log n) times

    def batch(self) -> list | None:
        """Decode every whole event from the cursor to the last ``},`` in the buffer in one
        ``json.loads`` (C speed); None when that piece is not a run of whole events.

        The piece ``[`` + text up to a ``}`` followed by ``,`` + ``]`` parses only if the ``}``
        closes a top-level event: a cut inside an event leaves a bracket open, a cut inside a
        string leaves it unterminated, a cut past the array's end leaves extra data -- all
        decode errors. On failure the rest of the buffer is decoded event by event.
        """
        if self.base + self.pos < self.batch_from:
            return None
        if len(self.text) - self.pos < CHUNK_CHARS // 2 and not self.eof:
            self.fill()
        text = self.text
        cut = text.rfind("}", self.pos)
        while cut > self.pos:
            m = _WS_COMMA.match(text, cut + 1)
            if m.group(1):
                break
            cut = text.rfind("}", self.pos, cut)
        if cut <= self.pos:
            self.batch_from = self.base + len(text)
            return None
        try:
            events = json.loads("[" + text[self.pos:cut + 1] + "]")
        except ValueError:  # a decode error, or an integer past 4,300 digits (value() names it)
            self.batch_from = self.base + len(text)
            return None
        self.pos = cut + 1
        return events

    def _diagnose(self, what: str) -> None:
        """Raise the InputError for an undecodable value at the cursor (whole file read)."""
        try:
            json.JSONDecoder().raw_decode(self.text, self.pos)
        except json.JSONDecodeError as err:
            if err.msg.startswith("Unterminated") or err.pos >= len(self.text.rstrip()):
                raise InputError(f"{self.where}: truncated inside {what} starting at character "
                                 f"{self.base + self.pos}") from None
            raise InputError(f"{self.where}: malformed {what} at character {self.base + err.pos}: "
                             f"{err.msg}") from None
        raise InputError(f"{self.where}: malformed {what} at character {self.base + self.pos}")


def _regular_file_size(p: str) -> int:
    """The size of ``p``, which must be a regular file (a FIFO or a device never ends or has no size)."""

    try:
        st = os.stat(p)
    except OSError as exc:
        raise InputError(f"{p}: {exc.strerror or exc}") from None
    if stat.S_ISDIR(st.st_mode):
        raise InputError(f"{p}: is a directory, expected a trace file")
    if not stat.S_ISREG(st.st_mode):
        kind = "a FIFO (named pipe)" if stat.S_ISFIFO(st.st_mode) else (
            "a device" if stat.S_ISCHR(st.st_mode) or stat.S_ISBLK(st.st_mode) else "not a regular file")
        raise InputError(f"{p}: {kind}, expected a trace file (.json or .json.gz) on disk")
    return st.st_size


def _scanner(p: str):
    """``json``'s C scanner, with Python's 4,300-digit limit on integers turned into an InputError."""
    scan = json.JSONDecoder().scan_once

    def scan_checked(text: str, pos: int):
        try:
            return scan(text, pos)
        except ValueError as exc:
            if isinstance(exc, json.JSONDecodeError):
                raise

            raise InputError(f"{p}: {long_integer_field(text, max(0, pos - 256))} near character {pos} is an integer of more "
                             "than 4300 digits (Python's limit for reading one; no trace value is that long)") from None
    return scan_checked


def _open_text(path: str):
    """(raw binary file, text stream, gzipped?) -- gzip told by its magic bytes, not the name."""
    raw = open(path, "rb")
    head = raw.read(2)
    raw.seek(0)
    if head == b"\x1f\x8b":
        return raw, gzip.open(raw, "rt", encoding="utf-8"), True

    return raw, io.TextIOWrapper(raw, encoding="utf-8"), False


def iter_trace(path: str | os.PathLike, header: TraceHeader | None = None) -> Iterator[dict]:
    """Yield each event of ``path``'s ``traceEvents`` as a dict, in file order.

    ``header`` (if given) receives the other top-level keys as they are read (those
    after ``traceEvents`` only once the iterator is exhausted) and the event count.
    A file that is not a JSON object with a ``traceEvents`` list raises InputError.
    """
    p = os.fspath(path)
    if header is None:
        header = TraceHeader(path=p)
    size = _regular_file_size(p)
    if size == 0:
        raise InputError(f"{p}: empty file (expected a PyTorch profiler JSON trace)")
    raw, text, gz = _open_text(p)
    progress = _Progress(p, size, raw, gz)
    scan = _scanner(p)
    buf = _Buffer(text.read, p, progress, raw.tell if gz else None)
    seen_events, ok = False, False
    try:
        buf.expect("{", "a JSON object ('{') at the start of a trace")
        buf.skip(_WS)
        if buf.peek() == "}":
            buf.pos += 1
        else:
            while True:
                buf.skip(_WS)
                if buf.peek() != '"':
                    buf.fail("a key (string) in the trace object", buf.peek())
                key = buf.value(scan, "a key")
                buf.expect(":", f"':' after key {key!r}")
                buf.skip(_WS)
                if key == "traceEvents":
                    seen_events = True
                    if buf.peek() != "[":
                        buf.fail("a list after \"traceEvents\"", buf.peek())
                    buf.pos += 1
                    buf.skip(_WS)
                    if buf.peek() == "]":
                        buf.pos += 1
                    else:
                        while True:
                            events = buf.batch()
                            if events is None:
                                events = (buf.value(scan, f"event {header.events}"),)
                            if header.events + len(events) > MAX_TRACE_EVENTS:
                                raise InputError(f"{p}: more than {MAX_TRACE_EVENTS:,} events in traceEvents "
                                                 "(the most a trace may hold); profile fewer steps per trace")
                            for event in events:
                                if not isinstance(event, dict):
                                    raise InputError(f"{p}: event {header.events} of traceEvents is "
                                                     f"{type(event).__name__}, expected an object")
                                header.events += 1
                                yield event
                            if not buf.skip_comma():
                                buf.expect("]", f"',' or ']' after event {header.events - 1}")
                                break
                else:
                    header.metadata[key] = buf.value(scan, f"the value of {key!r}")
                if not buf.skip_comma():
                    buf.expect("}", "',' or '}' in the trace object")
                    break
        buf.skip(_WS)
        if buf.peek() != "":
            buf.fail("end of file after the trace object", buf.peek())
        ok = True
    finally:
        progress.close(ok)
        text.close()
        raw.close()
    if not seen_events:
        raise InputError(f"{p}: no \"traceEvents\" list (not a PyTorch profiler / Chrome trace)")


_TRACE_SUFFIXES = (".json", ".json.gz")


def trace_files(path: str | os.PathLike) -> list[str]:
    """The trace files at ``path``: the file itself, or a directory's ``*.json``/``*.json.gz`` (sorted)."""
    p = os.fspath(path)
    try:
        os.stat(p)
    except OSError as exc:  # ENOENT, ELOOP (a symlink loop), EACCES ...: say which
        raise InputError(f"{p}: {(exc.strerror or str(exc)).lower()}") from None
    if os.path.isdir(p):
        files = sorted(os.path.join(p, f) for f in os.listdir(p) if f.endswith(_TRACE_SUFFIXES))
        if not files:
            raise InputError(f"{p}: directory holds no .json or .json.gz trace files")
        return files
    if not os.path.exists(p):
        raise InputError(f"{p}: no such file or directory")
    return [p]
