"""Interrupted runs: SIGTERM as an exception, the signal that ended the run, and the notes an interrupted run
prints about what it kept (:mod:`commcost.cli._args` re-exports them)."""

from __future__ import annotations

__all__ = ["Terminated", "last_interrupt_signal", "on_interrupt", "clear_interrupt_notes",
           "interrupt_note"]


class Terminated(KeyboardInterrupt):
    """SIGTERM turned into an exception, so that ``finally`` blocks run (ranks are reaped, rows kept,
    temporary files removed) and the dispatcher prints one line and exits ``128 + signum``."""

    signum = 15

    def __init__(self, *args) -> None:
        super().__init__(*args)
        _LAST_SIGNAL[0] = self.signum


_LAST_SIGNAL = [2]


def last_interrupt_signal() -> int:
    """The signal of this run's last interruption: 15 after a :class:`Terminated`, else 2 (SIGINT)."""
    return _LAST_SIGNAL[0]


_INTERRUPT_NOTES: list = []


def on_interrupt(note) -> None:
    """Register ``note() -> str``: what an interrupted run keeps and where (``measure``: its rows)."""
    _INTERRUPT_NOTES.append(note)


def clear_interrupt_notes() -> None:
    """Forget the registered notes and the last signal (the dispatcher does, before each run)."""
    _INTERRUPT_NOTES.clear()
    _LAST_SIGNAL[0] = 2


def interrupt_note() -> str:
    """The registered notes, joined (empty when nothing is kept)."""
    return "; ".join(text for text in (note() for note in _INTERRUPT_NOTES) if text)
