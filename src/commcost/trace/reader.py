"""A streaming reader of PyTorch profiler (Kineto) JSON traces, ``.json`` or ``.json.gz``.

A Kineto trace is one JSON object whose ``traceEvents`` array holds every event
(a 1 GB trace holds millions). :func:`iter_trace` never loads the whole file: it
reads the text in chunks (:data:`CHUNK_CHARS`) and decodes the top-level object
key by key and the ``traceEvents`` array event by event with the standard
library's C scanner (``json.JSONDecoder.scan_once``, what ``raw_decode`` calls),
so memory holds one chunk plus what the caller keeps. The other top-level keys
(``distributedInfo``, ``baseTimeNanoseconds``, ``deviceProperties`` ...) are small
and collected into :attr:`TraceHeader.metadata`, in whatever order they come.

Truncated or malformed files raise :class:`~commcost.errors.InputError` naming the
file, the character offset and what was expected. Files over
:data:`PROGRESS_MIN_BYTES` of JSON (gzip: :data:`GZIP_RATIO` times the size on disk) show a
progress bar on stderr (fraction of the file's bytes read, compressed bytes for ``.gz``).
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

from commcost.errors import InputError

__all__ = ["CHUNK_CHARS", "PROGRESS_MIN_BYTES", "GZIP_RATIO", "MAX_EVENT_CHARS", "TraceHeader", "iter_trace", "trace_files"]

CHUNK_CHARS = 1 << 20
"""Characters read per chunk (1 Mi)."""
PROGRESS_MIN_BYTES = 50_000_000
"""Files above this many bytes (50 MB, on disk) get a progress bar on stderr."""
GZIP_RATIO = 10
"""Uncompressed/compressed size of a typical gzipped Kineto trace (the six in tests/data/traces: 9.9 to 14.2)."""
MAX_EVENT_CHARS = 64 << 20
"""One event or top-level value longer than this (64 Mi characters) is taken as a malformed file."""

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
    """A one-line progress bar on stderr: ``trace f.json.gz [#####     ] 52%``."""

    def __init__(self, path: str, total_bytes: int, raw, gz: bool) -> None:
        self.path, self.total, self.raw, self.shown = path, total_bytes, raw, -1
        # a gzipped trace holds ~GZIP_RATIO times its size in JSON
        self.enabled = total_bytes * (GZIP_RATIO if gz else 1) > PROGRESS_MIN_BYTES

    def update(self) -> None:
        if not self.enabled:
            return
        try:
            done = self.raw.tell()
        except (OSError, ValueError):
            return
        pct = min(100, int(100 * done / self.total))
        if pct != self.shown:
            self.shown = pct
            bar = "#" * (pct // 4)
            sys.stderr.write(f"\rreading {os.path.basename(self.path)} [{bar:<25}] {pct:3d}%")
            sys.stderr.flush()

    def close(self) -> None:
        if self.enabled and self.shown >= 0:
            sys.stderr.write("\n")
            sys.stderr.flush()


class _Buffer:
    """A sliding window of text over the file, refilled on demand."""

    def __init__(self, read: Callable[[int], str], where: str, progress: _Progress) -> None:
        self.read, self.where, self.progress = read, where, progress
        self.text, self.pos, self.base, self.eof = "", 0, 0, False
        self.batch_from = 0  # absolute offset before which batch() is not tried again (it failed there)

    def fill(self) -> bool:
        """Drop consumed text and append a chunk; False at end of file."""
        if self.eof:
            return False
        try:
            chunk = self.read(CHUNK_CHARS)
        except (EOFError, OSError, zlib.error) as exc:
            raise InputError(f"{self.where}: cannot read: {exc} (truncated or corrupt file)") from None
        except UnicodeDecodeError as exc:
            raise InputError(f"{self.where}: not UTF-8 text near character {self.base + len(self.text)}: "
                             f"{exc.reason}") from None
        self.progress.update()
        if not chunk:
            self.eof = True
            return False
        self.base += self.pos
        self.text = self.text[self.pos:] + chunk
        self.pos = 0
        return True

    def skip(self, pattern: re.Pattern) -> re.Match:
        """Match ``pattern`` (whitespace, commas) at the cursor, refilling if it runs to the end."""
        while True:
            m = pattern.match(self.text, self.pos)
            if m.end() < len(self.text) or not self.fill():
                self.pos = m.end()
                return m

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
            self.fill()

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
        except json.JSONDecodeError:
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


def _open_text(path: str):
    """(raw binary file, text stream, gzipped?) -- gzip told by its magic bytes, not the name."""
    raw = open(path, "rb")
    head = raw.read(2)
    raw.seek(0)
    if head == b"\x1f\x8b":
        return raw, gzip.open(raw, "rt", encoding="utf-8"), True
    import io

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
    try:
        size = os.path.getsize(p)
    except OSError as exc:
        raise InputError(f"{p}: {exc.strerror or exc}") from None
    if size == 0:
        raise InputError(f"{p}: empty file (expected a PyTorch profiler JSON trace)")
    raw, text, gz = _open_text(p)
    progress = _Progress(p, size, raw, gz)
    scan = json.JSONDecoder().scan_once
    buf = _Buffer(text.read, p, progress)
    seen_events = False
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
                            for event in events:
                                if not isinstance(event, dict):
                                    raise InputError(f"{p}: event {header.events} of traceEvents is "
                                                     f"{type(event).__name__}, expected an object")
                                header.events += 1
                                yield event
                            m = buf.skip(_WS_COMMA)
                            if not m.group(1):
                                buf.expect("]", f"',' or ']' after event {header.events - 1}")
                                break
                else:
                    header.metadata[key] = buf.value(scan, f"the value of {key!r}")
                m = buf.skip(_WS_COMMA)
                if not m.group(1):
                    buf.expect("}", "',' or '}' in the trace object")
                    break
        buf.skip(_WS)
        if buf.peek() != "":
            buf.fail("end of file after the trace object", buf.peek())
    finally:
        progress.close()
        text.close()
        raw.close()
    if not seen_events:
        raise InputError(f"{p}: no \"traceEvents\" list (not a PyTorch profiler / Chrome trace)")


_TRACE_SUFFIXES = (".json", ".json.gz")


def trace_files(path: str | os.PathLike) -> list[str]:
    """The trace files at ``path``: the file itself, or a directory's ``*.json``/``*.json.gz`` (sorted)."""
    p = os.fspath(path)
    if os.path.isdir(p):
        files = sorted(os.path.join(p, f) for f in os.listdir(p) if f.endswith(_TRACE_SUFFIXES))
        if not files:
            raise InputError(f"{p}: directory holds no .json or .json.gz trace files")
        return files
    if not os.path.exists(p):
        raise InputError(f"{p}: no such file or directory")
    return [p]
