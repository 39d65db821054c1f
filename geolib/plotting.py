"""One figure style, and saving figures byte-for-byte reproducibly (PNG for the book + SVG).

The backend is left alone: the notebook kernel's inline backend puts figures in the book, and
matplotlib falls back to Agg by itself where there is no display.
"""

from __future__ import annotations

from pathlib import Path

import matplotlib.pyplot as plt
import seaborn as sns

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
    fig.savefig(png, metadata={"Software": None})
    fig.savefig(svg, metadata={"Date": None, "Creator": None})
    return [png, svg]


def show(fig: plt.Figure, stem: str | Path) -> Path:
    """Save ``fig`` (:func:`savefig`), close it and display the saved PNG; return its path.

    The one way a chapter puts a figure on the page: what the book shows is the file on disk.
    """
    from IPython.display import Image, display

    png = savefig(fig, stem)[0]
    plt.close(fig)
    display(Image(filename=str(png)))
    return png
