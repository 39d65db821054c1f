"""The figure of ``geolib measure``: per-layer profiles of one model, in the book's style.

``geolib measure`` writes its table (``measure.csv``: one row per revision, text and layer)
and then this figure beside it, so a model measured by hand looks like the chapters' figures
(:mod:`geolib.report.plotting`: the column's width, its fonts and palette, PNG and SVG).
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from geolib.report import plotting

#: columns every profile needs (``geolib.experiments.measure_model``'s rows)
NEEDED = ("model", "revision", "text", "layer_index", "erank", "isoscore", "mean_cosine")


def middle_rank(table: pd.DataFrame) -> int:
    """The middle of the ranks k the table holds R_energy for (``r_energy_k<k>`` columns)."""
    cols = [str(c) for c in table.columns]
    ks = sorted(int(c[10:]) for c in cols if c.startswith("r_energy_k") and c[10:].isdigit())
    if not ks:
        raise ValueError("the table holds no r_energy_k<k> column")
    return ks[len(ks) // 2]


def profiles_figure(table: pd.DataFrame, stem: str | Path) -> list[Path]:
    """Draw and save ``stem.png`` and ``stem.svg``: five panels against the layer — effective
    rank, IsoScore and mean cosine of the residual states H, R_energy at the middle rank k
    (log axis, its bootstrap interval shaded, the isotropic value 1 dotted) and the IsoScore of
    H after removing the tangent subspace T — one line per revision (and text, when several
    texts were measured). Returns the written paths."""
    missing = [c for c in NEEDED if c not in table.columns]
    if missing or table.empty:
        raise ValueError(f"a geolib measure table is needed; missing columns {missing}")
    k = middle_rank(table)
    panels = [
        ("erank", "effective rank of H"),
        ("isoscore", "IsoScore of H"),
        ("mean_cosine", "mean cosine of H"),
        (f"r_energy_k{k}", f"R_energy, k = {k}"),
        (f"isoscore_after_tangent_k{k}", f"IsoScore of H without T, k = {k}"),
    ]
    several_texts = table["text"].nunique() > 1
    plotting.use_style()
    fig, axes = plotting.panels(len(panels), ncols=2, height=2.6, sharex=True)
    for (revision, text), rows in table.groupby(["revision", "text"], sort=False):
        rows = rows.sort_values("layer_index")
        label = f"{revision}, {text}" if several_texts else str(revision)
        x = rows["layer_index"].to_numpy()
        for ax, (col, title) in zip(axes, panels, strict=True):
            (line,) = ax.plot(x, rows[col].to_numpy(), marker="o", ms=3, label=label)
            if col.startswith("r_energy"):
                lo, hi = rows[f"{col}_ci_low"].to_numpy(), rows[f"{col}_ci_high"].to_numpy()
                ax.fill_between(x, lo, hi, alpha=0.2, color=line.get_color(), lw=0)
            ax.set_title(title)
    for ax, (col, _) in zip(axes, panels, strict=True):
        ax.set_xlabel("layer")
        if col.startswith("r_energy"):
            ax.set_yscale("log")
            ax.axhline(1.0, color="grey", lw=0.8, ls=":")
    plotting.legend_below(axes[-1], title="revision, text" if several_texts else "revision")
    fig.suptitle(str(table["model"].iloc[0]))
    plotting.thin_minor_labels(fig)
    paths = plotting.savefig(fig, stem, plotting.figure_problems(fig))
    plotting.plt.close(fig)
    return paths
