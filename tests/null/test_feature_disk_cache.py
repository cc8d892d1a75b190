"""Loop features kept on disk between tuning sessions (kernels.tuning.features.disk): a second
extractor of the same task starts with the first one's vectors (and failures) and extracts nothing
again; another feature type, another task or changed code starts a new file (damaged files, an
unwritable folder and concurrent writers: tests/error/test_feature_cache_errors.py)."""

from __future__ import annotations

import os

import numpy as np
import pytest
from kbtest import private_cache
from test_features import features_picky  # noqa: F401 (registers the template)

from kernels import autotvm
from kernels.tuning import features as F
from kernels.tuning.features import disk


@pytest.fixture(autouse=True)
def _private_cache(tmp_path):
    with private_cache(tmp_path / "cache") as folder:
        yield folder


def _task(n=64):
    return autotvm.task.create("test/features_picky", args=(n,), target="c")


def test_a_second_session_extracts_nothing_again(_private_cache):
    task = _task()
    indices = list(range(len(task.config_space)))
    first = F.FeatureExtractor(task, "itervar", n_workers=1, disk_cache=True)
    rows = first.get_many(indices)
    assert first.loaded == 0 and first.extracted == len(indices) and len(first.failures) == 5
    files = list((_private_cache / "features").glob("*.npz"))
    assert len(files) == 1 and files[0] == first.disk_file
    second = F.FeatureExtractor(_task(), "itervar", n_workers=1, disk_cache=True)
    assert second.loaded == len(indices) and second.failures == first.failures
    again = second.get_many(indices[::-1])
    assert second.extracted == 0
    np.testing.assert_array_equal(again, rows[::-1])
    # the vectors are the ones extraction gives (an extractor without the file computes them anew)
    fresh = F.FeatureExtractor(_task(), "itervar", n_workers=1).get_many(indices)
    np.testing.assert_array_equal(fresh, rows)


def test_what_the_file_depends_on():
    a = disk.file_for(_task(64), "itervar")
    assert a == disk.file_for(_task(64), "itervar")
    assert a != disk.file_for(_task(64), "curve")
    assert a != disk.file_for(_task(128), "itervar")
    assert a != disk.file_for(autotvm.task.create("test/features_picky", args=(64,), target="cuda"), "itervar")
    # changed code: touching a loaded module of the project changes the fingerprint
    before = disk.code_fingerprint()
    path = disk.__file__
    st = os.stat(path)
    try:
        os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000_000))
        assert disk.code_fingerprint() != before
    finally:
        os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert disk.code_fingerprint() == before
    # a task without a workload tuple has no file
    assert disk.file_for(object(), "itervar") is None


def test_without_the_option_nothing_is_written(_private_cache):
    F.FeatureExtractor(_task(), "itervar", n_workers=1).get_many([0, 1])
    assert not (_private_cache / "features").exists()


def test_the_xgb_tuner_of_kbench_tune_keeps_its_features():
    from harness.tune.session import _make_tuner

    tuner = _make_tuner("xgb", _task(), seed=0, n_trial=16)
    assert tuner.extractor.disk_file is not None
    assert autotvm.tuner.XGBTuner(_task()).extractor.disk_file is None  # autotvm's default: none
