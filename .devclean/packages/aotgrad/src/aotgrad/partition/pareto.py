"""Write the Pareto curve of the memory-budget partitioner as a hand-written SVG.

x: saved activation bytes, y: estimated recompute time; one point per budget (0 to 1 in
steps of 0.05), labelled with its budget; the budget a compile chose is marked (a ring and a
caption naming its budget, saved bytes and recompute time). No plotting library is needed.
"""

from __future__ import annotations

import pathlib
from collections.abc import Sequence
from xml.sax.saxutils import escape

from aotgrad.partition.point import BudgetPoint

_WIDTH = 640
_HEIGHT = 420
_MARGIN_LEFT = 90
_MARGIN_RIGHT = 30
_MARGIN_TOP = 40
_MARGIN_BOTTOM = 60


def _fmt_bytes(n: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if abs(n) < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} GiB"


def _fmt_time(t: float) -> str:
    if t == 0:
        return "0"
    if t < 1e-3:
        return f"{t * 1e6:.1f} us"
    if t < 1:
        return f"{t * 1e3:.2f} ms"
    return f"{t:.3g} s"


def render_pareto_svg(points: Sequence[BudgetPoint], title: str = "memory budget",
                      chosen: BudgetPoint | None = None) -> str:
    """The SVG text of the curve; `chosen` (one of the points or another) is marked."""
    everything = [*points, chosen] if chosen is not None else list(points)
    xs = [float(p.saved_bytes) for p in everything]
    ys = [p.recompute_time for p in everything]
    x_lo, x_hi = (min(xs), max(xs)) if xs else (0.0, 1.0)
    y_lo, y_hi = (0.0, max(ys)) if ys else (0.0, 1.0)
    x_span = (x_hi - x_lo) or 1.0
    y_span = (y_hi - y_lo) or 1.0
    plot_w = _WIDTH - _MARGIN_LEFT - _MARGIN_RIGHT
    plot_h = _HEIGHT - _MARGIN_TOP - _MARGIN_BOTTOM

    def px(x: float) -> float:
        return _MARGIN_LEFT + (x - x_lo) / x_span * plot_w

    def py(y: float) -> float:
        return _MARGIN_TOP + plot_h - (y - y_lo) / y_span * plot_h

    header = (
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{_WIDTH}" height="{_HEIGHT}" '
        f'viewBox="0 0 {_WIDTH} {_HEIGHT}" font-family="sans-serif" font-size="11">'
    )
    heading = (
        f'<text x="{_WIDTH / 2}" y="22" text-anchor="middle" font-size="14">'
        f"{escape(title)}: saved bytes vs estimated recompute time</text>"
    )
    background = f'<rect x="0" y="0" width="{_WIDTH}" height="{_HEIGHT}" fill="white"/>'
    lines = [header, background, heading]
    x0, y0 = _MARGIN_LEFT, _MARGIN_TOP + plot_h
    lines.append(f'<line x1="{x0}" y1="{y0}" x2="{x0 + plot_w}" y2="{y0}" stroke="black"/>')
    lines.append(f'<line x1="{x0}" y1="{y0}" x2="{x0}" y2="{_MARGIN_TOP}" stroke="black"/>')
    for k in range(5):
        fx_ = x_lo + x_span * k / 4
        fy_ = y_lo + y_span * k / 4
        lines.append(
            f'<text x="{px(fx_):.1f}" y="{y0 + 16}" text-anchor="middle">'
            f"{escape(_fmt_bytes(fx_))}</text>"
        )
        lines.append(
            f'<text x="{x0 - 6}" y="{py(fy_) + 4:.1f}" text-anchor="end">'
            f"{escape(_fmt_time(fy_))}</text>"
        )
    lines.append(
        f'<text x="{x0 + plot_w / 2}" y="{_HEIGHT - 14}" text-anchor="middle">'
        "saved activation bytes</text>"
    )
    lines.append(
        f'<text x="16" y="{_MARGIN_TOP + plot_h / 2}" text-anchor="middle" '
        f'transform="rotate(-90 16 {_MARGIN_TOP + plot_h / 2})">estimated recompute time</text>'
    )
    ordered = sorted(points, key=lambda p: (p.saved_bytes, p.recompute_time))
    path = " ".join(f"{px(p.saved_bytes):.1f},{py(p.recompute_time):.1f}" for p in ordered)
    if path:
        lines.append(f'<polyline points="{path}" fill="none" stroke="#1f77b4" stroke-width="1.5"/>')
    for p in points:
        cx, cy = px(p.saved_bytes), py(p.recompute_time)
        lines.append(
            f'<circle cx="{cx:.1f}" cy="{cy:.1f}" r="3" fill="#d62728">'
            f"<title>budget {p.budget:.2f}: {escape(_fmt_bytes(p.saved_bytes))}, "
            f"{escape(_fmt_time(p.recompute_time))}</title></circle>"
        )
        if round(p.budget * 20) % 4 == 0:
            lines.append(
                f'<text x="{cx + 5:.1f}" y="{cy - 5:.1f}" font-size="9">{p.budget:.2f}</text>'
            )
    if chosen is not None:
        cx, cy = px(chosen.saved_bytes), py(chosen.recompute_time)
        caption = (f"chosen: budget {chosen.budget:.2f}, {_fmt_bytes(chosen.saved_bytes)} saved, "
                   f"{_fmt_time(chosen.recompute_time)} recompute")
        lines.append(
            f'<circle id="chosen" cx="{cx:.1f}" cy="{cy:.1f}" r="7" fill="none" '
            f'stroke="#2ca02c" stroke-width="2.5" data-budget="{chosen.budget}" '
            f'data-saved-bytes="{chosen.saved_bytes}" '
            f'data-recompute-seconds="{chosen.recompute_time}"/>'
        )
        lines.append(
            f'<text x="{_WIDTH - _MARGIN_RIGHT}" y="{_MARGIN_TOP - 6}" text-anchor="end" '
            f'fill="#2ca02c">{escape(caption)}</text>'
        )
    lines.append("</svg>")
    return "\n".join(lines) + "\n"


def write_pareto_svg(
    path: str | pathlib.Path, points: Sequence[BudgetPoint], title: str = "memory budget",
    chosen: BudgetPoint | None = None,
) -> pathlib.Path:
    """Write `render_pareto_svg(points, title, chosen)` to `path` (folders created)."""
    out = pathlib.Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(render_pareto_svg(points, title, chosen), encoding="utf-8")
    return out
