"""``tvm.autotvm.tuner``: the search strategies of :mod:`kernels.tuning.tuner`."""

from __future__ import annotations

from ..tuning.tuner import GridSearchTuner, ModelTuner, RandomTuner, Tuner, XGBTuner

__all__ = ["Tuner", "GridSearchTuner", "RandomTuner", "ModelTuner", "XGBTuner"]
