"""The streaming reader: events across chunk boundaries, keys in any order, and one-line errors."""

from __future__ import annotations

import gzip
import json

import pytest
from hypothesis import given, settings, strategies as st

from commcost.core.errors import InputError
from commcost.trace import reader
from commcost.trace.reader import TraceHeader, iter_trace, trace_files


def _events(n):
    return [{"ph": "X", "cat": "kernel", "name": f"k{i}", "ts": 1000.5 + i, "dur": 0.25, "args": {"s": "x" * (i % 7)}}
            for i in range(n)]


@pytest.mark.parametrize("chunk", [1, 7, 64, 1 << 20])
def test_events_survive_any_chunk_size(tmp_path, monkeypatch, chunk):
    # a 1-character chunk splits every number, string and object: the decoded events must not change
    monkeypatch.setattr(reader, "CHUNK_CHARS", chunk)
    obj = {"schemaVersion": 1, "traceEvents": _events(30), "baseTimeNanoseconds": 12345678901234567}
    p = tmp_path / "t.json"
    p.write_text(json.dumps(obj, indent=1))
    h = TraceHeader(path=str(p))
    got = list(iter_trace(p, h))
    assert got == obj["traceEvents"]
    assert h.events == 30
    assert h.metadata == {"schemaVersion": 1, "baseTimeNanoseconds": 12345678901234567}


def test_gzip_and_keys_before_and_after_events(tmp_path):
    obj = {"distributedInfo": {"rank": 3}, "traceEvents": _events(3), "deviceProperties": [{"id": 0}]}
    p = tmp_path / "t.json.gz"
    with gzip.open(p, "wt") as fh:
        json.dump(obj, fh)
    h = TraceHeader(path=str(p))
    assert [e["name"] for e in iter_trace(p, h)] == ["k0", "k1", "k2"]
    assert h.metadata["distributedInfo"] == {"rank": 3} and h.metadata["deviceProperties"] == [{"id": 0}]


def test_empty_event_list(tmp_path):
    p = tmp_path / "t.json"
    p.write_text('{"traceEvents": [ ]}')
    assert list(iter_trace(p)) == []


@pytest.mark.parametrize("text, words", [
    ('{"traceEvents": [{"ph": "X", "ts": 1', "truncated"),
    ('{"traceEvents": [{"ph": "X"}, {"ph": "X"', "truncated"),
    ('{"traceEvents": [{"ph": "X"}', "truncated"),
    ('{"traceEvents": [{"ph": "X"} {"ph": "X"}]}', "malformed"),
    ('{"traceEvents": [{"ph": X}]}', "malformed"),
    ('[1, 2, 3]', "expected a JSON object"),
    ('{"schemaVersion": 1}', 'no "traceEvents"'),
    ('{"traceEvents": {"a": 1}}', "expected a list"),
    ('{"traceEvents": [1]}', "expected an object"),
    ('{"traceEvents": []} trailing', "end of file"),
])
def test_bad_files_raise_one_line_naming_the_file(tmp_path, text, words):
    p = tmp_path / "bad.json"
    p.write_text(text)
    with pytest.raises(InputError) as err:
        list(iter_trace(p))
    msg = str(err.value)
    assert str(p) in msg and words in msg and "\n" not in msg


