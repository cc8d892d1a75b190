"""kernels.workloads.register refuses malformed workloads with a WorkloadError naming the workload
and the field at fault, before anything is registered; the registry is left as it was."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from kernels import te
from kernels import workloads as W
from kernels.workloads import Variant, Workload, WorkloadError, poison, register, uniform


def _build(params, dtype, threads=64):
    A = te.placeholder((params["n"],), name="A", dtype=dtype)
    B = te.compute(A.shape, lambda i: A[i] * 2.0, name="B")
    return te.create_schedule(B.op), [A, B]


def _good(**changes) -> Workload:
    w = Workload(
        name="user_scale",
        params=("n",),
        dtypes=("float32",),
        variants={"default": Variant("default", _build, ("c",), (("threads", 64),), "one loop")},
        make_args=lambda p, d, rng: [uniform(rng, p["n"], d), poison((p["n"],), d)],
        reference=lambda a: [2.0 * a[0].astype(np.float64)],
        outputs=(1,),
        flops=lambda p: float(p["n"]),
        bytes=lambda p, d: 8.0 * p["n"],
    )
    return dataclasses.replace(w, **changes)


def _refused(w, *needles: str) -> str:
    before = dict(W.REGISTRY)
    with pytest.raises(WorkloadError) as info:
        register(w)
    assert W.REGISTRY == before  # nothing registered
    msg = str(info.value)
    for needle in needles:
        assert needle in msg, msg
    return msg


def test_the_good_workload_is_accepted_and_builds():
    # the baseline the other tests break one field of: it registers and builds
    w = _good(name="user_scale_ok")
    try:
        register(w)
        s, args = W.get("user_scale_ok").build("default", {"n": 8}, "float32")
        assert [a.name for a in args] == ["A", "B"]
    finally:
        W.REGISTRY.pop("user_scale_ok", None)


@pytest.mark.parametrize("name", ["my kernel", "2fast", "a-b", "matmul(fp16)", "", "añb"])
def test_workload_name_must_be_an_identifier(name):
    _refused(_good(name=name), "Workload.name", "identifier", repr(name), "description")


def test_non_string_name():
    _refused(_good(name=3), "Workload.name", "3")


@pytest.mark.parametrize("key", ["fast one", "v-2", "1st"])
def test_variant_name_must_be_an_identifier(key):
    msg = _refused(_good(variants={key: Variant(key, _build, ("c",))}), "variant name", repr(key))
    assert "'user_scale'" in msg


def test_display_text_may_be_anything():
    # descriptions are free text: quotes, spaces, unicode
    w = _good(name="user_scale_text", description='C = 2·A "doubled" (ñ)',
              variants={"default": Variant("default", _build, ("c",), (), 'one "loop" – 1·n')})
    try:
        register(w)
    finally:
        W.REGISTRY.pop("user_scale_text", None)


def test_duplicate_workload_name():
    _refused(_good(name="row_sum"), "row_sum", "already registered")


def test_variant_stored_under_another_name():
    _refused(_good(variants={"fast": Variant("slow", _build, ("c",))}), "variants['fast']", "'slow'")


def test_variant_not_a_variant():
    _refused(_good(variants={"default": _build}), "variants['default']", "Variant", "function")


def test_no_variants():
    _refused(_good(variants={}), "`variants`", "non-empty")


def test_variant_build_not_callable():
    _refused(_good(variants={"default": Variant("default", "build_me", ("c",))}), "`build`", "callable")


@pytest.mark.parametrize("targets, needle", [(("c", "rocm"), "'rocm'"), ((), "non-empty"),
                                             ("cuda", "non-empty tuple")])
def test_variant_targets(targets, needle):
    _refused(_good(variants={"default": Variant("default", _build, targets)}), "`targets`", needle)


def test_knob_with_no_value():
    v = Variant("default", _build, ("c",), (("threads",),))
    _refused(_good(variants={"default": v}), "knob 'threads'", "no default")


def test_knob_not_a_pair():
    v = Variant("default", _build, ("c",), ("threads",))
    _refused(_good(variants={"default": v}), "knobs", "(name, default) pair", "'threads'")


def test_knob_default_of_a_type_a_suite_cannot_give():
    v = Variant("default", _build, ("c",), (("threads", [64, 128]),))
    _refused(_good(variants={"default": v}), "knob 'threads'", "[64, 128]", "bool, int, float or str")


def test_knob_name_not_an_identifier_and_duplicate_knob():
    v = Variant("default", _build, ("c",), (("thread count", 64),))
    _refused(_good(variants={"default": v}), "knob name", "'thread count'")
    v = Variant("default", _build, ("c",), (("threads", 64), ("threads", 32)))
    _refused(_good(variants={"default": v}), "knob 'threads'", "twice")


@pytest.mark.parametrize("field", ["reference", "make_args", "flops", "bytes"])
def test_missing_function(field):
    _refused(_good(**{field: None}), f"`{field}` is missing")


@pytest.mark.parametrize("field", ["reference", "make_args", "flops", "bytes"])
def test_non_callable_function(field):
    _refused(_good(**{field: [1.0]}), f"`{field}` must be callable", "list")


def test_function_taking_the_wrong_arguments():
    # a reference written as if it received (args, params, dtype) without reference_takes_case
    _refused(_good(reference=lambda a, p, d: [a[0]]), "`reference`", "1 argument", "(args)")
    _refused(_good(make_args=lambda p, d: []), "`make_args`", "3 arguments", "(params, dtype, rng)")
    _refused(_good(bytes=lambda p: 1.0), "`bytes`", "2 arguments")
    # with reference_takes_case the 3-argument form is the right one
    w = _good(name="user_scale_case", reference=lambda a, p, d: [2.0 * a[0].astype(np.float64)],
              reference_takes_case=True)
    try:
        register(w)
    finally:
        W.REGISTRY.pop("user_scale_case", None)


@pytest.mark.parametrize("outputs, needle", [(1, "non-empty tuple"), ((), "non-empty tuple"),
                                             ((-1,), "-1"), ((1, 1), "twice"), (("B",), "'B'")])
def test_outputs(outputs, needle):
    _refused(_good(outputs=outputs), "`outputs`", needle)


@pytest.mark.parametrize("dtypes, needle", [(("float32", "floaty"), "'floaty'"), ((), "non-empty"),
                                            ("float32", "non-empty tuple")])
def test_dtypes(dtypes, needle):
    _refused(_good(dtypes=dtypes), "`dtypes`", needle)


def test_params():
    _refused(_good(params=("n", "n")), "`params`", "twice")
    _refused(_good(params=("n rows",)), "parameter name", "'n rows'")
    _refused(_good(params="n"), "`params`", "tuple")


def test_tolerance():
    _refused(_good(tolerance={"float16": (1e-3, 1e-3)}), "`tolerance`", "'float16'")
    _refused(_good(tolerance={"float32": 1e-3}), "tolerance['float32']", "(rtol, atol)")
    _refused(_good(tolerance={"float32": (-1e-3, 0.0)}), "tolerance['float32']", "(rtol, atol)")


def test_peak_dtype():
    # a dtype the workload lacks, a class that is not a name, not a dict: refused, naming the field
    _refused(_good(peak_dtype={"float16": "tf32"}), "`peak_dtype`", "float16", "(float32)")
    _refused(_good(peak_dtype={"float32": 32}), "`peak_dtype`", "{'float32': 32}")
    _refused(_good(peak_dtype=["tf32"]), "`peak_dtype`", "['tf32']")


def test_choices():
    _refused(_good(choices={"layout": ("NN",)}), "`choices`", "'layout'")
    _refused(_good(choices={"n": ()}), "choices['n']", "non-empty")


def test_not_a_workload():
    _refused({"name": "x"}, "register() takes a kernels.workloads.Workload", "dict")


def test_add_variants_checks_the_variant_name():
    from kernels.workloads.tensorir import add_variants

    before = dict(W.get("row_sum").variants)
    with pytest.raises(WorkloadError, match="variant name.*'my variant'"):
        add_variants("row_sum", {"my variant": Variant("my variant", _build, ("c",))})
    assert W.get("row_sum").variants == before


def test_private_poison_name_still_works():
    # the name the project's own (and older user) modules import
    from kernels.workloads import _poison

    got = _poison((3,), "int8")
    assert got.dtype == np.int8 and (got == -128).all()
    assert np.isnan(poison((2, 2), "float16")).all() and poison((2,), "float16").dtype == np.float16
    assert poison((1,), "int4").dtype == np.int32  # packed words
