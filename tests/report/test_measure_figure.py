"""geolib.report.measure_figure: geolib measure's profiles in the book's style."""

import numpy as np
import pandas as pd
import pytest
from PIL import Image

from geolib.report import plotting
from geolib.report.measure_figure import middle_rank, profiles_figure


def _table(revisions=("step0", "step64"), texts=("id",), layers=4, ranks=(1, 4, 16)):
    rng = np.random.default_rng(0)
    rows = []
    for rev in revisions:
        for text in texts:
            for i in range(layers):
                row = {"model": "m", "revision": rev, "text": text, "layer_index": i}
                row |= {c: rng.uniform(0.1, 1) for c in ("erank", "isoscore", "mean_cosine")}
                for k in ranks:
                    e = rng.uniform(0.5, 20)
                    row |= {f"r_energy_k{k}": e, f"r_energy_k{k}_ci_low": e / 2}
                    row |= {f"r_energy_k{k}_ci_high": e * 2}
                    row[f"isoscore_after_tangent_k{k}"] = rng.uniform(0.1, 1)
                rows.append(row)
    return pd.DataFrame(rows)


def test_the_middle_rank_is_the_median_of_the_measured_ranks():
    assert middle_rank(_table(ranks=(1, 4, 16))) == 4
    assert middle_rank(_table(ranks=(2, 8))) == 8
    with pytest.raises(ValueError, match="no r_energy"):
        middle_rank(pd.DataFrame({"erank": [1.0]}))


def test_the_figure_is_saved_in_the_books_style_with_one_line_per_revision_and_text(
    tmp_path, monkeypatch
):
    drawn = {}
    close = plotting.plt.close

    def keep(fig):  # look at the figure before it is closed
        drawn["lines"] = [len(ax.get_lines()) for ax in fig.axes if ax.get_title()]
        close(fig)

    monkeypatch.setattr(plotting.plt, "close", keep)
    paths = profiles_figure(_table(texts=("id", "ood")), tmp_path / "profiles")
    assert [p.name for p in paths] == ["profiles.png", "profiles.svg"]
    # 2 revisions × 2 texts per panel (the R_energy panel adds its dotted line at 1)
    assert drawn["lines"] == [4, 4, 4, 5, 4]
    png = Image.open(paths[0])
    assert float(png.text[plotting.FONT_KEY]) >= plotting.MIN_FONT_PX
    assert plotting.PROBLEMS_KEY not in png.text
    # the column's width at the saved scale, not a fixed 5-panel row
    assert png.width <= plotting.CONTENT_WIDTH_PX * plotting.SAVE_SCALE


def test_a_table_that_is_not_geolib_measures_is_refused(tmp_path):
    with pytest.raises(ValueError, match="missing columns"):
        profiles_figure(pd.DataFrame({"erank": [1.0]}), tmp_path / "p")
    with pytest.raises(ValueError, match="missing columns"):
        profiles_figure(_table().iloc[:0], tmp_path / "p")
    assert not list(tmp_path.iterdir())
