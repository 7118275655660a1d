"""``--html FILE`` for plan, search, trace and timeline: the flag, and the page written from the JSON text.

The page is built from the very dict ``--json`` prints: :func:`json_dict` reads back the strict JSON
text the command renders (so the page's numbers equal the JSON's to the last digit), and the page is
written atomically (:func:`commcost.report.html.write_html`). docs/report.md.
"""

from __future__ import annotations

import argparse
import json

from commcost.cli import _args as A

__all__ = ["add_html_argument", "check_html", "json_dict"]


def add_html_argument(p) -> None:
    """``--html FILE`` on a parser or an argument group."""
    p.add_argument("--html", metavar="FILE",
                   help="write one self-contained HTML report (offline, no network request) to FILE (.html)")


def check_html(args: argparse.Namespace) -> str | None:
    """The ``--html`` path, refused before any work where it cannot be written or does not end in .html."""
    path = getattr(args, "html", None)
    if path is not None:
        A.check_output_path("--html", path, (".html", ".htm"))
    return path


def json_dict(text: str) -> dict:
    """The dict of the strict JSON ``text`` a command prints with ``--json``."""
    return json.loads(text)