def test_truncated_gzip_stream(tmp_path):
    p = tmp_path / "t.json.gz"
    data = gzip.compress(json.dumps({"traceEvents": _events(2000)}).encode())
    p.write_bytes(data[: len(data) // 2])
    with pytest.raises(InputError, match="truncated or corrupt|truncated"):
        list(iter_trace(p))


def test_empty_file_and_missing_path(tmp_path):
    (tmp_path / "e.json").write_text("")
    with pytest.raises(InputError, match="empty file"):
        list(iter_trace(tmp_path / "e.json"))
    with pytest.raises(InputError, match="no such file"):
        trace_files(tmp_path / "nope.json")
    with pytest.raises(InputError, match="no .json"):
        trace_files(tmp_path / "sub" if (tmp_path / "sub").mkdir() is None else None)


def test_progress_bar_only_for_large_files(tmp_path, monkeypatch, capsys):
    p = tmp_path / "t.json"
    p.write_text(json.dumps({"traceEvents": _events(50)}))
    list(iter_trace(p))
    assert capsys.readouterr().err == ""
    monkeypatch.setattr(reader, "PROGRESS_MIN_BYTES", 10)
    monkeypatch.setattr(reader, "CHUNK_CHARS", 100)
    list(iter_trace(p))
    assert capsys.readouterr().err == ""  # not on a terminal: no bar
    monkeypatch.setattr(reader.sys.stderr, "isatty", lambda: True)
    list(iter_trace(p))
    err = capsys.readouterr().err
    assert "100%" in err and err.endswith("\n")


_text = st.text(alphabet=st.sampled_from(list('ab{}[],:" \\\n\u00e9')), max_size=12)
_value = st.recursive(st.none() | st.booleans() | st.integers(-10**6, 10**6) | st.floats(allow_nan=False,
                      allow_infinity=False) | _text,
                      lambda inner: st.lists(inner, max_size=3) | st.dictionaries(_text, inner, max_size=3),
                      max_leaves=8)
_event = st.dictionaries(_text, _value, max_size=5)


@settings(max_examples=150, deadline=None)
@given(st.lists(_event, max_size=12), st.sampled_from([None, 0, 2]), st.sampled_from([1, 3, 16, 256, 1 << 20]),
       st.dictionaries(st.sampled_from(["a", "traceName", "z"]), _value, max_size=2))
def test_any_events_any_layout_any_chunk(tmp_path_factory, events, indent, chunk, extra):
    # strings full of '},' ']' and quotes, nested objects, any indentation, any chunk size: what
    # json.dumps wrote is what the streaming reader yields (the batch cut must never split an event)
    p = tmp_path_factory.mktemp("h") / "t.json"
    p.write_text(json.dumps({**extra, "traceEvents": events}, indent=indent), encoding="utf-8")
    old = reader.CHUNK_CHARS
    reader.CHUNK_CHARS = chunk
    try:
        h = TraceHeader(path=str(p))
        assert list(iter_trace(p, h)) == events
        assert h.metadata == extra
    finally:
        reader.CHUNK_CHARS = old


# --- issue 24: bounded, linear reading ----------------------------------------------------------------

def _gzip_stream(path, head: bytes, block: bytes, repeat: int, tail: bytes) -> None:
    import zlib

    c = zlib.compressobj(9, zlib.DEFLATED, 31)  # wbits 31: a gzip header, as gzip.open writes
    with open(path, "wb") as out:
        out.write(c.compress(head))
        for _ in range(repeat):
            out.write(c.compress(block))
        out.write(c.compress(tail) + c.flush())


def test_gzip_bomb_is_refused_by_its_ratio(tmp_path):
    # item 2: 80 MiB of one repeated event compresses ~1000:1; real traces expand 10-15x, so the file
    # is refused once RATIO_CHECK_CHARS (64 MiB) are read, not read to the end
    ev = b'{"ph":"X","cat":"kernel","name":"k","ts":1,"dur":1},'
    p = tmp_path / "bomb.json.gz"
    _gzip_stream(p, b'{"traceEvents":[', ev * 20_000, (80 << 20) // (len(ev) * 20_000), ev[:-1] + b"]}")
    assert p.stat().st_size < (80 << 20) / reader.MAX_GZIP_RATIO
    with pytest.raises(InputError, match=r"bomb.json.gz: .* to 1, more than the 200 to 1"):
        for _ in iter_trace(p):
            pass


def test_event_and_size_limits(tmp_path, monkeypatch):
    p = tmp_path / "t.json"
    p.write_text(json.dumps({"traceEvents": _events(50)}))
    monkeypatch.setattr(reader, "MAX_TRACE_EVENTS", 49)
    with pytest.raises(InputError, match="more than 49 events"):
        list(iter_trace(p))
    monkeypatch.setattr(reader, "MAX_TRACE_EVENTS", 50)
    assert len(list(iter_trace(p))) == 50
    monkeypatch.setattr(reader, "MAX_TRACE_CHARS", 1000)
    with pytest.raises(InputError, match="more than .* GiB of JSON"):
        list(iter_trace(p))


def test_progress_counts_the_json_read_not_the_compressed_size(tmp_path, monkeypatch, capsys):
    # item 2: a well-compressed file is not known to be large up front; the bar appears once
    # PROGRESS_MIN_BYTES of JSON have been read, and says how much
    p = tmp_path / "t.json.gz"
    _gzip_stream(p, b'{"traceEvents":[', b'{"ph":"X","ts":1,"dur":1}' + b" " * 1000 + b",", 1000, b"{}]}")
    monkeypatch.setattr(reader, "PROGRESS_MIN_BYTES", 100_000)
    assert p.stat().st_size * reader.GZIP_RATIO < 100_000  # the old gate on the compressed size stayed shut
    monkeypatch.setattr(reader.sys.stderr, "isatty", lambda: True)
    assert len(list(iter_trace(p))) == 1001
    err = capsys.readouterr().err
    assert "MB of JSON" in err and err.endswith("\n")


def test_whitespace_is_consumed_as_it_is_skipped(tmp_path, monkeypatch):
    # item 3: a run of spaces between events is read in chunks, each dropped once skipped, so the
    # window never holds more than two chunks (it used to hold the whole run: quadratic time)
    monkeypatch.setattr(reader, "CHUNK_CHARS", 4096)
    p = tmp_path / "t.json"
    p.write_text('{"traceEvents": [' + " " * (2 << 20) + '{"ph": "X"},' + "\n" * (1 << 20) + '{"ph": "X"}'
                 + " " * (1 << 20) + "]" + " " * (1 << 20) + "}")
    widest = [0]
    fill = reader._Buffer.fill

    def spy(self, *a):
        out = fill(self, *a)
        widest[0] = max(widest[0], len(self.text))
        return out
    monkeypatch.setattr(reader._Buffer, "fill", spy)
    assert len(list(iter_trace(p))) == 2
    assert widest[0] <= 2 * 4096


def test_a_long_value_is_read_in_doubling_chunks(tmp_path, monkeypatch):
    # item 3: one 1 MiB string in 1 KiB chunks is rescanned ~log2(1024) times, not 1024 times
    monkeypatch.setattr(reader, "CHUNK_CHARS", 1024)
    p = tmp_path / "t.json"
    p.write_text('{"traceEvents": [{"name": "' + "x" * (1 << 20) + '"}]}')
    reads = []
    monkeypatch.setattr(reader, "_open_text", _counting_open(reader._open_text, reads))
    assert [len(e["name"]) for e in iter_trace(p)] == [1 << 20]
    assert len(reads) < 20, len(reads)


def _counting_open(open_text, reads):
    def wrapped(path):
        raw, text, gz = open_text(path)

        class Counting:
            def read(self, n):
                reads.append(n)
                return text.read(n)

            def close(self):
                text.close()
        return raw, Counting(), gz
    return wrapped


def test_integer_past_the_digit_limit_names_the_field(tmp_path):
    # item 7: Python refuses int() of more than 4,300 digits with ValueError; the reader names the field
    p = tmp_path / "t.json"
    p.write_text('{"traceEvents": [{"ph": "X", "ts": ' + "9" * 5000 + ', "dur": 1}]}')
    with pytest.raises(InputError, match=r"t.json: field 'ts' .* more than 4300 digits"):
        list(iter_trace(p))
    p.write_text('{"baseTimeNanoseconds": ' + "1" * 4400 + ', "traceEvents": []}')
    with pytest.raises(InputError, match="field 'baseTimeNanoseconds'"):
        list(iter_trace(p))


def test_fifo_device_and_symlink_loop_are_named(tmp_path):
    # item 16: each says what the path is, not "empty file" or "no such file"
    import os

    os.mkfifo(tmp_path / "pipe")
    with pytest.raises(InputError, match="a FIFO"):
        list(iter_trace(tmp_path / "pipe"))
    with pytest.raises(InputError, match="a device"):
        list(iter_trace("/dev/zero"))
    os.symlink(tmp_path / "loop", tmp_path / "loop")
    with pytest.raises(InputError, match="too many levels of symbolic links"):
        trace_files(tmp_path / "loop")
