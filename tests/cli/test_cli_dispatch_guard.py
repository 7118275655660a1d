"""The dispatcher of ``cli/__init__.py`` as the last guard: a report holding a non-finite number is
refused whole, and every way a command can end is one line on stderr with its exit code, never a
traceback (issue 10, items 1 and 7)."""

from __future__ import annotations

import errno
import sys
import types

import pytest

from commcost.cli import find_non_finite_token, main


def _fake_subcommand(monkeypatch, run):
    module = types.ModuleType("commcost_test_fake")
    module.HELP = "a fake subcommand for the dispatcher's tests"
    module.add_arguments = lambda p: None
    module.run = run
    monkeypatch.setitem(sys.modules, "commcost_test_fake", module)
    monkeypatch.setitem(__import__("commcost.cli", fromlist=["SUBCOMMANDS"]).SUBCOMMANDS, "fake",
                        "commcost_test_fake")


def _exit_code(argv) -> int:
    try:
        return main(argv)
    except SystemExit as exc:
        return exc.code


def test_text_report_with_inf_is_refused_whole(monkeypatch, capsys):
    def run(args):
        print("total           T              =        inf s")
        return 0
    _fake_subcommand(monkeypatch, run)
    assert _exit_code(["fake"]) == 2
    out, err = capsys.readouterr()
    assert out == ""  # the report is held until it is known to be finite
    assert err.startswith("commcost: error: a result is not a finite number ('total") and err.count("\n") == 1


@pytest.mark.parametrize("text, bad", [
    ("T = inf s", True), ("ratio is infx the latency term", True), ("-inf%", True), ("x = nan", True),
    ("InfiniBand info: nanoGPT on infiniband", False), ("in-network NVLS", False), ("1e+300 s", False),
])
def test_non_finite_token(text, bad):
    assert (find_non_finite_token(text) is not None) is bad


@pytest.mark.parametrize("exc, code, fragment", [
    (ZeroDivisionError("float division by zero"), 1, "internal error: ZeroDivisionError: float division by zero"),
    (OSError(errno.ENOSPC, "No space left on device", "out.csv"), 1, "out.csv: No space left on device"),
    (OSError(errno.ENOENT, "No such file or directory", "in.csv"), 2, "in.csv: No such file or directory"),
    (RecursionError("maximum recursion depth exceeded"), 2, "nested too deeply"),
    (KeyboardInterrupt(), 130, None),
])
def test_dispatcher_turns_every_ending_into_one_line(monkeypatch, capsys, exc, code, fragment):
    def run(args):
        print("half a report")
        raise exc
    _fake_subcommand(monkeypatch, run)
    assert _exit_code(["fake"]) == code
    out, err = capsys.readouterr()
    assert out == "" and err.count("\n") == 1 and "Traceback" not in err
    if fragment is None:
        assert err == "commcost: interrupted\n"
    else:
        assert err.startswith("commcost: error: ") and fragment in err
