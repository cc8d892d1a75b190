"""Configuration spaces and tasks of the tuning engine (the autotvm template side)."""

from __future__ import annotations

import pytest

from kernels import autotvm, te
from kernels.tuning.space import ConfigEntity, SpaceError
from kernels.tuning.task import TaskError, count_flop


@autotvm.template("test/space_matmul")
def _matmul(n, dtype):
    A = te.placeholder((n, n), name="A", dtype=dtype)
    B = te.placeholder((n, n), name="B", dtype=dtype)
    k = te.reduce_axis((0, n), "k")
    C = te.compute((n, n), lambda i, j: te.sum(A[i, k] * B[k, j], axis=k), name="C")
    s = te.create_schedule(C.op)
    cfg = autotvm.get_config()
    cfg.define_knob("unroll", [0, 1])
    cfg.define_split("tile_y", s[C].op.axis[0], num_outputs=3)
    cfg.define_knob("vec", [1, 2, 4])
    y0, y1, y2 = cfg["tile_y"].apply(s, C, s[C].op.axis[0])
    if cfg["unroll"].val:
        s[C].unroll(y2)
    return s, [A, B, C]


def _factorizations(n, parts):
    if parts == 1:
        return [[n]]
    return [[d] + rest for d in range(1, n + 1) if n % d == 0 for rest in _factorizations(n // d, parts - 1)]


def test_space_is_the_product_of_the_knobs():
    task = autotvm.task.create("test/space_matmul", args=(12, "float32"), target="c")
    splits = _factorizations(12, 3)  # every way to write 12 as outer * middle * inner
    assert len(task.config_space) == 2 * len(splits) * 3
    assert task.workload == ("test/space_matmul", 12, "float32")
    assert task.flop == 2 * 12 ** 3  # one multiply and one add per step
    seen = set()
    for cfg in task.config_space:
        vals = cfg.to_values()
        seen.add((vals["unroll"], tuple(vals["tile_y"][1:]), vals["vec"]))
    assert len(seen) == len(task.config_space)
    assert {t for _, t, _ in seen} == {tuple(x[1:]) for x in splits}
    # the first knob varies fastest (mixed radix, as TVM indexes spaces)
    assert task.config_space.get(1).to_values()["unroll"] == 1
    text = str(task.config_space)
    assert text.startswith("ConfigSpace (len=") and "unroll: OtherOption([0, 1]) len=2" in text


def test_instantiate_applies_the_configuration():
    task = autotvm.task.create("test/space_matmul", args=(12, "float32"), target="c")
    idx = task.config_space.index_of({"unroll": 1, "tile_y": [-1, 3, 2], "vec": 4})
    s, _ = task.instantiate(idx)
    leaves = [iv.var.name for iv in s[s.outputs[0]].leaf_iter_vars]
    assert leaves[:3] == ["i.outer", "i.inner.outer", "i.inner.inner"]
    assert s[s.outputs[0]].iter_var_attrs[s[s.outputs[0]].leaf_iter_vars[2]].kind == "unrolled"
    cfg = task.config_space.get(idx)
    assert str(cfg).endswith(f",None,{idx}") and "('vec', 4)" in str(cfg)
    again = ConfigEntity.from_json_dict(cfg.to_json_dict())
    assert again.to_values() == cfg.to_values() and again.index == idx


def test_fallback_outside_a_task():
    s, _ = _matmul(8, "float32")  # defaults: first candidates, splits with inner factors 1
    leaves = [iv.var.name for iv in s[s.outputs[0]].leaf_iter_vars]
    assert leaves[:3] == ["i.outer", "i.inner.outer", "i.inner.inner"]


def test_errors_name_the_knob_or_template():
    with pytest.raises(TaskError, match="no template named 'nope'"):
        autotvm.task.create("nope", args=(), target="c")
    task = autotvm.task.create("test/space_matmul", args=(12, "float32"), target="c")
    size = len(task.config_space)
    with pytest.raises(SpaceError, match=f"config index 1000 is out of range: the space has {size} points"):
        task.config_space.get(1000)
    with pytest.raises(SpaceError, match="knob 'vec' has no candidate 3"):
        task.config_space.index_of({"unroll": 0, "tile_y": [-1, 1, 1], "vec": 3})
    with pytest.raises(SpaceError, match="the configuration has no knob 'bx'"):
        task.config_space.get(0)["bx"]


def test_flop_count_ignores_caches():
    A = te.placeholder((16, 8), name="A")
    k = te.reduce_axis((0, 8), "k")
    B = te.compute((16,), lambda i: te.sum(A[i, k] * 2.0 + 1.0, axis=k), name="B")
    s = te.create_schedule(B.op)
    s.cache_write(B, "local")
    s.cache_read(A, "shared", [s.stages[-2].op])
    assert count_flop(s) == 16 * 8 * 3  # *, + in the body and the combiner's +
