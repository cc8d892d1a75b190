"""The loop-feature cache between tuning sessions (kernels.tuning.features.disk) under bad input and
failure: a damaged or foreign file is ignored (a log line names it) and replaced; a cache folder
that cannot be written leaves the session going with its vectors (a log line names the path); two
sessions writing at once leave a whole file; a non-boolean option is refused naming it."""

from __future__ import annotations

import logging

import numpy as np
import pytest
from kbtest import private_cache
from null.test_features import features_picky  # noqa: F401 (registers the template)

from kernels import autotvm
from kernels.tuning import features as F
from kernels.tuning.features import disk


@pytest.fixture(autouse=True)
def _private_cache(tmp_path):
    with private_cache(tmp_path / "cache") as folder:
        yield folder


def _task():
    return autotvm.task.create("test/features_picky", args=(64,), target="c")


def _messages(caplog):
    return [r.getMessage() for r in caplog.records]


@pytest.mark.parametrize("content", [b"not an npz file", "foreign"])
def test_a_damaged_or_foreign_file_is_ignored_and_replaced(caplog, content):
    path = disk.file_for(_task(), "itervar")
    path.parent.mkdir(parents=True)
    if content == "foreign":  # an npz of vectors of another length
        np.savez(path, index=np.arange(2), vectors=np.zeros((2, 7), np.float32), failures=np.asarray("{}"))
    else:
        path.write_bytes(content)
    with caplog.at_level(logging.INFO, logger="autotvm"):
        ex = F.FeatureExtractor(_task(), "itervar", n_workers=1, disk_cache=True)
    assert ex.loaded == 0
    assert any(str(path) in m and "unreadable" in m for m in _messages(caplog)), _messages(caplog)
    rows = ex.get_many([0, 2])
    assert rows.shape == (2, F.feature_length("itervar")) and rows.any()
    again = F.FeatureExtractor(_task(), "itervar", n_workers=1, disk_cache=True)
    assert again.loaded == 2
    np.testing.assert_array_equal(again.get_many([0, 2]), rows)


def test_an_unwritable_cache_folder_leaves_the_session_going(caplog, _private_cache):
    _private_cache.mkdir()
    (_private_cache / "features").write_text("a file where the folder should be")
    ex = F.FeatureExtractor(_task(), "itervar", n_workers=1, disk_cache=True)
    with caplog.at_level(logging.INFO, logger="autotvm"):
        rows = ex.get_many([0, 1])
    assert rows.shape == (2, F.feature_length("itervar")) and ex.extracted == 2
    assert any("not written" in m and "features" in m for m in _messages(caplog)), _messages(caplog)


def test_two_sessions_writing_at_once_leave_a_whole_file():
    a = F.FeatureExtractor(_task(), "itervar", n_workers=1, disk_cache=True)
    b = F.FeatureExtractor(_task(), "itervar", n_workers=1, disk_cache=True)
    rows_a = a.get_many([0, 1, 2])
    rows_b = b.get_many([3, 4])  # b started before a wrote: its file replaces a's whole
    c = F.FeatureExtractor(_task(), "itervar", n_workers=1, disk_cache=True)
    assert sorted(c.cache) == [3, 4]
    np.testing.assert_array_equal(c.get_many([3, 4]), rows_b)
    np.testing.assert_array_equal(c.get_many([0, 1, 2]), rows_a)  # extracted again, the same vectors


def test_a_non_boolean_option_is_refused():
    with pytest.raises(TypeError, match="disk_cache must be True or False, got 'yes'"):
        F.FeatureExtractor(_task(), "itervar", disk_cache="yes")


@pytest.mark.parametrize("bad", [-1, True, 2.5, "all"])
def test_a_prefetch_count_that_is_not_a_count_is_refused(bad):
    from kernels import autotvm

    with pytest.raises(ValueError, match=rf"XGBTuner: feature_prefetch must be a count >= 0, got {bad!r}"):
        autotvm.tuner.XGBTuner(_task(), n_workers=1, feature_prefetch=bad)
