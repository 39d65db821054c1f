"""Figures are saved byte-for-byte reproducibly, and show() displays the file it saved."""

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402
from PIL import Image  # noqa: E402

from geolib.report import plotting  # noqa: E402


def render(stem):
    plotting.use_style()
    x = np.linspace(0, 1, 50)
    fig, ax = plt.subplots(figsize=(4, 3))
    ax.plot(x, x**2, label="x²")
    ax.scatter(x[::5], np.sqrt(x[::5]), label="√x")
    ax.set(xlabel="x", ylabel="y", title="two renders")
    ax.legend()
    paths = plotting.savefig(fig, stem)
    plt.close(fig)
    return paths


def test_two_renders_are_byte_identical(tmp_path):
    a, b = render(tmp_path / "a" / "fig"), render(tmp_path / "b" / "fig")
    assert [p.suffix for p in a] == [".png", ".svg"]
    for pa, pb in zip(a, b, strict=True):
        assert pa.read_bytes() == pb.read_bytes(), f"{pa.name} differs between renders"
    svg = a[1].read_text()
    assert "<dc:date>" not in svg and "Creator" not in svg  # no timestamp, no tool stamp


def test_a_different_figure_gives_different_bytes(tmp_path):
    """The identity above is not vacuous: one changed point changes the file."""
    (png, _) = render(tmp_path / "a" / "fig")
    plotting.use_style()
    fig, ax = plt.subplots(figsize=(4, 3))
    ax.plot([0, 1], [0, 0.9])
    other = plotting.savefig(fig, tmp_path / "c" / "fig")[0]
    plt.close(fig)
    assert png.read_bytes() != other.read_bytes()


def _stage_record(folder, stage="demo", params=None):
    from geolib.report import outputs as provenance

    record = {
        "stage": stage,
        "overrides": {},
        "params": params or {stage: {"n": 1}},
        "params_sha256": "abcd1234",
        "git": {"commit": "0123456789abcdef", "dirty": True, "changed": ["x"]},
        "reproduce": f"dvc repro {stage}",
    }
    return provenance.write_stage_record(folder, record)


def test_show_displays_the_saved_png_and_its_provenance(tmp_path, monkeypatch):
    shown = []
    monkeypatch.setattr("IPython.display.display", lambda obj: shown.append(obj))
    _stage_record(tmp_path / "figures")
    fig, ax = plt.subplots()
    ax.plot([0, 1])
    assert (
        plotting.show(fig, tmp_path / "figures" / "line", caption="A line.") is None
    )  # no path box on the page
    png = tmp_path / "figures" / "line.png"
    assert png == tmp_path / "figures" / "line.png" and png.is_file()
    assert (tmp_path / "figures" / "line.svg").is_file()
    assert len(shown) == 2 and shown[0].data == png.read_bytes()
    assert shown[0].width == Image.open(png).width // plotting.SAVE_SCALE  # shown at 1×
    line = shown[1].data
    assert '<p class="figure-caption">A line.</p>' in line
    assert 'class="provenance"' in line and "abcd1234" in line
    assert "0123456 + uncommitted changes to x<" in line
    assert "<pre>dvc repro demo</pre>" in line
    assert not plt.fignum_exists(fig.number), "the figure is closed once saved"
    import json

    record = json.loads((tmp_path / "figures" / "line.provenance.json").read_text())
    assert record["figure"] == "line" and set(record["files"]) == {"line.png", "line.svg"}


def test_show_refuses_a_figure_without_provenance(tmp_path, monkeypatch):
    import pytest

    monkeypatch.setattr("IPython.display.display", lambda obj: None)
    fig, ax = plt.subplots()
    with pytest.raises(FileNotFoundError, match="no provenance"):
        plotting.show(fig, tmp_path / "figures" / "line", caption="A line.")
    assert not list((tmp_path / "figures").glob("*")) if (tmp_path / "figures").exists() else True
    plt.close(fig)


