"""Charts as SVG, drawn on the server: no chart library, nothing fetched, no script.

Why SVG attributes and classes rather than inline styles: the pages' Content-Security-
Policy allows no inline style, and presentation attributes (`width`, `x`, `class`) are
not styles. Colours come from the stylesheet's classes. Every text is escaped.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from markupsafe import Markup, escape

__all__ = ["Bar", "hbars", "month_bars"]


@dataclass(frozen=True)
class Bar:
    label: str
    value: int
    css: str = "bar"  # the class of its rectangle
    extra: int = 0  # a second segment on top (e.g. messages the archive has and we lack)
    extra_css: str = "bar-short"
    title: str = ""


def _num(value: float) -> str:
    return f"{value:.1f}".rstrip("0").rstrip(".")


def month_bars(bars: Sequence[Bar], title: str, height: int = 140) -> Markup:
    """Vertical bars, one per month (stored, and on top what is missing), a year label
    under each January, a scale line at the maximum."""
    if not bars:
        return Markup("")
    width = max(480, 22 * len(bars) + 40)
    step = (width - 40) / len(bars)
    top = max((b.value + b.extra for b in bars), default=0) or 1
    plot = height - 30
    parts = [
        f'<svg class="chart" viewBox="0 0 {width} {height}" width="{width}" height="{height}"'
        f' role="img" aria-label="{escape(title)}"><title>{escape(title)}</title>',
        f'<line class="axis" x1="36" y1="{plot + 4}" x2="{width}" y2="{plot + 4}"/>',
        f'<text class="tick" x="32" y="12" text-anchor="end">{top}</text>',
        f'<line class="grid" x1="36" y1="8" x2="{width}" y2="8"/>',
    ]
    for i, bar in enumerate(bars):
        x = 38 + i * step
        w = max(1.0, step - 2)
        h = bar.value / top * (plot - 4)
        tip = escape(bar.title or f"{bar.label}: {bar.value}")
        parts.append(
            f'<rect class="{escape(bar.css)}" x="{_num(x)}" y="{_num(plot + 4 - h)}"'
            f' width="{_num(w)}" height="{_num(h)}"><title>{tip}</title></rect>'
        )
        if bar.extra:
            e = bar.extra / top * (plot - 4)
            parts.append(
                f'<rect class="{escape(bar.extra_css)}" x="{_num(x)}" y="{_num(plot + 4 - h - e)}"'
                f' width="{_num(w)}" height="{_num(e)}"><title>{tip}</title></rect>'
            )
        if bar.label.endswith("-01") or i == 0:
            parts.append(
                f'<text class="tick" x="{_num(x)}" y="{height - 8}">{escape(bar.label[:4])}</text>'
            )
    parts.append("</svg>")
    return Markup("".join(parts))


def hbars(bars: Sequence[Bar], title: str, width: int = 520) -> Markup:
    """Horizontal bars with their labels and values: counts by status, by state."""
    if not bars:
        return Markup("")
    row = 22
    label_w = 170
    height = row * len(bars) + 6
    top = max(b.value for b in bars) or 1
    room = width - label_w - 70
    parts = [
        f'<svg class="chart" viewBox="0 0 {width} {height}" width="{width}" height="{height}"'
        f' role="img" aria-label="{escape(title)}"><title>{escape(title)}</title>'
    ]
    for i, bar in enumerate(bars):
        y = 3 + i * row
        w = bar.value / top * room
        parts.append(
            f'<text class="label" x="{label_w - 8}" y="{y + 15}" text-anchor="end">'
            f"{escape(bar.label)}</text>"
            f'<rect class="{escape(bar.css)}" x="{label_w}" y="{y + 3}" width="{_num(max(w, 1))}"'
            f' height="{row - 8}"><title>{escape(bar.title or bar.label)}: {bar.value}</title>'
            f'</rect><text class="value" x="{_num(label_w + max(w, 1) + 6)}" y="{y + 15}">'
            f"{bar.value:,}</text>"
        )
    parts.append("</svg>")
    return Markup("".join(parts))
