"""Progress bars on stderr: the fraction done, the bar and the rate, computed here; the commands only
create a bar and hand it to the library's ``on_progress``/``progress`` hook.

``measure`` draws :class:`SweepBar` (sizes of a sweep, once it has run :data:`SweepBar.DELAY_S`);
``search`` draws :class:`SearchBar` (configurations priced, once it has run :data:`SearchBar.DELAY_S`,
on a terminal only). On a terminal a bar redraws one line with ``\\r``; elsewhere :class:`SweepBar`
prints a line per tenth of the sweep.
"""

from __future__ import annotations

import sys
import time

from commcost.report._width import terminal_width

__all__ = ["fraction_done", "bar_cells", "tenths_done", "rate_per_s", "sweep_progress_text",
           "search_progress_text", "log_progress_text", "SweepBar", "SearchBar"]

BAR_CELLS = 30
"""Cells of a bar, each ``#`` (done) or a blank."""


def fraction_done(done: int, total: int) -> float:
    """``done / total`` clamped to [0, 1]; 0 when there is nothing to do (``total <= 0``)."""
    return min(1.0, max(0.0, done / total)) if total > 0 else 0.0


def bar_cells(done: int, total: int, cells: int = BAR_CELLS) -> int:
    """Cells filled: ``floor(cells * done / total)`` in integers (``done`` clamped to [0, total]; 0 when
    ``total <= 0``)."""
    return cells * min(max(done, 0), total) // total if total > 0 else 0


def tenths_done(done: int, total: int) -> int:
    """``floor(10 * done / total)`` (0-10): a bar not on a terminal prints a line when it moves."""
    return bar_cells(done, total, 10)


def rate_per_s(done: int, elapsed_s: float) -> float:
    """Items per second so far, ``done / elapsed_s`` (0 before any time has passed)."""
    return done / elapsed_s if elapsed_s > 0 else 0.0


def sweep_progress_text(done: int, total: int, label: str) -> str:
    """``[#########.....................] 3/10 64 MiB``: the sizes of a sweep measured so far."""
    filled = bar_cells(done, total)
    return f"[{'#' * filled}{'.' * (BAR_CELLS - filled)}] {done}/{total} {label}"


def search_progress_text(done: int, total: int, elapsed_s: float, width: int | None = None) -> str:
    """``search [####   ]  12.5%  1,000/8,000  2,000/s  (Ctrl-C: best so far)``, within ``width``
    columns where given (a ``\\r`` line wider than the terminal would leave a line per redraw): first
    the Ctrl-C hint goes, then the bar narrows (to 10 cells at least)."""
    counts = (f"{fraction_done(done, total):5.1%}  {done:,}/{total:,}  "
              f"{rate_per_s(done, elapsed_s):,.0f}/s")
    hint = "  (Ctrl-C: best so far)"
    cells = BAR_CELLS
    line = f"search [{'#' * bar_cells(done, total, cells):<{cells}}] {counts}"
    if width is None or len(line) + len(hint) <= width:
        return line + hint
    cells = max(10, cells - (len(line) - width))
    return f"search [{'#' * bar_cells(done, total, cells):<{cells}}] {counts}"


def log_progress_text(name: str, read_bytes: int, total_bytes: int) -> str:
    """``"big.txt: 40% read (40.0 of 100.0 MB)"``: how far a long log has been read (``fit --progress``)."""
    share = read_bytes / total_bytes if total_bytes else 1.0
    return f"{name}: {share:.0%} read ({read_bytes / 1e6:,.1f} of {total_bytes / 1e6:,.1f} MB)"


class SweepBar:
    """``measure``'s bar on ``stream`` (default stderr), shown once the sweep has run :data:`DELAY_S`
    or is done; called as ``bar(done, total, label)``."""

    DELAY_S = 2.0
    """A sweep shorter than this draws only its last line."""

    def __init__(self, stream=None, clock=time.monotonic) -> None:
        self.stream = stream if stream is not None else sys.stderr
        self.clock = clock
        self.start = clock()
        self.shown = -1
        self.tty = self.stream.isatty()

    def __call__(self, done: int, total: int, label: str) -> None:
        if self.clock() - self.start < self.DELAY_S and done < total:
            return
        text = sweep_progress_text(done, total, label)
        if self.tty:
            print(f"\r{text:<80}", end="" if done < total else "\n", file=self.stream, flush=True)
        elif tenths_done(done, total) != self.shown:  # not a terminal: at most ~11 lines
            print(text, file=self.stream, flush=True)
        self.shown = tenths_done(done, total)


class SearchBar:
    """``search``'s bar on ``stream`` (default stderr), drawn once the search has run :data:`DELAY_S`,
    and only where ``enabled`` and the stream is a terminal; called as ``bar(done, total, elapsed_s)``,
    then :meth:`close`."""

    DELAY_S = 1.0

    def __init__(self, enabled: bool, stream=None) -> None:
        self.stream = stream if stream is not None else sys.stderr
        self.enabled = enabled and self.stream.isatty()
        self.drawn = False

    def __call__(self, done: int, total: int, elapsed_s: float) -> None:
        if not self.enabled or elapsed_s < self.DELAY_S or total <= 0:
            return
        self.stream.write("\r" + search_progress_text(done, total, elapsed_s, terminal_width()))
        self.stream.flush()
        self.drawn = True

    def close(self) -> None:
        """End the bar's line, if one was drawn."""
        if self.drawn:
            self.stream.write("\n")
