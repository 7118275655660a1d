"""The page every HTML report shares: one self-contained document, numbers marked with their JSON key.

Rules the reports keep (docs/report.md):

- Every number printed comes from the dict the command's ``--json`` writes and carries it exactly:
  ``<span class="num" data-key="step_s" data-value="15.02...">15.03 s</span>``; ``data-value`` is
  ``repr`` of the JSON value (Python's shortest round-trip form, as ``json.dumps`` writes it), and
  the hover text (``title``) names its formula or source.
- No URL of any kind: styles and the one script are inline, charts are inline SVG, the favicon is an
  empty ``data:`` URL (so the browser asks for none), and a Content-Security-Policy of
  ``default-src 'none'`` makes the browser refuse any request a future edit might add.
- Readable at 375 px (tables scroll inside their own box, charts scale) and printed (no buttons,
  no backgrounds, charts kept whole on a page).
"""

from __future__ import annotations

import math

from commcost.core.units import format_bytes, format_seconds
from commcost.report.html._svg import Axis, Chart, escape, nice_ticks

__all__ = ["page", "num", "seconds", "nbytes", "pct", "table", "section", "legend", "copy_code", "kv_list",
           "escape", "range_text", "fmt_s", "fmt_bytes", "stacked_bar", "finite"]

CSP = ("default-src 'none'; style-src 'unsafe-inline'; script-src 'unsafe-inline'; img-src data:; "
       "base-uri 'none'; form-action 'none'")
"""Content-Security-Policy: nothing leaves the page (no fetch, image, font or frame from anywhere)."""

_CSS = """
*{box-sizing:border-box}
html{-webkit-text-size-adjust:100%}
body{font:15px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,"Helvetica Neue",Arial,sans-serif;color:#1b1b1b;
background:#fff;margin:0 auto;max-width:62rem;padding:0.8rem}
h1{font-size:1.35rem;margin:0.2rem 0 0.3rem}h2{font-size:1.1rem;margin:1.4rem 0 0.4rem;border-bottom:1px solid #ddd}
p,li{overflow-wrap:anywhere}
.sub{color:#555;margin:0 0 0.6rem}
.head{display:flex;flex-wrap:wrap;gap:0.4rem 1.4rem;margin:0.6rem 0}
.head div{min-width:8rem}.head b{display:block;font-size:1.25rem}
.num{font-variant-numeric:tabular-nums;border-bottom:1px dotted #999;cursor:help}
.scroll{overflow-x:auto;-webkit-overflow-scrolling:touch;max-width:100%}
table{border-collapse:collapse;font-size:0.86rem;margin:0.3rem 0}
th,td{padding:0.2rem 0.45rem;border-bottom:1px solid #e4e4e4;text-align:left;vertical-align:top}
td.r,th.r{text-align:right;white-space:nowrap}
td.w{min-width:14rem}
svg.chart{width:100%;height:auto;display:block}
.ctitle{font-weight:600;font-size:0.9rem;margin:0.6rem 0 0.1rem}figure{margin:0.4rem 0}
svg .frame{fill:none;stroke:#888;stroke-width:0.8}svg .grid{stroke:#eee;stroke-width:0.8}
svg .tick{font-size:10.5px;fill:#444}svg .axl{font-size:11.5px;fill:#222}svg .ttl{font-size:12.5px;font-weight:600}
svg .lbl{font-size:10.5px;fill:#222}
.legend{list-style:none;padding:0;margin:0.2rem 0;display:flex;flex-wrap:wrap;gap:0.2rem 1rem;font-size:0.86rem}
.sw{display:inline-block;width:0.8em;height:0.8em;margin-right:0.3em;vertical-align:-0.05em;border:1px solid #0003}
code{font:0.82rem/1.35 ui-monospace,SFMono-Regular,Menlo,Consolas,monospace;background:#f4f4f4;padding:0.05rem 0.2rem}
.cmd{display:flex;gap:0.4rem;align-items:flex-start;margin:0.2rem 0}
.cmd code{display:block;white-space:pre-wrap;overflow-wrap:anywhere;user-select:all;flex:1;padding:0.3rem}
button{font:inherit;font-size:0.8rem;padding:0.15rem 0.5rem;cursor:pointer}
.warn{color:#8a3b00}.note{color:#555;font-size:0.88rem}
details{margin:0.3rem 0}summary{cursor:pointer}
dl.kv{display:grid;grid-template-columns:fit-content(45%) 1fr;gap:0.1rem 0.8rem;margin:0.3rem 0}dl.kv dt{color:#555}
dl.kv dd{margin:0}
@media (max-width:480px){body{font-size:14px;padding:0.5rem}.head b{font-size:1.1rem}
svg .tick,svg .lbl{font-size:14px}svg .axl{font-size:15px}}
@media print{body{max-width:none;padding:0;font-size:11pt}button{display:none}.scroll{overflow:visible}
svg.chart,table,figure{break-inside:avoid}a{color:inherit;text-decoration:none}code{background:none}
details{display:block}details>*{display:block}}
"""

