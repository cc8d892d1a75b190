"""TVM-compatible API surface without running code: targets, pass contexts, convert, devices,
constants and extremes, decl_buffer, ir_builder, te.extern, call_packed, register_func."""

from __future__ import annotations

import numpy as np
import pytest

import kernels as tvm
from kernels import te, tir
from kernels.errors import TVMError
from kernels.tir import ir_builder
from kernels.tir.simplify import simplify, structural_equal

# -- errors ---------------------------------------------------------------------------------------


def test_tvmerror_is_a_runtime_error():
    assert issubclass(tvm.TVMError, RuntimeError)
    assert tvm.error.TVMError is tvm.TVMError
    with pytest.raises(RuntimeError):
        te.placeholder((3,), name="A")[0, 1]  # two indices into a 1-d tensor


# -- targets ------------------------------------------------------------------------------------


@pytest.mark.parametrize("text, name, backend, keys", [
    ("cuda", "cuda", "cuda", ["cuda", "gpu"]),
    ("nvptx", "nvptx", "cuda", ["cuda", "gpu"]),
    ("opencl", "opencl", "opencl", ["opencl", "gpu"]),
    ("llvm", "llvm", "c", ["cpu"]),
    ("c", "c", "c", ["cpu"]),
])
def test_target_kind_keys(text, name, backend, keys):
    t = tvm.target.Target(text)
    assert t.kind.name == name
    assert t.kind == backend  # the string value names the backend that builds it
    assert t.keys == keys


def test_target_attrs_defaults_and_str():
    t = tvm.target.Target("cuda -arch=sm_80")
    assert t.attrs["arch"] == "sm_80" and t.arch == "sm_80"
    assert t.attrs["max_num_threads"] == 1024 and t.attrs["thread_warp_size"] == 32
    assert str(t) == "cuda -keys=cuda,gpu -arch=sm_80 -max_num_threads=1024 -thread_warp_size=32"
    # the canonical string parses back to an equal target
    assert tvm.target.Target(str(t)) == t
    o = tvm.target.Target("opencl -device=mali")
    assert o.keys == ["mali", "opencl", "gpu"] and o.attrs["max_num_threads"] == 256
    assert tvm.target.Target("llvm -mcpu=skylake -mattr=+avx2,+fma").attrs["mattr"] == ["+avx2", "+fma"]
    assert tvm.target.Target("cuda -max_num_threads=512").max_num_threads == 512


def test_target_dict_export_and_host():
    t = tvm.target.Target({"kind": "cuda", "arch": "sm_75"}, host="llvm")
    assert t.arch == "sm_75" and t.host.kind.name == "llvm"
    again = tvm.target.Target(t.export())
    assert again == t and again.host == t.host


def test_target_current_nests():
    assert tvm.target.Target.current() is None
    with tvm.target.Target("cuda") as outer:
        assert tvm.target.Target.current() is outer
        with tvm.target.Target("llvm") as inner:
            assert tvm.target.Target.current() is inner
        assert tvm.target.Target.current() is outer
    assert tvm.target.Target.current(allow_none=True) is None
    with pytest.raises(TVMError, match="no target is set"):
        tvm.target.Target.current(allow_none=False)


# -- pass contexts -----------------------------------------------------------------------------


def test_pass_context_records_config():
    from kernels.transform import PassContext, current_config

    assert PassContext.current().opt_level == 2
    cfg = {"tir.UnrollLoop": {"auto_max_step": 16, "explicit_unroll": True}, "tir.disable_vectorize": True}
    with tvm.transform.PassContext(opt_level=3, config=cfg, disabled_pass=["tir.LoopPartition"]) as ctx:
        assert PassContext.current() is ctx
        assert ctx.opt_level == 3
        assert current_config("tir.UnrollLoop") == {"auto_max_step": 16, "explicit_unroll": True}
        assert current_config("tir.disable_vectorize") is True
        assert current_config("tir.noalias", "unset") == "unset"
        assert ctx.pass_disabled("tir.LoopPartition") and not ctx.pass_disabled("tir.Simplify")
        with tvm.transform.PassContext(opt_level=0):
            assert PassContext.current().opt_level == 0
        assert PassContext.current() is ctx
    assert PassContext.current().opt_level == 2
    assert "tir.UnrollLoop" in PassContext.list_configs()


# -- convert -----------------------------------------------------------------------------------


