"""One self-contained HTML page per command (``--html FILE`` on plan, search, trace and timeline).

Each page is built from the dict the command's ``--json`` prints, so its numbers equal the JSON's by
construction; :func:`write_html` writes it atomically. The pages make no network request (no URL in
any ``src`` or ``href``, a ``default-src 'none'`` policy), scale to a phone-width window and print.
docs/report.md describes them; tests/report/html/ opens each in headless Chromium.
"""

from __future__ import annotations

from commcost.core.files import write_atomic

__all__ = ["write_html"]


def write_html(path: str, html: str) -> None:
    """Write the page ``html`` to ``path``, whole or not at all (:func:`commcost.core.files.write_atomic`)."""
    write_atomic(path, html)