_SCRIPT = """
document.addEventListener('click',function(e){var b=e.target.closest('button[data-copy]');if(!b)return;
var t=document.getElementById(b.getAttribute('data-copy')).textContent;
function done(){b.textContent='copied';setTimeout(function(){b.textContent='copy';},1500);}
if(navigator.clipboard&&window.isSecureContext){navigator.clipboard.writeText(t).then(done,function(){});}
else{var r=document.createRange();r.selectNodeContents(document.getElementById(b.getAttribute('data-copy')));
var s=window.getSelection();s.removeAllRanges();s.addRange(r);try{document.execCommand('copy');done();}catch(x){}}});
window.addEventListener('beforeprint',function(){document.querySelectorAll('details').forEach(function(d){d.open=true;});});
"""
"""The page's one script: the copy buttons, and every ``<details>`` opened for printing."""


def fmt_s(v: float) -> str:
    """Seconds as the text reports print them (:func:`commcost.core.units.format_seconds`)."""
    return format_seconds(v)


def fmt_bytes(v: float) -> str:
    """Bytes as the text reports print them (GB = 1e9, :func:`commcost.core.units.format_bytes`)."""
    return format_bytes(v)


def num(value, text: str | None = None, *, key: str | None = None, tip: str = "", extra: str = "") -> str:
    """A number from the JSON dict: shown as ``text``, carried exactly in ``data-value``, hover text ``tip``
    (its formula or source), ``key`` its JSON path (``data-key``) where a test reads it back."""
    if value is None:  # the JSON's null: undefined here (no communication, one rank)
        return '<span class="na" title="null in the JSON: not defined here">-</span>'
    shown = text if text is not None else (f"{value:g}" if isinstance(value, float) else str(value))
    attrs = f' data-key="{escape(key)}"' if key else ""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        attrs += f' data-value="{value!r}"'
    tip = tip or (f"--json: {key}" if key else "")
    if tip:
        attrs += f' title="{escape(tip)}"'
    return f'<span class="num"{attrs}{extra}>{escape(shown)}</span>'


def seconds(value: float, *, key: str | None = None, tip: str = "", extra: str = "") -> str:
    """A time in seconds from the dict, printed as the text report prints it."""
    return num(value, None if value is None else fmt_s(value), key=key, tip=tip, extra=extra)


def nbytes(value: float, *, key: str | None = None, tip: str = "", extra: str = "") -> str:
    """A size in bytes from the dict (GB = 1e9 bytes)."""
    return num(value, None if value is None else fmt_bytes(value), key=key, tip=tip, extra=extra)


def pct(value: float, *, key: str | None = None, tip: str = "", digits: int = 1) -> str:
    """A fraction from the dict, printed as a percentage."""
    return num(value, None if value is None else f"{value:.{digits}%}", key=key, tip=tip)


def range_text(value, unit: str = "s") -> str | None:
    """``lo - hi`` from an interval as the JSON may write it: a two-number list, or a dict with
    ``low``/``high`` (``lo``/``hi``, ``lower``/``upper``, with or without a ``_s`` suffix); None otherwise."""
    lo = hi = None
    if isinstance(value, (list, tuple)) and len(value) == 2 and all(isinstance(v, (int, float)) for v in value):
        lo, hi = value
    elif isinstance(value, dict):
        for a, b in (("low", "high"), ("lo", "hi"), ("lower", "upper"), ("min", "max")):
            for suffix in ("", "_s", "_days"):
                if isinstance(value.get(a + suffix), (int, float)) and isinstance(value.get(b + suffix), (int, float)):
                    lo, hi = value[a + suffix], value[b + suffix]
                    break
            if lo is not None:
                break
    if lo is None or hi is None:
        return None
    if unit == "s":
        return f"{fmt_s(lo)} - {fmt_s(hi)}"
    if unit == "bytes":
        return f"{fmt_bytes(lo)} - {fmt_bytes(hi)}"
    return f"{lo:,.4g} - {hi:,.4g}{(' ' + unit) if unit else ''}"


def table(headers: list[str], rows: list[list[str]], *, right: set[int] = frozenset(), caption: str = "",
          wide: set[int] = frozenset()) -> str:
    """A table of already-escaped cells in its own horizontal scroll box (``right``: right-aligned columns,
    ``wide``: columns of prose, kept at least 14 em wide)."""
    cap = f"<caption class=\"note\">{escape(caption)}</caption>" if caption else ""
    head = "".join(f'<th{" class=r" if i in right else ""}>{escape(h)}</th>' for i, h in enumerate(headers))
    body = "".join("<tr>" + "".join(f'<td{" class=r" if i in right else " class=w" if i in wide else ""}>{c}</td>' for i, c in enumerate(r))
                   + "</tr>" for r in rows)
    return f'<div class="scroll"><table>{cap}<thead><tr>{head}</tr></thead><tbody>{body}</tbody></table></div>'


