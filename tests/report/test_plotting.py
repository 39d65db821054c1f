"""Figures are saved byte-for-byte reproducibly, and show() displays the file it saved."""

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

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
    from geolib.report import provenance

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
    assert plotting.show(fig, tmp_path / "figures" / "line") is None  # no path box on the page
    png = tmp_path / "figures" / "line.png"
    assert png == tmp_path / "figures" / "line.png" and png.is_file()
    assert (tmp_path / "figures" / "line.svg").is_file()
    assert len(shown) == 2 and shown[0].data == png.read_bytes()
    line = shown[1].data
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
        plotting.show(fig, tmp_path / "figures" / "line")
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


def test_interval_points_draws_intervals_that_miss_their_point():
    """A percentile interval may lie beside its estimate (errorbar refuses that)."""
    fig, ax = plt.subplots()
    plotting.interval_points(ax, [0.01, 0.2], [0, 1], xlow=[0.02, 0.1], xhigh=[0.3, 0.4])
    (segments,) = [c for c in ax.collections]
    assert np.allclose(segments.get_segments()[0], [[0.02, 0], [0.3, 0]])
    assert ax.lines[0].get_xdata().tolist() == [0.01, 0.2]
    plt.close(fig)
