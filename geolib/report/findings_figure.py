"""The findings page's opening figure: every claim's deciding number with its interval against
the rule's bar, coloured by the row's status — which claims held, by how much and how sure, at
a glance.

The numbers are those the rules decided on (:class:`~geolib.verdicts.rules.KeyNumber`, carried by
each claim row's ``numbers``), never read back from words. One panel per bar (a share against
one half, a difference against 0, a ratio against 1, …), so every panel has one scale; the
math checks of a derivation stand in a panel of their own, apart from the evidence, each
against its own bar on its row. A row with
no interval (a premise that failed, a count, a released model's description) has no point: its
status is in the paragraphs below the figure.

Usage: ``python -m geolib.report.findings_figure STEM FILE.json ...`` (writes STEM.png/.svg)
"""

from __future__ import annotations

import sys
import textwrap
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from geolib.verdicts.claims import Claim, read_claims
from geolib.verdicts.rules import (
    CLAIMS,
    DESCRIPTION,
    INCONCLUSIVE,
    MATH_CHECK,
    NOT_REPRODUCED,
    PARTLY,
    REPRODUCED,
    KeyNumber,
)

#: each status's colour (colour-blind safe: green, orange, grey, purple)
STATUS_COLOURS: dict[str, str] = {
    REPRODUCED: "#1b7837",
    PARTLY: "#e08214",
    INCONCLUSIVE: "#8c8c8c",
    NOT_REPRODUCED: "#762a83",
}
#: the panel of the math checks, always last
MATH_PANEL = "math checks (a derivation checked numerically; not evidence)"
#: the longest label shown beside a point (characters)
LABEL_CHARS = 34
#: a panel whose positive values span more than this ratio is drawn on a log axis
LOG_SPAN = 100.0
#: at most this many labelled x ticks per panel (the column is narrow)
X_TICKS = 5


@dataclass(frozen=True)
class Point:
    """One number of the figure: the claim, its label, the row's status and the number."""

    claim_id: str
    label: str
    status: str
    number: KeyNumber
    panel: str


def panel_of(number: KeyNumber, evidence: str) -> str:
    """The panel a number is drawn in: the math checks apart, else one per bar (and band)."""
    if evidence == MATH_CHECK:
        return MATH_PANEL
    if number.band:
        return f"against {number.bar:g} ± {number.band:g}"
    return f"against {number.bar:g}"


def points(table: Mapping[str, Sequence[Claim]]) -> list[Point]:
    """Every decided number of every row but the descriptions, in claim order (A1 … B8)."""
    out = []
    for cid in CLAIMS:
        for row in table.get(cid, []):
            if row.evidence == DESCRIPTION:
                continue
            for n in row.numbers:
                label = textwrap.shorten(f"{cid} {n.label}".strip(), LABEL_CHARS, placeholder="…")
                out.append(Point(cid, label, row.status, n, panel_of(n, row.evidence)))
    return out


def panels_of(pts: Sequence[Point]) -> dict[str, list[Point]]:
    """The points by panel: the evidence's panels by their bar, then the math checks."""
    groups: dict[str, list[Point]] = {}
    for p in pts:
        groups.setdefault(p.panel, []).append(p)
    order = sorted(
        (k for k in groups if k != MATH_PANEL),
        key=lambda k: (groups[k][0].number.bar, groups[k][0].number.band),
    )
    return {k: groups[k] for k in [*order, *([MATH_PANEL] if MATH_PANEL in groups else [])]}


def log_axis(pts: Sequence[Point]) -> bool:
    """Whether a panel reads better on a log axis: every bound and the bar positive and the
    values spanning more than :data:`LOG_SPAN`."""
    lows = [p.number.low for p in pts] + [p.number.bar - p.number.band for p in pts]
    highs = [p.number.high for p in pts] + [p.number.bar + p.number.band for p in pts]
    return min(lows) > 0 and max(highs) / min(lows) > LOG_SPAN


def draw(table: Mapping[str, Sequence[Claim]], stem: str | Path) -> list[Path]:
    """Draw the figure and save it as ``stem.png`` and ``stem.svg``
    (:func:`geolib.report.plotting.savefig`, its checks recorded in the PNG); with no decided
    number at all, a figure that says so. Returns the paths."""
    import matplotlib.pyplot as plt
    from matplotlib.lines import Line2D
    from matplotlib.ticker import MaxNLocator

    from geolib.report import plotting

    plotting.use_style()
    groups = panels_of(points(table))
    if not groups:
        fig, ax = plt.subplots(figsize=(plotting.FIGURE_WIDTH, 1.0))
        ax.axis("off")
        ax.text(0.5, 0.5, "no claim has been decided on an interval yet", ha="center")
        paths = plotting.savefig(fig, stem, plotting.figure_problems(fig))
        plt.close(fig)
        return paths
    sizes = [len(g) for g in groups.values()]
    fig, axes = plt.subplots(
        len(groups),
        1,
        figsize=(plotting.FIGURE_WIDTH, 0.9 + 0.26 * sum(sizes) + 0.55 * len(groups)),
        gridspec_kw={"height_ratios": [n + 1.2 for n in sizes]},
        squeeze=False,
    )
    for ax, (title, pts) in zip(axes[:, 0], groups.items(), strict=True):
        y = list(range(len(pts)))[::-1]
        for yi, p in zip(y, pts, strict=True):
            colour = STATUS_COLOURS.get(p.status, "black")
            n = p.number
            if title == MATH_PANEL:  # each check its own bar, drawn on its row
                ax.plot([n.bar, n.bar], [yi - 0.4, yi + 0.4], color="black", ls="--", lw=1)
                if n.band:
                    ax.fill_betweenx(
                        [yi - 0.4, yi + 0.4], n.bar - n.band, n.bar + n.band, color="black",
                        alpha=0.08, lw=0,
                    )  # fmt: skip
            ax.plot([n.low, n.high], [yi, yi], color=colour, lw=2.2, solid_capstyle="butt")
            ax.plot([n.estimate], [yi], "o", color=colour, ms=5.5)
        bar, band = pts[0].number.bar, pts[0].number.band
        if title != MATH_PANEL:
            ax.axvline(bar, color="black", ls="--", lw=1)
            if band:
                ax.axvspan(bar - band, bar + band, color="black", alpha=0.08, lw=0)
        if log_axis(pts):
            ax.set_xscale("log")
        else:
            ax.xaxis.set_major_locator(MaxNLocator(nbins=X_TICKS))
        ax.set_yticks(y, [p.label for p in pts], fontsize="small")
        ax.set_ylim(-0.7, len(pts) - 0.3)
        ax.set_title(title, loc="left", fontsize="small")
        ax.grid(axis="y", visible=False)
    handles = [
        Line2D([], [], color=c, marker="o", lw=2.2, label=s)
        for s, c in STATUS_COLOURS.items()
        if any(p.status == s for g in groups.values() for p in g)
    ]
    # centred on the figure, not under the last panel (which the labels push to the right)
    fig.legend(handles=handles, loc="outside lower center", ncols=len(handles), frameon=False)
    problems = plotting.figure_problems(fig)
    paths = plotting.savefig(fig, stem, problems)
    plt.close(fig)
    return paths


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) < 1:
        print(__doc__, file=sys.stderr)
        return 2
    draw(read_claims(argv[1:]), argv[0])
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
