"""Loop and memory features of a candidate's lowered code: what the tuning engine's cost model learns.

Three modules, one job each:

- :mod:`.walk`: a candidate lowered to the loop IR with the loop structure kept visible
  (:func:`lower_for_features`) and walked (:func:`analyze`) into a :class:`ProgramFeatures` of plain
  numbers: the launch, the loop nest of the main store, every buffer access, arithmetic,
  allocations, barriers and occupancy proxies;
- :mod:`.encode`: a :class:`ProgramFeatures` as a fixed-length vector (:func:`feature_vector`,
  ``"itervar"`` or ``"curve"``; :func:`feature_names`, :func:`feature_length`);
- :mod:`.service`: the features of a task's configurations (:func:`candidate_features`), cached one
  vector per configuration index and extracted in a pool of worker processes (:class:`FeatureExtractor`).

The names below are the package's public surface (``from kernels.tuning import features as F``).
"""

from .encode import (ARG_SLOTS, CURVE_SAMPLES, FEATURE_TYPES, LOOP_SLOTS, SCOPES, feature_length,
                     feature_names, feature_vector)
from .service import FeatureExtractor, candidate_features
from .walk import (LOOP_KINDS, SKIPPED_PASSES, Access, DeviceLimits, FeatureError, Loop, ProgramFeatures,
                   analyze, lower_for_features)

__all__ = ["FEATURE_TYPES", "LOOP_SLOTS", "ARG_SLOTS", "SCOPES", "CURVE_SAMPLES", "LOOP_KINDS",
           "SKIPPED_PASSES", "Loop", "Access", "ProgramFeatures", "FeatureError", "DeviceLimits",
           "lower_for_features", "analyze", "feature_vector", "feature_names", "feature_length",
           "candidate_features", "FeatureExtractor"]