def test_show_table_links_its_file_and_caps_rows(tmp_path, monkeypatch):
    import pandas as pd
    import pytest

    shown = []
    monkeypatch.setattr("IPython.display.display", lambda obj: shown.append(obj))
    monkeypatch.chdir(tmp_path)
    src = tmp_path / "data" / "results" / "demo" / "t.csv"
    src.parent.mkdir(parents=True)
    table = pd.DataFrame({"a": range(50), "b": [0.123456] * 50})
    table.to_csv(src, index=False)
    plotting.show_table(table, "data/results/demo/t.csv", max_rows=10)
    html = shown[0].data
    assert html.count("<tr>") == 11  # header + 10 rows
    assert "first 10 of 50 rows" in html and "0.123<" in html
    assert 'href="../_data/data/results/demo/t.csv"' in html
    plotting.show_table(table, "data/results/demo/t.csv", max_rows=10)
    assert shown[1].data == html  # stable ids: the same bytes twice
    with pytest.raises(FileNotFoundError, match="does not exist"):
        plotting.show_table(table, "data/results/demo/missing.csv")


def test_interval_points_draws_intervals_and_shows_one_that_misses_its_point_hollow():
    """Intervals are drawn from low to high (NaN bounds draw nothing); an interval beside its
    point (a biased bootstrap, kept as drawn) is drawn with a hollow marker and counted."""
    fig, ax = plt.subplots()
    n = plotting.interval_points(ax, [0.05, 0.2], [0, 1], xlow=[0.02, np.nan], xhigh=[0.3, np.nan])
    (segments,) = [c for c in ax.collections]
    assert n == 0
    assert np.allclose(segments.get_segments()[0], [[0.02, 0], [0.3, 0]])
    assert ax.lines[0].get_xdata().tolist() == [0.05, 0.2]
    fig2, ax2 = plt.subplots()
    n = plotting.interval_points(ax2, [0, 1], [0.5, 0.01], ylow=[0.1, 0.02], yhigh=[0.9, 0.3])
    assert n == 1
    full, hollow = ax2.lines
    assert full.get_xdata().tolist() == [0.0] and hollow.get_xdata().tolist() == [1.0]
    assert hollow.get_markerfacecolor() == "none"
    plt.close(fig)
    plt.close(fig2)


def test_a_column_wide_figure_reads_and_records_its_smallest_font(tmp_path):
    plotting.use_style()
    fig, ax = plt.subplots()
    ax.plot([1, 2, 3], label="a")
    ax.set(xlabel="x", ylabel="y", title="default size")
    ax.legend(fontsize="x-small")
    assert plotting.figure_problems(fig) == []
    # legend "x-small" is the smallest text: 0.694 × 0.85 × 12 pt, in px at 1× (100/72 px per pt)
    expected = 0.694 * 0.85 * 12 * plotting.DPI_1X / 72
    assert plotting.min_font_px(fig) == pytest.approx(expected, rel=0.01)
    png = plotting.savefig(fig, tmp_path / "fig")[0]
    plt.close(fig)
    with Image.open(png) as im:
        assert float(im.text[plotting.FONT_KEY]) == pytest.approx(expected, abs=0.01)
        # saved at 2×: half its pixel width is what the column shows, and it fits
        assert im.width / plotting.SAVE_SCALE <= plotting.CONTENT_WIDTH_PX


def test_figure_problems_names_a_wide_figure_small_text_and_overlaps():
    plotting.use_style()
    wide, _ = plt.subplots(1, 4, figsize=(15, 3.6))
    (problem,) = plotting.figure_problems(wide)
    assert "1500 px wide" in problem and "panels()" in problem
    tiny, ax = plt.subplots()
    ax.text(0.5, 0.5, "tiny", fontsize=5)  # 5 pt = 6.9 px
    (problem,) = plotting.figure_problems(tiny)
    assert "'tiny' at 6.9 px" in problem
    crowded, ax = plt.subplots(figsize=(2, 2))
    ax.set_xticks(np.arange(30), [f"label{i}" for i in range(30)])
    (problem,) = plotting.figure_problems(crowded)
    assert problem.startswith("overlapping labels: x tick labels 'label0' and 'label1'")
    for f in (wide, tiny, crowded):
        plt.close(f)


def test_overlap_between_panels_is_found_and_constrained_layout_avoids_it():
    plotting.use_style()
    fig, axes = plt.subplots(1, 2, layout="none")
    fig.subplots_adjust(wspace=0.0)
    axes[1].set_ylabel("a long y label that runs into the left panel")
    axes[1].set_yticks([0, 1], ["a wide tick label", "another wide one"])
    assert any("panel 1" in p and "panel 2" in p for p in plotting.label_overlaps(fig))
    plt.close(fig)
    fig, axes = plt.subplots(1, 2)  # the style's constrained layout
    axes[1].set_ylabel("a long y label that runs into the left panel")
    axes[1].set_yticks([0, 1], ["a wide tick label", "another wide one"])
    assert plotting.label_overlaps(fig) == []
    plt.close(fig)


