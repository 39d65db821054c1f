"""geolib.stage: the command line every analysis stage shares, and its progress lines."""

import pytest
import yaml

from geolib.stage import progress_line, stage


def test_stage_reads_its_section_with_common_and_extra_options(tmp_path, capsys):
    params = tmp_path / "p.yaml"
    params.write_text(yaml.safe_dump({"common": {"seed": 3}, "demo": {"n": 2}, "other": {"k": 1}}))

    def options(parser):
        parser.add_argument("--flag", type=int, default=0)

    st = stage("Demo stage.\n\nMore.", "demo", ["--params", str(params), "--flag", "5"], options)
    assert st.params == {"seed": 3, "n": 2} and st.args.flag == 5
    assert st.section_of("other") == {"seed": 3, "k": 1}
    assert st.done({"n": 2, "secret": 1}, hide=("secret",)) == 0
    out, err = capsys.readouterr()
    assert '"n": 2' in out and "secret" not in out and err.startswith("demo: ")
    with pytest.raises(KeyError):
        stage("Demo.", "missing", ["--params", str(params)])


def test_progress_line_eta_at_the_pace_so_far():
    assert progress_line("sweep", 2, 8, 120.0) == "sweep: 2/8 done, 2.0 min elapsed, ETA 6.0 min"
    assert progress_line("sweep", 0, 8, 0.0).endswith("ETA ?")
    with pytest.raises(ValueError):
        progress_line("sweep", 9, 8, 1.0)
