"""A small SVG chart helper for the HTML reports (standard library only).

One :class:`Chart` holds two axes (linear or log) and a list of marks (rectangles, lines, points,
text); :meth:`Chart.svg` draws the frame, the ticks, the axis labels with their units, and the marks,
each with a ``<title>`` (the hover text: the number and its formula or source). The chart scales with
its container (``viewBox``, ``width: 100%``), so one drawing serves a phone-width window and a print.
Inline SVG in HTML needs no namespace declaration, so the page carries no URL of any kind.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Callable

__all__ = ["Axis", "Chart", "PALETTE", "nice_ticks", "log_ticks", "label_margin", "escape"]

_ESCAPES = str.maketrans({"&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#x27;"})


def escape(text: str) -> str:
    """``text`` safe in HTML text and in a quoted attribute (what ``html.escape`` does, without loading
    ``html.entities``' table of every named entity at import)."""
    return str(text).translate(_ESCAPES)

PALETTE = ("#0072B2", "#E69F00", "#009E73", "#D55E00", "#CC79A7", "#56B4E9", "#F0E442", "#999999",
           "#332288", "#882255", "#44AA99", "#117733")
"""Okabe and Ito's colour-blind-safe colours (then Tol's), one per series, in order."""


def label_margin(labels: list[str]) -> int:
    """A left margin (user units) that holds the longest row label at the phone-width font (14 units,
    about 8 units a character)."""
    return min(240, 14 + 8 * max((len(s) for s in labels), default=4))


def nice_ticks(lo: float, hi: float, count: int = 5) -> list[float]:
    """Ticks at 1, 2 or 5 times a power of ten covering ``[lo, hi]`` (about ``count`` of them)."""
    if not (math.isfinite(lo) and math.isfinite(hi)) or hi <= lo:
        return [lo]
    raw = (hi - lo) / max(count, 1)
    mag = 10.0 ** math.floor(math.log10(raw))
    step = next(m * mag for m in (1, 2, 5, 10) if m * mag >= raw)
    k0, k1 = math.ceil(lo / step - 1e-9), math.floor(hi / step + 1e-9)
    # each tick from its own integer multiple: no error accumulates from tick to tick
    return [0.0 if k == 0 else k * step for k in range(k0, k1 + 1)]


def log_ticks(lo: float, hi: float, base: float = 10.0) -> list[float]:
    """Powers of ``base`` within ``[lo, hi]`` (at least the two ends when none falls inside)."""
    if lo <= 0 or hi <= lo:
        return [lo]
    k0, k1 = math.ceil(math.log(lo, base) - 1e-9), math.floor(math.log(hi, base) + 1e-9)
    ticks = [base ** k for k in range(k0, k1 + 1)]
    if len(ticks) < 3 and base == 10.0:  # under two decades: 1, 2, 5 of each
        ticks = [m * 10.0 ** k for k in range(k0 - 1, k1 + 1) for m in (1, 2, 5) if lo <= m * 10.0 ** k <= hi]
    if len(ticks) > 8:
        stride = math.ceil(len(ticks) / 8)
        ticks = ticks[::stride]
    return ticks or [lo, hi]


@dataclass
class Axis:
    """One axis: its range in data units, its scale, its label (with the unit), and how a tick prints."""

    lo: float
    """Smallest value shown, in data units."""
    hi: float
    """Largest value shown, in data units."""
    label: str
    """The axis title, unit included (``step time (s)``)."""
    log: bool = False
    """Log scale (``lo`` must be positive)."""
    fmt: Callable[[float], str] = field(default=lambda v: f"{v:g}")
    """Tick text from a value in data units."""
    ticks: list[float] | None = None
    """Explicit tick values (default: :func:`nice_ticks` or :func:`log_ticks`)."""
    base: float = 10.0
    """Log base of the default ticks."""

    def __post_init__(self) -> None:
        if self.log:
            self.lo = max(self.lo, 1e-300)
            if self.hi <= self.lo:
                self.hi = self.lo * 10
        elif self.hi <= self.lo:
            self.hi = self.lo + (abs(self.lo) or 1.0)

    def frac(self, v: float) -> float:
        """Where ``v`` falls between ``lo`` (0) and ``hi`` (1)."""
        if self.log:
            v = max(v, self.lo)
            return (math.log(v) - math.log(self.lo)) / (math.log(self.hi) - math.log(self.lo))
        return (v - self.lo) / (self.hi - self.lo)

    def tick_values(self) -> list[float]:
        if self.ticks is not None:
            return [t for t in self.ticks if self.lo <= t <= self.hi]
        return log_ticks(self.lo, self.hi, self.base) if self.log else nice_ticks(self.lo, self.hi)


def _f(x: float) -> str:
    return f"{x:.1f}"


class Chart:
    """An SVG chart of ``width`` x ``height`` user units: a plot area inside margins, two axes, marks.

    Categorical rows (bars, lanes) use a linear y axis with ``row_labels``: row ``i`` spans
    ``[i, i + 1)`` and is labelled at its middle."""

    def __init__(self, x: Axis, y: Axis, *, width: int = 480, height: int = 280, title: str = "",
                 left: int = 64, right: int = 16, top: int = 24, bottom: int = 44,
                 row_labels: list[str] | None = None) -> None:
        self.x, self.y = x, y
        self.width, self.height, self.title = width, height, title
        self.left, self.right, self.top, self.bottom = left, right, top, bottom
        self.row_labels = row_labels
        self._marks: list[str] = []

    # -- coordinates
    def px(self, v: float) -> float:
        return self.left + self.x.frac(v) * (self.width - self.left - self.right)

    def py(self, v: float) -> float:
        return self.height - self.bottom - self.y.frac(v) * (self.height - self.top - self.bottom)

    # -- marks
    def rect(self, x0: float, x1: float, y0: float, y1: float, *, colour: str, tip: str = "",
             cls: str = "", attrs: str = "") -> None:
        """A rectangle between data coordinates; ``tip`` is its hover text."""
        a, b = sorted((self.px(x0), self.px(x1)))
        c, d = sorted((self.py(y0), self.py(y1)))
        title = f"<title>{escape(tip)}</title>" if tip else ""
        klass = f' class="{cls}"' if cls else ""
        self._marks.append(f'<rect{klass} x="{_f(a)}" y="{_f(c)}" width="{max(b - a, 0.4):.2f}" '
                           f'height="{max(d - c, 0.4):.2f}" fill="{colour}"{attrs}>{title}</rect>')

    def line(self, points: list[tuple[float, float]], *, colour: str, tip: str = "", width: float = 1.6,
             dash: str = "", markers: bool = False) -> None:
        """A polyline through data points (with a dot on each point when ``markers``)."""
        if not points:
            return
        pts = " ".join(f"{_f(self.px(x))},{_f(self.py(y))}" for x, y in points)
        title = f"<title>{escape(tip)}</title>" if tip else ""
        dash_attr = f' stroke-dasharray="{dash}"' if dash else ""
        self._marks.append(f'<polyline points="{pts}" fill="none" stroke="{colour}" stroke-width="{width}"'
                           f'{dash_attr}>{title}</polyline>')
        if markers:
            for x, y in points:
                self.point(x, y, colour=colour, tip=tip, r=2.6)

    def point(self, x: float, y: float, *, colour: str, tip: str = "", r: float = 2.0, shape: str = "circle",
              opacity: float = 1.0, attrs: str = "") -> None:
        """A dot (``circle``), a ``square`` or a ``star`` at a data point."""
        cx, cy = self.px(x), self.py(y)
        title = f"<title>{escape(tip)}</title>" if tip else ""
        op = f' fill-opacity="{opacity:g}"' if opacity < 1 else ""
        if shape == "star":
            pts = []
            for k in range(10):
                rad = r if k % 2 == 0 else r * 0.45
                ang = math.pi / 2 + k * math.pi / 5
                pts.append(f"{_f(cx + rad * math.cos(ang))},{_f(cy - rad * math.sin(ang))}")
            self._marks.append(f'<polygon points="{" ".join(pts)}" fill="{colour}" stroke="#222" '
                               f'stroke-width="0.6"{attrs}>{title}</polygon>')
        elif shape == "square":
            self._marks.append(f'<rect x="{_f(cx - r)}" y="{_f(cy - r)}" width="{2 * r:.1f}" height="{2 * r:.1f}" '
                               f'fill="{colour}"{op}{attrs}>{title}</rect>')
        else:
            self._marks.append(f'<circle cx="{_f(cx)}" cy="{_f(cy)}" r="{r:g}" fill="{colour}"{op}{attrs}>'
                               f'{title}</circle>')

    def vline(self, x: float, *, colour: str = "#333", tip: str = "", dash: str = "4 3", label: str = "",
              label_row: int = 0) -> None:
        """A vertical line across the plot at ``x`` (a capacity, a bound), with an optional label at its top
        (``label_row`` 1: one line higher, clear of a neighbour's)."""
        X = self.px(x)
        title = f"<title>{escape(tip)}</title>" if tip else ""
        self._marks.append(f'<line x1="{_f(X)}" x2="{_f(X)}" y1="{self.top}" y2="{self.height - self.bottom}" '
                           f'stroke="{colour}" stroke-width="1.2" stroke-dasharray="{dash}">{title}</line>')
        if label:
            anchor = "end" if X > self.width * 0.6 else "start"
            dx = -3 if anchor == "end" else 3
            self._marks.append(f'<text x="{_f(X + dx)}" y="{self.top - 6 - 16 * label_row}" text-anchor="{anchor}" '
                               f'class="lbl">{escape(label)}</text>')

    def text(self, x: float, y: float, s: str, *, anchor: str = "start") -> None:
        self._marks.append(f'<text x="{_f(self.px(x))}" y="{_f(self.py(y))}" text-anchor="{anchor}" '
                           f'class="lbl">{escape(s)}</text>')

    # -- the drawing
    def svg(self, *, label: str = "") -> str:
        """The chart's title (a paragraph) and the chart as one ``<svg>`` element (``label``: its accessible
        name, default the title)."""
        W, H, L, R, T, B = self.width, self.height, self.left, self.right, self.top, self.bottom
        # the title is HTML above the drawing: it wraps on a narrow window, where SVG text would not
        out = [f'<p class="ctitle">{escape(self.title)}</p>' if self.title else "",
               f'<svg viewBox="0 0 {W} {H}" role="img" aria-label="{escape(label or self.title)}" '
               f'preserveAspectRatio="xMidYMid meet" class="chart" style="max-width:{round(W * 1.2)}px">']
        out.append(f'<rect x="{L}" y="{T}" width="{W - L - R}" height="{H - T - B}" class="frame"/>')
        for v in self.x.tick_values():
            X = self.px(v)
            out.append(f'<line x1="{_f(X)}" x2="{_f(X)}" y1="{T}" y2="{H - B}" class="grid"/>')
            out.append(f'<text x="{_f(X)}" y="{H - B + 14}" text-anchor="middle" class="tick">'
                       f'{escape(self.x.fmt(v))}</text>')
        if self.row_labels is not None:
            for i, name in enumerate(self.row_labels):
                out.append(f'<text x="{L - 4}" y="{_f(self.py(i + 0.5) + 4)}" text-anchor="end" class="tick">'
                           f'{escape(name)}</text>')
        else:
            for v in self.y.tick_values():
                Y = self.py(v)
                out.append(f'<line x1="{L}" x2="{W - R}" y1="{_f(Y)}" y2="{_f(Y)}" class="grid"/>')
                out.append(f'<text x="{L - 4}" y="{_f(Y + 4)}" text-anchor="end" class="tick">'
                           f'{escape(self.y.fmt(v))}</text>')
        out.append(f'<text x="{L + (W - L - R) / 2:.1f}" y="{H - 8}" text-anchor="middle" class="axl">'
                   f'{escape(self.x.label)}</text>')
        if self.y.label:
            out.append(f'<text transform="translate(12 {T + (H - T - B) / 2:.1f}) rotate(-90)" text-anchor="middle" '
                       f'class="axl">{escape(self.y.label)}</text>')
        out.extend(self._marks)
        out.append("</svg>")
        return "".join(out)
