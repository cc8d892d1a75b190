"""Bad input to the verdict side of kbench: each error names the thing at fault and changes nothing."""

from __future__ import annotations

import pytest

from harness import judge
from harness.stats import parse_fail_on
from harness.model import MeasureConfig
from harness.store import Store, StoreError, UnknownRun


class _Suite:
    name, path, sha256 = "s", None, None


@pytest.fixture
def store(tmp_path):
    with Store.open(tmp_path / "k.db") as st:
        yield st


@pytest.mark.parametrize("spec, words", [
    ("mean:3%", "bad rule 'mean:3%'"), ("median:0%", "above 0 %"), ("median:3", "bad rule 'median:3'"),
    ("median:3%,median:4%", "repeats the median threshold"), ("", "empty --fail-on spec"),
])
def test_bad_fail_on_names_the_rule(spec, words):
    with pytest.raises(ValueError, match="accepted rules") as err:
        parse_fail_on(spec)
    assert words in str(err.value)


def test_bad_run_specs_name_the_argument(store):
    run = store.begin_run(_Suite(), [], "local", MeasureConfig())
    with pytest.raises(ValueError, match=r"--baseline: no run 9 in"):
        judge.parse_runs(store, "9", "--baseline")
    with pytest.raises(ValueError, match=r"'nightly' is neither a run id nor a named baseline .*none"):
        judge.parse_runs(store, "nightly", "--baseline")
    with pytest.raises(ValueError, match="mixes run ids and names"):
        judge.parse_runs(store, f"{run},nightly", "--baseline")
    with pytest.raises(ValueError, match="empty run spec"):
        judge.parse_runs(store, " ", "--baseline")
    with pytest.raises(ValueError, match=r"share run ids \[1\]"):
        judge.judge(store, run, str(run))


def test_calibration_run_cannot_be_a_baseline(store):
    cal = store.begin_run(_Suite(), [], "local", MeasureConfig(), kind="calibration")
    with pytest.raises(StoreError, match=f"run {cal} is a calibration run"):
        store.set_baseline("nightly", cal)
    with pytest.raises(UnknownRun, match="no run 5"):
        store.set_baseline("nightly", 5)
    assert store.list_baselines() == []