def section(title: str, body: str, *, ident: str = "") -> str:
    """A titled part of the page."""
    anchor = f' id="{escape(ident)}"' if ident else ""
    return f"<section{anchor}><h2>{escape(title)}</h2>{body}</section>"


def legend(items: list[tuple[str, str]]) -> str:
    """Colour swatches with their (already escaped) labels."""
    return '<ul class="legend">' + "".join(
        f'<li><span class="sw" style="background:{c}"></span>{label}</li>' for c, label in items) + "</ul>"


def kv_list(pairs: list[tuple[str, str]]) -> str:
    """A two-column list of (plain name, escaped value)."""
    return '<dl class="kv">' + "".join(f"<dt>{escape(k)}</dt><dd>{v}</dd>" for k, v in pairs) + "</dl>"


def copy_code(command: str, ident: str) -> str:
    """A command the reader can select at once (``user-select: all``) or copy with the button."""
    return (f'<div class="cmd"><code id="{escape(ident)}">{escape(command)}</code>'
            f'<button type="button" data-copy="{escape(ident)}">copy</button></div>')


def stacked_bar(parts: list[tuple[str, float, str, str]], *, axis_label: str, unit: str,
                markers: list[tuple[float, str, str]] = (), title: str = "", width: int = 480,
                interval: tuple[float, float, str] | None = None) -> str:
    """One horizontal bar of additive ``parts`` ``(label, value, colour, tip)``, an x axis in ``unit``
    (``s`` or ``bytes``), vertical ``markers`` ``(value, label, tip)`` (a capacity, a bound), and an
    ``interval`` ``(low, high, tip)`` drawn as a bracket under the bar."""
    total = sum(v for _, v, _, _ in parts if v > 0)
    hi = max([total, *(m[0] for m in markers), *(interval[:2] if interval else ())] or [1.0]) * 1.04 or 1.0
    if unit == "bytes":
        scale, fmt_axis = 1e9, (lambda v: f"{v / 1e9:g}")
    else:
        scale = 1.0 if hi >= 1 else 1e-3
        fmt_axis = (lambda v: f"{v:g}") if scale == 1.0 else (lambda v: f"{v * 1e3:g}")
    ticks_axis = Axis(0.0, hi, axis_label, fmt=fmt_axis)
    ticks_axis.ticks = [t * scale for t in _nice(hi / scale)]
    # marker labels closer than a label's width go one line up, alternately
    rows, last = [], None
    span_px = width - 28
    for value, _, _ in sorted(markers):
        near = last is not None and (value - last[0]) / hi * span_px < 84
        rows.append(1 - last[1] if near else 0)
        last = (value, rows[-1])
    lines = (max(rows) + 1) if rows else 0
    chart = Chart(ticks_axis, Axis(0.0, 1.0, ""), width=width, height=84 + 18 * lines, title=title,
                  left=12, right=16, top=8 + 18 * lines, bottom=44, row_labels=[])
    x = 0.0
    bar_lo = 0.3 if interval else 0.12
    for label, v, colour, tip in parts:
        if v <= 0:
            continue
        chart.rect(x, x + v, bar_lo, 0.88, colour=colour, tip=f"{label}: {tip}")
        x += v
    if interval:
        lo, hi_iv, tip = interval
        chart.line([(lo, 0.12), (hi_iv, 0.12)], colour="#222", width=2.2, tip=tip)
        for end in (lo, hi_iv):
            chart.line([(end, 0.02), (end, 0.22)], colour="#222", width=2.2, tip=tip)
    for (value, label, tip), row in zip(sorted(markers), rows):
        chart.vline(value, tip=tip, label=label, label_row=row)
    return chart.svg()


def _nice(hi: float) -> list[float]:
    return nice_ticks(0.0, hi)


def page(*, title: str, subtitle: str, body: str, kind: str) -> str:
    """The whole document: head with the policy and inline style, the body, the one inline script."""
    return ("<!DOCTYPE html>\n"
            f'<html lang="en"><head><meta charset="utf-8">'
            f'<meta http-equiv="Content-Security-Policy" content="{CSP}">'
            '<meta name="viewport" content="width=device-width, initial-scale=1">'
            '<link rel="icon" href="data:,">'
            f"<title>{escape(title)}</title><style>{_CSS}</style></head>"
            f'<body data-report="{escape(kind)}"><header><h1>{escape(title)}</h1>'
            f'<p class="sub">{escape(subtitle)}</p></header><main>{body}</main>'
            '<footer><p class="note">Written by commcost from the same dict its <code>--json</code> prints: '
            "every number shown is that dict's value (hover or tap a dotted number for its formula or "
            "source). One file, no network request.</p></footer>"
            f"<script>{_SCRIPT}</script></body></html>\n")


def finite(v) -> bool:
    """A number that can be drawn."""
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)
