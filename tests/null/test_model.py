"""harness.model: the values passed along the data path (cases and their peers, sides, results of
interleaved sides) and how they read back from JSON."""

from __future__ import annotations

import dataclasses
import json

from harness.model import Case, MeasureConfig, Result, Side


def _case(**kw) -> Case:
    base = dict(suite="s", workload="row_sum", variant="rfactor", params=(("m", 64), ("n", 128)),
                knobs=(("factor", 16),), dtype="float32", target="cuda", gpu_model="H100")
    return Case(**{**base, **kw})


def test_a_peer_case_is_known_by_its_field_and_keeps_the_key_format():
    peer = _case().as_peer("torch.sum(dim=1)")
    assert peer.peer == "torch.sum(dim=1)" and peer.knobs == () and peer.target == "cuda"
    # the key (history in the store) is what it always was
    assert peer.key == "row_sum/peer:torch.sum(dim=1)[]/m=64,n=128/float32/cuda@H100"
    assert Case.from_json(peer.to_json()) == peer
    assert "peer" not in json.loads(_case().to_json())  # kernels builds keep their stored JSON


def test_a_peer_stored_before_the_field_existed_reads_back_as_a_peer():
    old = json.loads(_case().as_peer("cupy.sum(axis=1)").to_json())
    del old["peer"]
    back = Case.from_json(json.dumps(old))
    assert back.peer == "cupy.sum(axis=1)" and back == _case().as_peer("cupy.sum(axis=1)")


def test_sides_from_pairs_and_from_json():
    cfg = MeasureConfig(interleave=(("base", 0.0), Side("head"), {"name": "slow", "slowdown": 0.05}))
    assert cfg.interleave == (Side("base", 0.0), Side("head", 0.0), Side("slow", 0.05))
    assert cfg.side_names == ("base", "head", "slow")
    stored = json.loads(json.dumps(dataclasses.asdict(cfg)))  # as harness.store keeps a run's config
    assert MeasureConfig(**stored) == cfg


def test_result_for_side():
    case = _case()
    a, b = Result(case, "ok", side="A", nvcc_calls=1), Result(case, "wrong", side="B", message="x")
    answer = dataclasses.replace(a, sides=(a, b))
    assert answer.for_side("A") == a and answer.for_side("B") == b
    # a case that failed as a whole stands for every side, labelled with it
    timeout = Result(case, "timeout", message="no result after 9 s")
    assert timeout.for_side("B") == dataclasses.replace(timeout, side="B")