def test_convert():
    from kernels.runtime import Array, Map, PackedFunc, String

    i = tvm.runtime.convert(3)
    assert isinstance(i, tir.IntImm) and i.dtype == "int32" and i.value == 3
    big = tvm.runtime.convert(2**40)
    assert big.dtype == "int64"
    f = tvm.runtime.convert(1.5)
    assert isinstance(f, tir.FloatImm) and f.dtype == "float32"
    b = tvm.runtime.convert(True)
    assert b.dtype == "bool" and b.value == 1
    assert tvm.runtime.convert(np.float64(2.0)).dtype == "float64"
    s = tvm.runtime.convert("abc")
    assert isinstance(s, String) and s == "abc"
    arr = tvm.convert([1, 2.0, "x", [3]])
    assert isinstance(arr, Array) and len(arr) == 4
    assert arr[0].value == 1 and arr[1].dtype == "float32" and arr[2] == "x" and arr[3][0].value == 3
    m = tvm.runtime.convert({"a": 1})
    assert isinstance(m, Map) and m["a"].value == 1
    x = te.var("x")
    assert tvm.runtime.convert(x) is x
    pf = tvm.runtime.convert(lambda a: a + 1)
    assert isinstance(pf, PackedFunc) and pf(2) == 3
    assert tvm.runtime.convert(None) is None


# -- devices ------------------------------------------------------------------------------------


@pytest.mark.parametrize("kind", ["vulkan", "metal", "rocm", "ext_dev", "hexagon", "webgpu"])
def test_absent_device_kinds_do_not_exist(kind):
    dev = tvm.device(kind)
    assert dev.exist is False  # asking never raises
    assert dev.device_type == kind and dev.index == 0


def test_device_helpers_and_aliases():
    assert tvm.rocm().exist is False and tvm.metal(1).exist is False and tvm.vulkan().exist is False
    assert tvm.device(10).device_type == "rocm"  # TVM's integer code
    assert tvm.device("llvm") == tvm.cpu(0) and tvm.context("cpu") == tvm.cpu(0)
    assert tvm.device("nvptx").device_type == "cuda"


def test_nd_empty():
    a = tvm.nd.empty((2, 3), "float32")
    assert a.shape == (2, 3) and a.dtype == "float32" and a.device == tvm.cpu(0)
    b = tvm.nd.empty((4,), dtype="int8", device=tvm.cpu(0))
    assert b.numpy().shape == (4,) and b.numpy().dtype == np.int8


# -- constants, extremes, integer division ---------------------------------------------------------


def test_min_max_value_are_finite_as_in_tvm():
    assert tir.max_value("float32").value == float(np.finfo(np.float32).max) == 3.4028234663852886e38
    assert tir.min_value("float32").value == -3.4028234663852886e38
    assert te.max_value("float16").value == 65504.0 and te.min_value("float16").value == -65504.0
    assert tir.max_value("float64").value == 1.7976931348623157e308
    assert tir.min_value("float64").value == -1.7976931348623157e308
    assert tir.max_value("int8").value == 127 and tir.min_value("int8").value == -128
    assert tir.max_value("uint16").value == 65535 and tir.min_value("uint16").value == 0
    assert tir.max_value("int64").value == 2**63 - 1
    assert tir.max_value("bool").value == 1 and tir.min_value("bool").value == 0


def test_te_const_defaults_to_int32():
    c = te.const(3)
    assert c.dtype == "int32" and c.value == 3
    assert te.const(2.5, "float32").dtype == "float32"
    assert te.const(1, "float64").value == 1.0


@pytest.mark.parametrize("a, b", [(7, 2), (-7, 2), (7, -2), (-7, -2), (0, 3)])
def test_integer_division_folds_like_c_and_python(a, b):
    # truncdiv/truncmod: C semantics; floordiv/floormod: Python's
    q = abs(a) // abs(b) * (1 if (a >= 0) == (b >= 0) else -1)
    assert te.truncdiv(a, b).value == q
    assert te.truncmod(a, b).value == a - q * b
    assert te.floordiv(a, b).value == a // b and te.floormod(a, b).value == a % b
    assert tir.indexdiv(a, b).value == a // b and tir.indexmod(a, b).value == a % b


def test_integer_division_builds_nodes():
    x = te.var("x")
    assert isinstance(te.floordiv(x, 4), tir.FloorDiv)
    assert isinstance(te.truncmod(x, 4), tir.Mod)
    assert isinstance(te.truncdiv(x, 4), tir.Div)


