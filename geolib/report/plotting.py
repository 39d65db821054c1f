"""One figure style, saving figures byte-for-byte reproducibly (PNG for the book + SVG) with
their provenance, and tables shown with a link to their file.

The backend is left alone: the notebook kernel's inline backend puts figures in the book, and
matplotlib falls back to Agg by itself where there is no display.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

import matplotlib.pyplot as plt
import pandas as pd
import seaborn as sns

from geolib.files import write_atomic

#: Colour-blind-safe palette used by every figure.
PALETTE = sns.color_palette("colorblind")


def use_style() -> None:
    """Apply the project style. Fixed SVG hash salt and no dates → identical bytes per run."""
    sns.set_theme(context="notebook", style="whitegrid", palette=PALETTE)
    plt.rcParams.update(
        {
            "figure.dpi": 100,
            "savefig.dpi": 150,
            "savefig.bbox": "tight",
            "axes.titlesize": "medium",
            "axes.labelsize": "medium",
            "legend.fontsize": "small",
            "svg.hashsalt": "geolib",
            "svg.fonttype": "none",
            "path.simplify": False,
        }
    )


def savefig(fig: plt.Figure, stem: str | Path) -> list[Path]:
    """Save ``fig`` as ``stem.png`` and ``stem.svg`` with no timestamps; return the paths."""
    stem = Path(stem)
    stem.parent.mkdir(parents=True, exist_ok=True)
    png, svg = stem.with_suffix(".png"), stem.with_suffix(".svg")
    write_atomic(png, lambda tmp: fig.savefig(tmp, metadata={"Software": None}))
    write_atomic(svg, lambda tmp: fig.savefig(tmp, metadata={"Date": None, "Creator": None}))
    return [png, svg]


def show(fig: plt.Figure, stem: str | Path) -> None:
    """Save ``fig`` (:func:`savefig`) with its provenance record as ``stem.png`` and
    ``stem.svg``, close it and display the saved PNG with the provenance line under it.
    Returns nothing: as a cell's last expression a returned path was shown on the page.

    The one way a chapter puts a figure on the page: what the book shows is the file on disk,
    and a figure cannot be saved without the provenance of its chapter run
    (:func:`geolib.report.provenance.record_figure` refuses a folder without a stage record).
    """
    from IPython.display import HTML, Image, display

    from geolib.report.provenance import caption_html, record_figure

    stem = Path(stem)
    if not (stem.parent / "_stage.provenance.json").is_file():
        record_figure(stem, [])  # raises, naming what to do, before anything is written
    files = savefig(fig, stem)
    plt.close(fig)
    record = record_figure(stem, files)
    display(Image(filename=str(files[0])))
    display(HTML(caption_html(record)))


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
) -> None:
    """Points ``(x, y)`` with their intervals drawn as lines from low to high (along x, y or
    both). Unlike ``errorbar``, an interval need not contain its point: a percentile bootstrap
    interval of a biased statistic (R² near 0, a partial correlation) may lie beside it."""
    if xlow is not None:
        ax.hlines(y, xlow, xhigh, color=color, lw=lw)
    if ylow is not None:
        ax.vlines(x, ylow, yhigh, color=color, lw=lw)
    ax.plot(x, y, fmt, color=color, ms=ms, label=label, linestyle="none")
