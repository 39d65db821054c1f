"""geolib.models.token_groups: which revisions each run is measured at, and bad sections refused
(the groups of hub tokenizers are checked against the fake hub in tests/test_fake_hub.py)."""

from __future__ import annotations

import pytest

from geolib.models.token_groups import revisions_of, token_groups

PAIRS = [["EleutherAI/pythia-160m", ["step0", "step4"]], ["org/other", ["main"]]]


def test_one_list_is_every_hub_runs_revisions_and_none_is_every_step_of_ours():
    assert revisions_of("org/model", ["step0", 1000]) == ["step0", 1000]
    assert revisions_of("org/model", ("step0",)) == ["step0"]
    assert revisions_of("runs/pythia", None) is None


def test_pairs_give_each_hub_run_its_own_revisions():
    assert revisions_of("EleutherAI/pythia-160m", PAIRS) == ["step0", "step4"]
    assert revisions_of("org/other", PAIRS) == ["main"]


def test_a_hub_run_without_a_pair_is_an_error_naming_it():
    with pytest.raises(ValueError, match="org/missing: no revisions given"):
        revisions_of("org/missing", PAIRS)


@pytest.mark.parametrize(
    "bad, error",
    [
        ("step0", TypeError),  # a string is not a list of revisions
        ({"org/model": ["step0"]}, TypeError),
        (["step0", ["org/model", ["step1"]]], ValueError),  # a mixture
        ([["org/model", "step1"]], ValueError),  # a pair's revisions must be a list
        ([["org/model", ["step1"], "extra"]], ValueError),
        ([["org/model", ["a"]], ["org/model", ["b"]]], ValueError),  # two lists for one run
    ],
)
def test_malformed_revisions_are_refused(bad, error):
    with pytest.raises(error):
        revisions_of("org/model", bad)


def test_a_section_without_runs_or_with_a_run_twice_is_refused():
    with pytest.raises(ValueError, match="at least one run"):
        token_groups([], tokens="t.npy")
    with pytest.raises(ValueError, match="listed twice"):
        token_groups(["org/a", "org/a"], tokens="t.npy")