def test_any_all():
    x, y = te.var("x"), te.var("y")
    assert isinstance(te.any(x < 1, y > 2), tir.Or)
    assert isinstance(te.all(x < 1, y > 2, x == y), tir.And)
    assert te.all().value == 1 and te.any().value == 0


def test_math_functions_build_calls():
    x = te.var("x", "float32")
    for name in ["exp", "log", "sqrt", "floor", "ceil", "trunc", "round", "nearbyint", "tanh", "sigmoid",
                 "erf", "log1p", "tan", "cosh", "sinh", "asin", "acos", "atan", "asinh", "acosh", "atanh"]:
        e = getattr(tir, name)(x)
        assert isinstance(e, tir.Call) and e.op.name == f"tir.{name}" and e.dtype == "float32"
        assert getattr(te, name) is getattr(tir, name)
    assert tir.abs(x).op.name == "tir.fabs"
    assert te.fmod(x, 2.0).op.name == "tir.fmod" and te.power(x, 2).op.name == "tir.pow"
    assert tir.pow is tir.power
    i = te.var("i")
    assert te.popcount(i).dtype == "int32"
    assert te.popcount(te.var("u", "uint8")).dtype == "uint8"
    assert tir.clz(te.var("l", "int64")).dtype == "int32"
    assert te.isnan(x).dtype == "bool" and te.isinf(x).dtype == "bool"
    assert isinstance(te.isfinite(x), tir.And)
    # integers are never NaN or infinite
    assert te.isnan(i).value == 0 and te.isinf(i).value == 0 and te.isfinite(i).value == 1


# -- decl_buffer --------------------------------------------------------------------------------


def test_decl_buffer_fields():
    m, n = te.size_var("m"), te.size_var("n")
    ab = tvm.tir.decl_buffer((m, n), "float32")
    assert isinstance(ab, tvm.tir.Buffer)
    assert ab.dtype == "float32" and tuple(ab.shape) == (m, n) and ab.name == "buffer"
    assert isinstance(ab.data, tir.Var) and ab.data.dtype == "handle"
    assert ab.strides == () and ab.elem_offset.value == 0 and ab.scope == "global"
    assert ab.data_alignment == 64 and ab.offset_factor == 1
    f = tvm.tir.decl_buffer((16,), "int8", name="F", offset_factor=4, scope="shared", data_alignment=128)
    assert isinstance(f.elem_offset, tir.Var) and f.elem_offset.name == "F_elem_offset"
    assert f.offset_factor == 4 and f.scope == "shared" and f.data_alignment == 128
    shared = tvm.tir.decl_buffer((16,), "int8", name="G", data=f.data)
    assert shared.data is f.data
    assert tvm.tir.decl_buffer(8).shape[0].value == 8 and tvm.tir.decl_buffer(8).dtype == "float32"


def test_buffer_vload_index():
    m, n = te.size_var("m"), te.size_var("n")
    ab = tvm.tir.decl_buffer((m, n), "float32", elem_offset=100)
    load = ab.vload([2, 3])
    tvm.testing.assert_prim_expr_equal(load.index, n * 2 + 103)
    assert load.buffer is ab and load.buffer_var is ab.data
    strided = tvm.tir.decl_buffer((m, n), "float32", strides=[n + 1, 1])
    tvm.testing.assert_prim_expr_equal(strided.vload([2, 3]).index, (n + 1) * 2 + 3)
    st = ab.vstore([1, 1], 2.0)
    assert isinstance(st, tir.BufferStore) and st.value.value == 2.0
    tvm.testing.assert_prim_expr_equal(st.index, n + 101)


def test_buffer_access_ptr():
    m, n = te.size_var("m"), te.size_var("n")
    ab = tvm.tir.decl_buffer((m, n), "float32", strides=[n + 1, 1])
    aptr = ab.access_ptr("rw")
    assert aptr.op.name == "tir.tvm_access_ptr"
    assert structural_equal(simplify(aptr.args[3]), simplify(ab.strides[0] * m))
    assert aptr.args[0].dtype == ab.dtype
    assert aptr.args[4].value == tvm.tir.Buffer.READ | tvm.tir.Buffer.WRITE
    assert ab.access_ptr("w").args[4].value == tvm.tir.Buffer.WRITE
    compact = tvm.tir.decl_buffer((m, n), "float32")
    tvm.testing.assert_prim_expr_equal(compact.access_ptr("rw").args[3], m * n)
    p = compact.access_ptr("r", offset=100)
    tvm.testing.assert_prim_expr_equal(p.args[2], 100)
    tvm.testing.assert_prim_expr_equal(p.args[3], m * n - 100)
    v = te.size_var("v")
    tvm.testing.assert_prim_expr_equal(compact.access_ptr("rw", offset=100 + 100 + v).args[2], 200 + v)


