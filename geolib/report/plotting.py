"""One figure style, sized for the book's page and checked before it is saved; figures saved
byte-for-byte reproducibly (PNG for the book + SVG) with their provenance and a caption; tables
shown with a link to their file.

Every figure is drawn for the book's text column: at most :data:`CONTENT_WIDTH_PX` CSS px wide
at 1× (figure inches × :data:`DPI_1X`), saved at :data:`SAVE_SCALE`× for sharp screens, with no
text under :data:`MIN_FONT_PX` at 1× and no tick or axis label overlapping another.
:func:`show` records in the PNG what breaks one of these (:func:`figure_problems` says which)
and shows a warning under the figure; the book check (``scripts/check_book.py``, in CI) fails on
it; :func:`panels` lays out many panels in rows that fit the column.

The backend is left alone: the notebook kernel's inline backend puts figures in the book, and
matplotlib falls back to Agg by itself where there is no display.
"""

from __future__ import annotations

import hashlib
import html
import itertools
import warnings
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import seaborn as sns
from matplotlib.text import Text
from matplotlib.transforms import Bbox
from PIL import Image as PILImage

from geolib.files import write_atomic

#: Colour-blind-safe palette used by every figure.
PALETTE = sns.color_palette("colorblind")
#: The book's text column at a 1280 px window (CSS px; measured in the built book: 676).
CONTENT_WIDTH_PX = 676
#: CSS px per figure inch at 1× (the figure's own dpi).
DPI_1X = 100
#: PNGs are saved at this multiple of 1× (sharp on dense screens); the book shows them at 1×.
SAVE_SCALE = 2
#: The smallest text, in CSS px at 1×, a figure may hold (9 px: axis tick labels still read).
MIN_FONT_PX = 9.0
#: Blank border saved around a figure's tight bounding box, inches each side.
PAD_INCHES = 0.04
#: Width, in inches, of a figure that fills the column once saved with its border; the default
#: figure size uses it.
FIGURE_WIDTH = CONTENT_WIDTH_PX / DPI_1X - 2 * PAD_INCHES
#: PNG text chunk recording a figure's smallest font in CSS px at 1× (``scripts/check_book.py``
#: reads it to check the text size the reader sees).
FONT_KEY = "geolib:min-font-px"
#: PNG text chunk holding what :func:`figure_problems` found when the figure was saved (absent
#: when nothing): ``scripts/check_book.py`` fails the book on it.
PROBLEMS_KEY = "geolib:problems"


def use_style() -> None:
    """Apply the project style. Fixed SVG hash salt and no dates → identical bytes per run.

    Figures default to the column's width and use constrained layout (panels, labels and
    legends placed so they do not overlap); fonts are ~10 pt (14 px at 1×)."""
    sns.set_theme(context="notebook", style="whitegrid", palette=PALETTE, font_scale=0.85)
    plt.rcParams.update(
        {
            "figure.figsize": (FIGURE_WIDTH, 4.0),
            "figure.dpi": DPI_1X,
            "figure.constrained_layout.use": True,
            "savefig.dpi": DPI_1X * SAVE_SCALE,
            "savefig.bbox": "tight",
            "savefig.pad_inches": PAD_INCHES,
            "axes.titlesize": "medium",
            "axes.labelsize": "medium",
            "legend.fontsize": "small",
            "svg.hashsalt": "geolib",
            "svg.fonttype": "none",
            "path.simplify": False,
        }
    )