def test_a_legend_below_its_panel_over_the_x_label_is_found():
    plotting.use_style()
    fig, ax = plt.subplots()
    ax.plot([1, 2], label="a line")
    ax.set_xlabel("the x label")
    ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.05))
    assert any("a legend" in o and "'the x label'" in o for o in plotting.label_overlaps(fig))
    for height in (1.5, 4.0, 8.0):  # legend_below clears the label whatever the panel's height
        fig.set_size_inches(plotting.FIGURE_WIDTH, height)
        ax.set_xscale("log")  # taller tick labels (10^k)
        plotting.legend_below(ax, ncol=2)
        assert plotting.label_overlaps(fig) == []
        legend = ax.get_legend().get_window_extent(fig.canvas.get_renderer())
        label = ax.xaxis.label.get_window_extent(fig.canvas.get_renderer())
        assert 0 < label.y0 - legend.y1 < 20  # just under the label, in px
    plt.close(fig)


def test_panels_wraps_into_rows_of_the_column_width():
    plotting.use_style()
    fig, axes = plotting.panels(5, ncols=2, height=2.5, sharey=True)
    assert len(axes) == 5 and len(fig.axes) == 5  # the sixth grid cell removed
    assert fig.get_size_inches() == pytest.approx((plotting.FIGURE_WIDTH, 7.5))
    rows = sorted({round(ax.get_position().y0, 3) for ax in axes}, reverse=True)
    assert len(rows) == 3
    plt.close(fig)
    fig, axes = plotting.panels(1)
    assert len(axes) == 1
    plt.close(fig)
    for bad in (0, 2.5, True):
        with pytest.raises(ValueError, match="positive"):
            plotting.panels(bad)


def test_show_flags_an_unreadable_figure_and_refuses_one_without_caption(tmp_path, monkeypatch):
    shown = []
    monkeypatch.setattr("IPython.display.display", lambda obj: shown.append(obj))
    _stage_record(tmp_path / "figures")
    plotting.use_style()
    fig, _ = plt.subplots(1, 4, figsize=(15, 3))
    with pytest.warns(UserWarning, match="does not read in the book: 1500 px wide"):
        plotting.show(fig, tmp_path / "figures" / "wide", caption="Too wide.")
    with Image.open(tmp_path / "figures" / "wide.png") as im:  # saved, its problem recorded
        assert im.text[plotting.PROBLEMS_KEY].startswith("1500 px wide")
    assert "does not read as drawn" in shown[-1].data and "1500 px wide" in shown[-1].data
    fig, ax = plt.subplots()
    ax.plot([0, 1])
    plotting.show(fig, tmp_path / "figures" / "fine", caption="Fine.")
    with Image.open(tmp_path / "figures" / "fine.png") as im:
        assert plotting.PROBLEMS_KEY not in im.text
    assert "does not read" not in shown[-1].data
    fig, _ = plt.subplots()
    with pytest.raises(ValueError, match="caption"):
        plotting.show(fig, tmp_path / "figures" / "bare", caption=" ")
    plt.close(fig)


def test_overlapping_minor_labels_of_a_log_axis_are_dropped_and_majors_kept():
    plotting.use_style()
    fig, ax = plt.subplots(figsize=(3, 2))
    ax.set_xscale("log")
    ax.set_xlim(16, 256)  # about a decade: matplotlib labels the minor ticks
    fig.draw_without_rendering()
    minor = [t.get_text() for t in ax.xaxis.get_minorticklabels() if t.get_text()]
    assert minor and plotting.label_overlaps(fig)
    assert plotting.thin_minor_labels(fig) == 1
    assert plotting.label_overlaps(fig) == []
    fig.draw_without_rendering()
    assert not [t.get_text() for t in ax.xaxis.get_minorticklabels() if t.get_text()]
    assert [t.get_text() for t in ax.xaxis.get_majorticklabels() if t.get_text()]
    assert plotting.thin_minor_labels(fig) == 0  # nothing left to thin
    plt.close(fig)