# -- ir_builder ------------------------------------------------------------------------------------


def test_ir_builder_for_allocate():
    ib = ir_builder.create()
    n = te.size_var("n")
    a = ib.allocate("float32", n, name="A", scope="global")
    with ib.for_range(0, n, name="i") as i:
        a[i] = a[i] + 1
        with ib.for_range(0, 10, name="j") as j:
            a[j] = a[j] + 2
    body = ib.get()
    assert isinstance(body, tir.Allocate) and body.buffer is a.buffer and body.extent is n
    loop = body.body
    assert isinstance(loop, tir.For) and loop.loop_var.name == "i" and loop.extent is n
    assert isinstance(loop.body, tir.SeqStmt)
    assert isinstance(loop.body.seq[0], tir.BufferStore)
    assert isinstance(loop.body.seq[1], tir.For) and loop.body.seq[1].extent.value == 10


def test_ir_builder_if_else_and_default_names():
    ib = ir_builder.create()
    n = te.size_var("n")
    a = ib.pointer("float32", name="A")
    with ib.for_range(0, n) as i:
        with ib.if_scope(tvm.tir.truncmod(i, 2) == 0):
            a[i] = a[i] + 1
        with ib.else_scope():
            a[0] = a[i] + 2
    body = ib.get()
    assert isinstance(body, tir.For) and body.loop_var.name == "i"
    branch = body.body
    assert isinstance(branch, tir.IfThenElse) and isinstance(branch.condition, tir.EQ)
    assert isinstance(branch.then_case.index, tir.Var)
    assert branch.else_case.index.value == 0
    ib = ir_builder.create()
    names = []
    for _ in range(5):  # default names: i, j, k, then i_0, i_1
        with ib.for_range(0, 2) as v:
            names.append(v.name)
    assert names == ["i", "j", "k", "i_0", "i_1"]


def test_ir_builder_multi_dim_pointer_and_scopes():
    ib = ir_builder.create()
    buf = ib.allocate("int32", (4, 8), name="B", scope="local")
    buf[2, 5] = 7
    x = ib.let("x", buf[1, 1] + 1)
    with ib.new_scope():
        tx = te.thread_axis("threadIdx.x")
        ib.scope_attr(tx, "thread_extent", 32)
        buf[0] = x
    body = ib.get()
    assert isinstance(body, tir.Allocate) and body.extent.value == 32 and body.buffer.scope == "local"
    first, let = body.body.seq
    assert first.index.value == 2 * 8 + 5 and first.value.value == 7
    assert isinstance(let, tir.LetStmt) and let.var is x
    attr = let.body
    assert isinstance(attr, tir.AttrStmt) and attr.attr_key == "thread_extent" and attr.value.value == 32
    assert attr.node.thread_tag == "threadIdx.x"


def test_ir_builder_likely_and_emit():
    ib = ir_builder.create()
    x = te.var("x")
    c = ib.likely(x < 4)
    assert c.op.name == "tir.likely" and c.dtype == "bool"
    ib.emit(tvm.tir.call_extern("int32", "f", x))
    body = ib.get()
    assert isinstance(body, tir.Evaluate) and body.value.args[0].value == "f"


# -- te.extern and call_packed ----------------------------------------------------------------------


def test_extern_op_structure():
    m = te.size_var("m")
    a = te.placeholder((m,), name="A")

    def fcompute(ins, outs):
        assert isinstance(ins[0], tvm.tir.Buffer) and ins[0].name == "A"
        return tvm.tir.call_packed("myadd", ins[0].data, outs[0].data, m)

    b = te.extern((m,), [a], fcompute)
    assert tuple(b.shape) == (m,) and b.dtype == "float32"
    assert isinstance(b.op, te.ExternOp) and b.op.inputs == [a] and b.op.name == "extern"
    assert isinstance(b.op.body, tir.Evaluate)
    call = b.op.body.value
    assert call.op.name == "tir.tvm_call_packed" and call.args[0].value == "myadd"