def panels(
    n: int,
    *,
    ncols: int = 2,
    height: float = 3.0,
    sharex: bool | str = False,
    sharey: bool | str = False,
) -> tuple[plt.Figure, np.ndarray]:
    """A column-wide figure of ``n`` panels, ``ncols`` per row (fewer if ``n`` is smaller),
    each row ``height`` inches tall; returns the figure and the ``n`` axes as a flat array in
    reading order (unused grid cells removed). For the many-model figures that used to be one
    wide row."""
    if isinstance(n, bool) or int(n) != n or n < 1:
        raise ValueError(f"panels needs a positive number of panels, got {n!r}")
    if isinstance(ncols, bool) or int(ncols) != ncols or ncols < 1:
        raise ValueError(f"ncols must be a positive integer, got {ncols!r}")
    cols = min(int(ncols), int(n))
    rows = -(-int(n) // cols)
    fig, axes = plt.subplots(
        rows,
        cols,
        figsize=(FIGURE_WIDTH, height * rows),
        sharex=sharex,
        sharey=sharey,
        squeeze=False,
    )
    flat = axes.ravel()
    for ax in flat[n:]:
        fig.delaxes(ax)
    return fig, flat[:n]


def legend_below(ax, **kwargs):
    """A legend centred under ``ax``'s x label. The tick labels and the x label take a height
    fixed in points, whatever the panel's size, so the legend is offset by that many points
    (an offset in axes fractions lands on the label in a short panel); constrained layout then
    makes room for it. ``kwargs`` go to ``ax.legend``."""
    from matplotlib.font_manager import FontProperties
    from matplotlib.transforms import offset_copy

    rc = plt.rcParams

    def points(key: str) -> float:
        return FontProperties(size=rc[key]).get_size_in_points()

    drop = rc["xtick.major.size"] + rc["xtick.major.pad"] + 1.6 * points("xtick.labelsize")
    if ax.get_xlabel():
        drop += rc["axes.labelpad"] + 1.4 * points("axes.labelsize")
    below = offset_copy(ax.transAxes, fig=ax.figure, y=-(drop + 2.0), units="points")
    return ax.legend(loc="upper center", bbox_to_anchor=(0.5, 0.0), bbox_transform=below, **kwargs)


def _texts(fig: plt.Figure) -> list[Text]:
    """Every text artist drawn with the figure (visible, non-empty)."""
    seen = fig.findobj(Text)
    return [t for t in seen if t.get_visible() and t.get_text().strip() and t.figure is fig]


def min_font_px(fig: plt.Figure, *, drawn: bool = False) -> float:
    """The smallest font of the figure's visible text, in CSS px at 1× (points × DPI_1X / 72).
    ``drawn``: the figure is drawn as it stands (tick labels exist only once drawn)."""
    if not drawn:
        fig.draw_without_rendering()
    sizes = [t.get_fontsize() for t in _texts(fig)]
    return min(sizes) * DPI_1X / 72.0 if sizes else float("inf")


def _shown_ticklabels(ax, which: str, *, minor_only: bool = False) -> list[Text]:
    """The tick labels of ``ax``'s x or y axis that are drawn (inside the view, non-empty);
    only the minor ticks' with ``minor_only``."""
    axis = ax.xaxis if which == "x" else ax.yaxis
    lo, hi = sorted(ax.get_xlim() if which == "x" else ax.get_ylim())
    ticks = (
        axis.get_minor_ticks() if minor_only else axis.get_major_ticks() + axis.get_minor_ticks()
    )
    out = []
    for tick in ticks:
        label = tick.label1
        if not (label.get_visible() and tick.get_visible() and label.get_text().strip()):
            continue
        if lo - 1e-12 * abs(lo) <= tick.get_loc() <= hi + 1e-12 * abs(hi):
            out.append(label)
    return out


def _overlap(a: Bbox, b: Bbox, slack: float = 1.0) -> bool:
    """Whether two boxes (display px) overlap by more than ``slack`` px each way."""
    return min(a.x1, b.x1) - max(a.x0, b.x0) > slack and min(a.y1, b.y1) - max(a.y0, b.y0) > slack


def label_overlaps(fig: plt.Figure, *, drawn: bool = False) -> list[str]:
    """Pairs of labels that overlap once drawn: tick labels of one axis among themselves
    (unrotated ones: a rotated label's box is not its ink), every axis label, title, tick
    label and legend against those of the other panels and the figure's own titles, and each
    legend against its own panel's labels (a legend placed below a panel over its x label).
    ``drawn``: as :func:`min_font_px`."""
    renderer = fig.canvas.get_renderer()
    if not drawn:
        fig.draw_without_rendering()
    found: list[str] = []
    boxes: list[tuple[str, int, Bbox]] = []  # (what, owner panel, box)
    for i, ax in enumerate(fig.axes):
        for which in ("x", "y"):
            labels = _shown_ticklabels(ax, which)
            ext = [(t, t.get_window_extent(renderer)) for t in labels]
            flat = [(t, e) for t, e in ext if t.get_rotation() % 180 == 0]
            for (ta, ea), (tb, eb) in itertools.combinations(flat, 2):
                if _overlap(ea, eb):
                    found.append(f"{which} tick labels {ta.get_text()!r} and {tb.get_text()!r}")
            boxes += [(f"tick label {t.get_text()!r}", i, e) for t, e in ext]
        for t in (ax.xaxis.label, ax.yaxis.label, ax.title):
            if t.get_visible() and t.get_text().strip():
                boxes.append((f"label {t.get_text()!r}", i, t.get_window_extent(renderer)))
        legend = ax.get_legend()
        if legend is not None and legend.get_visible():
            boxes.append(("a legend", i, legend.get_window_extent(renderer)))
    for t in (fig._suptitle, fig._supxlabel, fig._supylabel):
        if t is not None and t.get_visible() and t.get_text().strip():
            boxes.append((f"figure label {t.get_text()!r}", -1, t.get_window_extent(renderer)))

    def where(owner: int) -> str:
        return "the figure" if owner < 0 else f"panel {owner + 1}"

    for (wa, oa, ea), (wb, ob, eb) in itertools.combinations(boxes, 2):
        legend = "a legend" in (wa, wb)  # a panel's own legend must clear its labels too
        if (oa != ob or legend) and _overlap(ea, eb):
            found.append(f"{wa} ({where(oa)}) and {wb} ({where(ob)})")
    return found


def thin_minor_labels(fig: plt.Figure) -> int:
    """Drop the minor tick labels of each log axis whose labels would overlap (matplotlib labels
    the minor ticks of an axis spanning about a decade or less, ``2×10¹ 3×10¹ …``, whatever the
    room); the major labels stay. Returns how many axes were thinned."""
    from matplotlib.ticker import NullFormatter

    renderer = fig.canvas.get_renderer()
    fig.draw_without_rendering()
    thinned = 0
    for ax in fig.axes:
        for which, axis in (("x", ax.xaxis), ("y", ax.yaxis)):
            if axis.get_scale() not in ("log", "symlog"):
                continue
            labels = _shown_ticklabels(ax, which, minor_only=True)
            boxes = [t.get_window_extent(renderer) for t in labels]
            if any(_overlap(a, b) for a, b in itertools.combinations(boxes, 2)):
                axis.set_minor_formatter(NullFormatter())
                thinned += 1
    return thinned


def figure_problems(fig: plt.Figure, *, drawn: bool = False) -> list[str]:
    """Why ``fig`` would not read in the book's column (empty when it reads): wider than
    :data:`CONTENT_WIDTH_PX` at 1× (as saved: tight bounding box), text below
    :data:`MIN_FONT_PX`, or labels that overlap (:func:`label_overlaps`). ``drawn``: as
    :func:`min_font_px`."""
    if not drawn:
        fig.draw_without_rendering()
    tight = fig.get_tightbbox(fig.canvas.get_renderer())  # inches
    width = (tight.width + 2 * PAD_INCHES) * DPI_1X  # the saved width in px at 1×
    problems = []
    if width > CONTENT_WIDTH_PX + 0.5:
        problems.append(
            f"{width:.0f} px wide at 1×, wider than the book's column ({CONTENT_WIDTH_PX} px): "
            "draw it at figsize width <= plotting.FIGURE_WIDTH, many panels with "
            "plotting.panels()"
        )
    small = sorted(
        {
            (round(t.get_fontsize() * DPI_1X / 72, 1), t.get_text()[:30])
            for t in _texts(fig)
            if t.get_fontsize() * DPI_1X / 72 < MIN_FONT_PX
        }
    )
    if small:
        problems.append(
            f"{len(small)} text(s) below {MIN_FONT_PX:g} px, e.g. {small[0][1]!r} at "
            f"{small[0][0]} px: use fontsize 'x-small' or larger"
        )
    overlaps = label_overlaps(fig, drawn=True)
    if overlaps:
        more = f" and {len(overlaps) - 3} more" if len(overlaps) > 3 else ""
        problems.append("overlapping labels: " + "; ".join(overlaps[:3]) + more)
    return problems


def savefig(
    fig: plt.Figure, stem: str | Path, problems: list[str] | None = None, *, drawn: bool = False
) -> list[Path]:
    """Save ``fig`` as ``stem.png`` (at :data:`SAVE_SCALE`×, its smallest font recorded under
    :data:`FONT_KEY`, and ``problems`` under :data:`PROBLEMS_KEY` when there are any) and
    ``stem.svg``, with no timestamps; return the paths. ``drawn``: as :func:`min_font_px`."""
    stem = Path(stem)
    stem.parent.mkdir(parents=True, exist_ok=True)
    png, svg = stem.with_suffix(".png"), stem.with_suffix(".svg")
    meta = {FONT_KEY: f"{min_font_px(fig, drawn=drawn):.2f}"}
    if problems:
        meta[PROBLEMS_KEY] = "; ".join(problems)
    write_atomic(png, lambda tmp: fig.savefig(tmp, metadata={"Software": None, **meta}))
    write_atomic(svg, lambda tmp: fig.savefig(tmp, metadata={"Date": None, "Creator": None}))
    return [png, svg]


def show(fig: plt.Figure, stem: str | Path, *, caption: str) -> None:
    """Check ``fig`` reads in the book (overlapping minor labels of a log axis dropped:
    :func:`thin_minor_labels`; what is still wrong: :func:`figure_problems`), save it
    (:func:`savefig`) with its provenance record as ``stem.png`` and ``stem.svg``, close it and
    display the saved PNG at 1×, its ``caption`` (what to see in it; inline HTML allowed) and
    the provenance line under it. Returns nothing: as a cell's last expression a returned path
    was shown on the page.

    A figure with problems is saved and shown all the same, with a warning under it and the
    problems recorded in its PNG (:data:`PROBLEMS_KEY`): a crowded axis in a long paper-scale
    run must not cost the run, and the book check (CI) fails on it.

    The one way a chapter puts a figure on the page: what the book shows is the file on disk,
    and a figure cannot be saved without the provenance of its chapter run
    (:func:`geolib.report.outputs.record_figure` refuses a folder without a stage record).
    """
    from IPython.display import HTML, Image, display

    from geolib.report.outputs import caption_html, record_figure

    stem = Path(stem)
    if not caption.strip():
        raise ValueError(f"figure {stem.name}: give it a caption that says what to see")
    if not (stem.parent / "_stage.provenance.json").is_file():
        record_figure(stem, [])  # raises, naming what to do, before anything is written
    if thin_minor_labels(fig):  # draws the figure; drawn again only when labels were dropped
        fig.draw_without_rendering()
    problems = figure_problems(fig, drawn=True)
    if problems:  # saved and shown all the same: a long run is not lost to a crowded axis
        message = f"figure {stem.name} does not read in the book: " + "; ".join(problems)
        warnings.warn(message, stacklevel=2)
    files = savefig(fig, stem, problems, drawn=True)
    plt.close(fig)
    record = record_figure(stem, files)
    with PILImage.open(files[0]) as im:
        width = im.width // SAVE_SCALE
    display(Image(filename=str(files[0]), width=width))
    flag = (
        '<p class="figure-problems"><strong>This figure does not read as drawn:</strong> '
        + html.escape("; ".join(problems))
        + "</p>"
        if problems
        else ""
    )
    display(HTML(f'<p class="figure-caption">{caption}</p>' + flag + caption_html(record)))


#: Where the book ships the result files, relative to a chapter page (``scripts/build_book.py``
#: copies ``data/results`` there).
DATA_LINK_ROOT = "../_data"


def show_table(
    table: pd.DataFrame, source: str | Path, *, max_rows: int = 30, digits: int = 3
) -> None:
    """Display ``table`` as an HTML table (at most ``max_rows`` rows, floats to ``digits``)
    with a download link to the file it comes from, ``source`` (repository-relative, e.g.
    ``data/results/<stage>/<table>.csv``), which the built book ships offline."""
    from IPython.display import HTML, display

    source = Path(source)
    if not source.is_file():
        raise FileNotFoundError(f"table source {source} does not exist")
    n = len(table)
    shown = table.head(max_rows)
    tag = hashlib.sha256(source.as_posix().encode()).hexdigest()[:8]  # stable element ids
    styler = shown.style.hide(axis="index").format(precision=digits).set_uuid(tag)
    note = f"first {max_rows} of {n} rows" if n > max_rows else f"{n} rows"
    href = f"{DATA_LINK_ROOT}/{source.as_posix()}"
    link = (
        f'<p class="table-source"><small>{note} · download <a class="table-download" '
        f'href="{href}" download>{source.name}</a></small></p>'
    )
    display(HTML(styler.to_html() + link))


def interval_points(
    ax,
    x,
    y,
    *,
    xlow=None,
    xhigh=None,
    ylow=None,
    yhigh=None,
    fmt: str = "o",
    color=None,
    label: str | None = None,
    ms: float = 4,
    lw: float = 0.8,
) -> int:
    """Points ``(x, y)`` with their intervals drawn as lines from low to high (along x, y or
    both; a NaN bound draws no line). A bootstrap interval may lie beside its point (a biased
    statistic, kept as drawn by :mod:`geolib.measure.stats`): such points are drawn hollow, so
    the figure shows them, and their number is returned for the caption."""
    miss = np.zeros(np.shape(x), dtype=bool)
    for point, low, high in ((x, xlow, xhigh), (y, ylow, yhigh)):
        if low is None:
            continue
        p, lo, hi = (np.asarray(v, dtype=float) for v in (point, low, high))
        miss |= (lo > p + 1e-12 * np.abs(p)) | (p > hi + 1e-12 * np.abs(p))
    if xlow is not None:
        ax.hlines(y, xlow, xhigh, color=color, lw=lw)
    if ylow is not None:
        ax.vlines(x, ylow, yhigh, color=color, lw=lw)
    xs, ys = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    ax.plot(xs[~miss], ys[~miss], fmt, color=color, ms=ms, label=label, linestyle="none")
    if miss.any():
        ax.plot(xs[miss], ys[miss], fmt, color=color, ms=ms, mfc="none", linestyle="none")
    return int(miss.sum())
