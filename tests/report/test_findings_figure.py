"""geolib.report.findings_figure: every decided number against its bar, one panel per bar."""

import pytest
from PIL import Image

from geolib.report import plotting
from geolib.report.findings_figure import (
    MATH_PANEL,
    STATUS_COLOURS,
    draw,
    log_axis,
    main,
    panels_of,
    points,
)
from geolib.verdicts.claims import Claim, read_claims, write_claims
from geolib.verdicts.rules import (
    CLAIMS,
    DESCRIPTION,
    MATH_CHECK,
    NOT_RUN,
    STATUSES,
    Threshold,
    Verdict,
    WithinTolerance,
)


def _row(cid: str, numbers, status: str | None = None, **kw) -> Claim:
    """A row with ``numbers`` (a verdict's, or labelled ones), its status theirs unless given."""
    numbers = numbers.numbers if isinstance(numbers, Verdict) else tuple(numbers)
    status = status or (numbers[0].status if numbers else "inconclusive")
    return Claim(cid, status, chapter="ch", scale="3 models", numbers=tuple(numbers), **kw)


def _table(rows: list[Claim]) -> dict[str, list[Claim]]:
    table = {cid: [] for cid in CLAIMS}
    for r in rows:
        table[r.claim_id].append(r)
    return table


HALF = Threshold(0.5, "more than half")
ZERO = Threshold(0.0, "an effect")


def test_every_status_a_row_can_have_has_a_colour():
    assert set(STATUS_COLOURS) == set(STATUSES) - {NOT_RUN}


def test_points_keep_claim_order_skip_descriptions_and_label_each_check():
    a7 = HALF.decide(1.0, 0.54, 1.0).labelled("peaks early") + ZERO.decide(
        0.66, 0.23, 1.09
    ).labelled("beyond the null")
    table = _table(
        [
            _row("B2", ZERO.decide(0.47, 0.28, 0.7).labelled("D")),
            _row("A7", a7, status="reproduced"),
            _row("A4", HALF.decide(0.9, 0.8, 0.95), evidence=DESCRIPTION),
            _row("A1", [], status="not reproduced"),  # no interval: no point
        ]
    )
    pts = points(table)
    assert [(p.claim_id, p.label) for p in pts] == [
        ("A7", "A7 peaks early"),
        ("A7", "A7 beyond the null"),
        ("B2", "B2 D"),
    ]
    assert [p.status for p in pts] == ["reproduced", "reproduced", "reproduced"]
    assert [p.panel for p in pts] == ["against 0.5", "against 0", "against 0"]


def test_panels_are_ordered_by_bar_with_the_math_checks_last():
    band = WithinTolerance(1.0, 0.1, "slope one").decide(1.0, 0.95, 1.05)
    table = _table(
        [
            _row("A2", band, evidence=MATH_CHECK),
            _row("A4", HALF.decide(0.67, 0.44, 0.84)),
            _row("B1", ZERO.decide(-0.1, -0.2, 0.01)),
            _row("A6", WithinTolerance(1.0, 0.1, "x").decide(1.97, 1.14, 3.41)),
        ]
    )
    groups = panels_of(points(table))
    assert list(groups) == ["against 0", "against 0.5", "against 1 ± 0.1", MATH_PANEL]
    assert [p.claim_id for p in groups[MATH_PANEL]] == ["A2"]


def test_a_long_label_is_shortened():
    long = "ΔR² (held out) of w_erank for loss_id_test beyond the configuration"
    (p,) = points(_table([_row("B1", ZERO.decide(0.1, 0.05, 0.2).labelled(long))]))
    assert len(p.label) <= 34 and p.label.startswith("B1 ΔR²") and p.label.endswith("…")


@pytest.mark.parametrize(
    ("values", "bar", "log"),
    [
        ([(2.0, 1.0, 3.0)], 1.0, False),  # one decade
        ([(50.0, 10.0, 80.0), (0.9, 0.5, 1.2)], 1.0, True),  # 160x
        ([(50.0, -1.0, 80.0)], 1.0, False),  # a bound at or below 0
    ],
)
def test_a_panel_goes_to_a_log_axis_only_when_positive_and_wide(values, bar, log):
    rule = Threshold(bar, "x")
    pts = points(_table([_row("A6", rule.decide(*v)) for v in values]))
    assert log_axis(pts) is log


def test_the_figure_is_drawn_saved_and_reads_in_the_column(tmp_path):
    band = WithinTolerance(-1.0, 0.05, "slope").decide(-0.99, -1.0, -0.98)
    table = _table(
        [
            _row("A1", band, evidence=MATH_CHECK),
            _row("A4", HALF.decide(0.67, 0.44, 0.84)),
            _row("A7", HALF.decide(1.0, 0.54, 1.0).labelled("peaks early")),
            _row("B3", HALF.decide(0.0, 0.0, 0.37).labelled("D"), status="inconclusive"),
            _row("B8", ZERO.decide(-0.48, -0.68, -0.2).labelled("D: R² gap")),
        ]
    )
    png, svg = draw(table, tmp_path / "forest")
    assert png.is_file() and svg.is_file()
    with Image.open(png) as im:
        assert plotting.PROBLEMS_KEY not in im.text  # fits the column, no text too small
        assert im.width // plotting.SAVE_SCALE <= plotting.CONTENT_WIDTH_PX
    assert b"A4" in svg.read_bytes() and b"B8 D: R" in svg.read_bytes()


def test_with_no_decided_number_the_figure_says_so(tmp_path):
    png, svg = draw(_table([_row("A1", [], status="inconclusive")]), tmp_path / "none")
    assert png.is_file()
    assert b"no claim has been decided on an interval yet" in svg.read_bytes()


def test_main_reads_the_claim_files(tmp_path):
    path = write_claims(tmp_path / "c.json", [_row("A4", HALF.decide(0.7, 0.6, 0.8))])
    assert main([str(tmp_path / "f"), str(path)]) == 0
    assert (tmp_path / "f.png").is_file()
    assert read_claims([path])["A4"][0].numbers[0].estimate == 0.7
    assert main([]) == 2