def test_extern_multi_output():
    m = te.size_var("m")
    a = te.placeholder((m,), name="A")
    b = te.compute((m,), lambda i: a[i] * 10, name="B")

    def fcompute(ins, outs):
        return tvm.tir.call_packed("myadd", ins[0].data, ins[1].data, outs[0].data, outs[1].data, m)

    res = te.extern([a.shape, a.shape], [a, b], fcompute, name="E", dtype=["float32", "int32"])
    assert len(res) == 2 and res[1].value_index == 1 and res[1].op is res[0].op
    assert res[0].dtype == "float32" and res[1].dtype == "int32"
    assert res[1].op.num_outputs == 2


def test_call_packed_buffer_argument_is_an_array():
    buf = tvm.tir.decl_buffer((4, 5), "int16", name="Q")
    call = tvm.tir.call_packed("f", buf, 3, 2.5, "s")
    arr = call.args[1]
    assert arr.op.name == "tir.tvm_stack_make_array" and arr.args[0] is buf.data
    assert arr.args[1].value == "int16" and arr.args[3].value == 2
    assert [a.value for a in arr.args[5:]] == [4, 5]
    assert call.args[2].value == 3 and call.args[3].dtype == "float32" and call.args[4].value == "s"


# -- packed function registry -----------------------------------------------------------------------


def test_register_and_get_global_func():
    from kernels.runtime import list_global_func_names, remove_global_func

    name = "compat_test.twice"
    remove_global_func(name)

    @tvm.register_func(name)
    def twice(x):
        return 2 * x

    try:
        assert tvm.get_global_func(name)(4) == 8
        assert twice(5) == 10  # the decorator returns the packed function
        assert name in list_global_func_names()
        with pytest.raises(TVMError, match="already registered"):
            tvm.register_func(name, lambda x: x)
        tvm.register_func(name, lambda x: 3 * x, override=True)
        assert tvm.get_global_func(name)(4) == 12
    finally:
        remove_global_func(name)
    assert tvm.get_global_func(name, allow_missing=True) is None
    with pytest.raises(ValueError, match=f"Cannot find global function {name}"):
        tvm.get_global_func(name)


def test_register_func_by_function_name():
    from kernels.runtime import remove_global_func

    def compat_named_func(a, b):
        return a - b

    try:
        tvm.register_func(compat_named_func)
        assert tvm.get_global_func("compat_named_func")(5, 3) == 2
    finally:
        remove_global_func("compat_named_func")


# -- out-of-scope modules -----------------------------------------------------------------------------


@pytest.mark.parametrize("module", ["kernels.relay", "kernels.auto_scheduler",
                                    "kernels.te.hybrid", "kernels.contrib.cblas", "kernels.contrib.cudnn"])
def test_out_of_scope_imports_name_the_rule(module):
    import importlib

    with pytest.raises(ImportError, match=r"outside the scope of kernels.*docs/TVM_COMPAT\.md"):
        importlib.import_module(module)


def test_topi_imports_but_every_use_names_the_rule():
    # TVM's test files import topi at the top and use it in a test or two: the import succeeds,
    # any use of it raises the scope message.
    from kernels import topi

    import kernels.topi as topi2

    assert topi is topi2
    with pytest.raises(AttributeError, match=r"tvm\.topi\.sum: tvm\.topi .*outside the scope.*TVM_COMPAT"):
        topi.sum  # noqa: B018
    with pytest.raises(AttributeError, match=r"tvm\.topi\.cuda: .*outside the scope"):
        topi.cuda.schedule_reduce  # noqa: B018
    assert not hasattr(topi, "cast")
    import kernels.topi.testing  # noqa: F401 - TVM's tests import topi's helpers at the top too

    with pytest.raises(AttributeError, match=r"tvm\.topi\.testing\.assert_allclose: tvm\.topi .*outside"):
        kernels.topi.testing.assert_allclose  # noqa: B018


def test_out_of_scope_attribute():
    with pytest.raises(AttributeError, match=r"tvm\.relay .*outside the scope"):
        tvm.relay  # noqa: B018
    with pytest.raises(AttributeError, match="has no attribute 'no_such_thing'"):
        tvm.no_such_thing  # noqa: B018
    with pytest.raises(AttributeError, match=r"tvm\.te\.hybrid \(hybrid script\) is outside the scope"):
        te.hybrid  # noqa: B018
    with pytest.raises(AttributeError, match=r"tvm\.contrib\.cudnn .*outside the scope"):
        tvm.contrib.cudnn  # noqa: B018
