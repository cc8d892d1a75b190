"""matmul_tensorcore refuses what it cannot run with messages that name the thing at fault: a suite
entry (file:line) asking for a layout or a sub-byte case the tutorial does not have, a knob value
outside the template's space, a peer's shape rules."""

from __future__ import annotations

import textwrap

import numpy as np
import pytest

from harness.execute.peers import PEERS
from harness.suite import SuiteError, load_suite
from kernels import workloads
from kernels.tuning.space import SpaceError
from kernels.workloads import WorkloadError

W = workloads.get("matmul_tensorcore")


def _suite(tmp_path, params: str, dtypes: str = '["int8"]', variants: str = '["plain"]'):
    path = tmp_path / "tc.toml"
    path.write_text(textwrap.dedent(f"""\
        [suite]
        name = "tc"
        targets = ["cuda"]

        [[workload]]
        name = "matmul_tensorcore"
        params = {params}
        dtypes = {dtypes}
        variants = {variants}
        """))
    return path


def test_unknown_layout_names_the_choices_and_line(tmp_path):
    path = _suite(tmp_path, '{ n = [64], m = [64], l = [64], layout = ["NN", "XT"] }')
    with pytest.raises(SuiteError, match=r"tc.toml:7: workload matmul_tensorcore: params.layout takes "
                                         r"'NN', 'NT', 'TN', 'TT', got 'XT'"):
        load_suite(path)


def test_a_size_given_for_the_layout(tmp_path):
    path = _suite(tmp_path, '{ n = [64], m = [64], l = [64], layout = [1] }')
    with pytest.raises(SuiteError, match=r"params.layout takes 'NN', 'NT', 'TN', 'TT', got 1"):
        load_suite(path)


def test_a_layout_given_for_a_size(tmp_path):
    path = _suite(tmp_path, '{ n = ["NN"], m = [64], l = [64], layout = ["NN"] }')
    with pytest.raises(SuiteError, match=r"params.n must be positive integers, got 'NN'"):
        load_suite(path)


def test_int4_outside_layout_tn(tmp_path):
    path = _suite(tmp_path, '{ n = [64], m = [64], l = [64], layout = ["TN", "NN"] }', '["int4"]')
    with pytest.raises(SuiteError, match=r"tc.toml:7: workload matmul_tensorcore: l=64, layout=NN, m=64, "
                                         r"n=64 in int4 makes no case: int4 takes layout TN only"):
        load_suite(path)


def test_int1_reduction_not_whole_words(tmp_path):
    path = _suite(tmp_path, '{ n = [64], m = [64], l = [48], layout = ["TN"] }', '["int1"]')
    with pytest.raises(SuiteError, match=r"int1 packs 32 elements a word along l: l must be a multiple of "
                                         r"32, got 48"):
        load_suite(path)


def test_building_or_drawing_an_invalid_case_directly():
    with pytest.raises(WorkloadError, match="workload matmul_tensorcore: int1 takes layout TN only"):
        W.build("tutorial", {"n": 64, "m": 64, "l": 128, "layout": "TT"}, "int1")
    with pytest.raises(WorkloadError, match="l must be a multiple of 8, got 12"):
        W.make_args({"n": 8, "m": 8, "l": 12, "layout": "TN"}, "int4", np.random.default_rng(0))
    with pytest.raises(WorkloadError, match="does not support dtype float64"):
        W.build("plain", {"n": 64, "m": 64, "l": 64, "layout": "NN"}, "float64")


def test_knob_outside_the_templates_space():
    with pytest.raises(SpaceError,
                       match=r"knob 'step_k' has no candidate 3; candidates: \[1, 2, 4, 8, 16, 32\]"):
        W.build("tutorial", {"n": 64, "m": 64, "l": 64, "layout": "NN"}, "float16", {"step_k": 3})
    with pytest.raises(WorkloadError, match="variant matmul_tensorcore/tutorial has no knob 'warp_m'"):
        W.build("tutorial", {"n": 64, "m": 64, "l": 64, "layout": "NN"}, "float16", {"warp_m": 2})


def test_int_mm_says_which_shape_rule_a_case_breaks():
    why = PEERS["torch._int_mm"].unsupported
    assert why({"n": 4096, "m": 4096, "l": 4096, "layout": "NN"}, "int8") is None
    assert why({"n": 16, "m": 4096, "l": 4096, "layout": "NN"}, "int8") == (
        "A needs more than 16 rows (n = 16)")
    assert why({"n": 64, "m": 20, "l": 36, "layout": "TN"}, "int8") == (
        "l must be a multiple of 8 (l = 36); m must be a multiple of 8 (m = 20)")


def test_peers_only_pair_with_their_dtypes():
    assert PEERS["torch._int_mm"].applies_to("int8") and not PEERS["torch._int_mm"].applies_to("float16")
    assert PEERS["torch.matmul(fp16)"].applies_to("float16")
    assert not PEERS["torch.matmul(fp16)"].applies_to("int4")
