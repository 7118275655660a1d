"""The streaming reader: events across chunk boundaries, keys in any order, and one-line errors."""

from __future__ import annotations

import gzip
import json

import pytest
from hypothesis import given, settings, strategies as st

from commcost.errors import InputError
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
