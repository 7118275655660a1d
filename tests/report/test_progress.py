"""Progress bars (commcost.report.progress): the fraction, the cells, the rate, by hand."""

from __future__ import annotations

import io

from commcost.report.progress import (SearchBar, SweepBar, bar_cells, fraction_done, rate_per_s,
                                      search_progress_text, sweep_progress_text, tenths_done)


class Tty(io.StringIO):
    def isatty(self):
        return True


def test_fraction_and_cells_by_hand():
    # 3/8 = 0.375; 30 * 3 // 8 = 90 // 8 = 11 cells; 10 * 3 // 8 = 3 tenths
    assert fraction_done(3, 8) == 0.375
    assert bar_cells(3, 8) == 11 and tenths_done(3, 8) == 3
    # 7/10: 10 * 7 // 10 = 7 exactly (integers: no 6.999... from floats); 30 * 7 // 10 = 21
    assert tenths_done(7, 10) == 7 and bar_cells(7, 10) == 21
    # nothing to do, or past the end: clamped
    assert (fraction_done(0, 0), bar_cells(0, 0), tenths_done(5, 0)) == (0.0, 0, 0)
    assert (fraction_done(12, 10), bar_cells(12, 10)) == (1.0, 30)


def test_rate_by_hand():
    assert rate_per_s(50, 2.0) == 25.0  # 50 / 2 s
    assert rate_per_s(50, 0.0) == 0.0


def test_sweep_text_by_hand():
    # 3 of 8 sizes: 11 '#' then 19 '.'
    assert sweep_progress_text(3, 8, "64 MiB") == "[" + "#" * 11 + "." * 19 + "] 3/8 64 MiB"


def test_search_text_by_hand():
    # 1,000 of 8,000 in 0.5 s: 12.5% (5 wide: one space after the bar), 30 * 1000 // 8000 = 3 cells, 2,000/s
    assert search_progress_text(1000, 8000, 0.5) == ("search [###" + " " * 27 + "] 12.5%  1,000/8,000  2,000/s"
                                                     "  (Ctrl-C: best so far)")


def test_search_bar_after_one_second():
    err = Tty()
    bar = SearchBar(True, stream=err)
    bar(10, 100, 0.5)                      # under a second: nothing drawn
    assert err.getvalue() == ""
    bar(50, 100, 2.0)
    bar.close()
    text = err.getvalue()
    assert "50.0%" in text and "50/100" in text and "25/s" in text and text.endswith("\n")


def test_search_bar_is_silent_off_a_terminal():
    err = io.StringIO()
    bar = SearchBar(True, stream=err)
    bar(50, 100, 2.0)
    bar.close()
    assert err.getvalue() == ""


def test_sweep_bar_waits_then_prints_a_line_per_tenth_off_a_terminal():
    now = [0.0]
    err = io.StringIO()
    bar = SweepBar(stream=err, clock=lambda: now[0])
    bar(1, 20, "a")                        # at 0 s of a 2 s delay: nothing
    assert err.getvalue() == ""
    now[0] = 3.0
    bar(2, 20, "b")                        # 10 * 2 // 20 = 1 tenth: a line
    bar(3, 20, "c")                        # 10 * 3 // 20 = 1 still: none
    bar(4, 20, "d")                        # 2 tenths: a line
    assert [ln.split("] ")[1] for ln in err.getvalue().splitlines()] == ["2/20 b", "4/20 d"]


def test_sweep_bar_on_a_terminal_redraws_one_line_and_ends_it():
    err = Tty()
    bar = SweepBar(stream=err, clock=lambda: 0.0)
    bar(4, 4, "done")                      # finished before the delay: drawn anyway, with a newline
    text = err.getvalue()
    assert text.startswith("\r[" + "#" * 30 + "] 4/4 done") and text.endswith("\n") and len(text) == 1 + 80 + 1


def test_search_text_fits_the_terminal():
    # 9,168,000 configurations at 1,234,567/s: the full line is 8 + 30 + 2 + 6 + 2 + 19 + 2 + 11 = 80 columns
    # plus the 23-column Ctrl-C hint
    full = search_progress_text(9_168_000, 9_168_000, 9_168_000 / 1_234_567)
    assert full.endswith("(Ctrl-C: best so far)") and len(full) == 103
    assert search_progress_text(9_168_000, 9_168_000, 9_168_000 / 1_234_567, 120) == full
    at_80 = search_progress_text(9_168_000, 9_168_000, 9_168_000 / 1_234_567, 80)
    assert at_80 == full[:-len("  (Ctrl-C: best so far)")] and len(at_80) == 80
    # 60 columns: the bar narrows by 80 - 60 = 20 cells, to 10
    at_60 = search_progress_text(9_168_000, 9_168_000, 9_168_000 / 1_234_567, 60)
    assert at_60.startswith("search [" + "#" * 10 + "] 100.0%") and len(at_60) == 60
