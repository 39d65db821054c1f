"""Figures are saved byte-for-byte reproducibly, and show() displays the file it saved."""

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

from geolib import plotting  # noqa: E402


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


def test_show_displays_the_saved_png(tmp_path, monkeypatch):
    shown = []
    monkeypatch.setattr("IPython.display.display", lambda obj: shown.append(obj))
    fig, ax = plt.subplots()
    ax.plot([0, 1])
    png = plotting.show(fig, tmp_path / "figures" / "line")
    assert png == tmp_path / "figures" / "line.png" and png.is_file()
    assert (tmp_path / "figures" / "line.svg").is_file()
    assert len(shown) == 1 and shown[0].data == png.read_bytes()
    assert not plt.fignum_exists(fig.number), "the figure is closed once saved"
