"""Every file commcost writes goes through :func:`write_atomic`: whole or not at all.

``-o``, ``--plot``, ``--csv``, ``--save-measurement``, ``--save-calibration`` and ``--trace-out``
all end here, so a reader never sees half a file, a write that fails part way (a full disk,
``ulimit -f``) leaves the old file as it was, and two commands writing one path leave one of the
two whole files (each writes its own temporary file; the last rename wins). docs/exit-codes.md,
"Output files", is the contract.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any
import io
import stat
import tempfile
from commcost.core.optional import pyplot

__all__ = ["write_atomic", "save_figure_atomic"]


def _umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def write_atomic(path: str | Path, data: str | bytes) -> None:
    """Write ``data`` (text as UTF-8, or bytes) to ``path`` so that no reader ever sees half a file.

    A regular file (or a new one) is written through a temporary file beside it and
    ``os.replace``; the result has the old file's permissions, or for a new file
    ``0666 & ~umask`` as ``open()`` would give (``mkstemp`` alone gives 0600). A symlink is
    written through to its target (the link stays a link). A device, FIFO or socket
    (``/dev/null``, ``/dev/stdout``) is written through in place: it cannot be replaced.
    An OSError names ``path``, the file the user asked for, never the temporary one."""

    blob = data.encode("utf-8") if isinstance(data, str) else data
    p = Path(path)
    try:
        try:
            st = os.stat(p)  # follows symlinks
        except FileNotFoundError:
            st = None
        if st is not None and not stat.S_ISREG(st.st_mode):
            with open(p, "wb") as fh:
                fh.write(blob)
            return
        if p.is_symlink():
            p = Path(os.path.realpath(p))
        mode = stat.S_IMODE(st.st_mode) if st is not None else 0o666 & ~_umask()
        fd, tmp = tempfile.mkstemp(prefix=f".{p.name}.", suffix=".tmp", dir=p.parent if str(p.parent) else ".")
    except OSError as exc:
        raise OSError(exc.errno, exc.strerror, str(path)) from None
    try:
        os.fchmod(fd, mode)
        with os.fdopen(fd, "wb") as fh:
            fh.write(blob)
        os.replace(tmp, p)
    except BaseException as exc:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        if isinstance(exc, OSError):
            raise OSError(exc.errno, exc.strerror, str(path)) from None
        raise


def save_figure_atomic(fig: Any, path: str | Path, *, dpi: int) -> None:
    """Render a matplotlib figure in memory, in the format its suffix names (``.png``, ``.svg``),
    and write it with :func:`write_atomic`; the figure is closed either way."""


    fmt = Path(path).suffix.lower().lstrip(".") or "png"
    try:
        buf = io.BytesIO()
        fig.savefig(buf, format=fmt, dpi=dpi)
    finally:
        pyplot().close(fig)
    write_atomic(path, buf.getvalue())
