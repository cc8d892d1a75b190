"""Bad uses of the TVM-compatible surface fail with an error naming the culprit (targets, pass
contexts, buffers, ir_builder, te.extern, packed calls, saved modules, math functions, scope)."""

from __future__ import annotations

import json

import numpy as np
import pytest

import kernels as tvm
from kernels import te
from kernels.errors import ArgumentError, BuildError, LoweringError, PackedFuncError, TVMError
from kernels.runtime import remove_global_func
from kernels.runtime.serialize import ModuleFormatError

# -- targets and pass contexts -------------------------------------------------------------------


def test_target_option_errors():
    with pytest.raises(TVMError, match=r"kind 'cuda' has no option -foo; its options are -arch, .*"):
        tvm.target.Target("cuda -foo=1")
    with pytest.raises(TVMError, match=r"option -max_num_threads takes an integer, got 'many'"):
        tvm.target.Target("cuda -max_num_threads=many")
    with pytest.raises(TVMError, match=r"option -link-params takes true or false, got 'maybe'"):
        tvm.target.Target("llvm -link-params=maybe")
    with pytest.raises(TVMError, match=r"unknown target 'rocm'.*outside the scope of kernels.*TVM_COMPAT"):
        tvm.target.Target("rocm")
    with pytest.raises(TVMError, match=r"needs a 'kind' entry"):
        tvm.target.Target({"arch": "sm_80"})


def test_pass_context_errors():
    PC = tvm.transform.PassContext
    with pytest.raises(TVMError, match=r"opt_level must be an int from 0 to 4, got 7"):
        PC(opt_level=7)
    with pytest.raises(TVMError, match=r"unknown config key 'tir.Unroll'; known keys are .*tir\.UnrollLoop"):
        PC(config={"tir.Unroll": {}})
    with pytest.raises(TVMError, match=r"'relay.FuseOps.max_depth': tvm\.relay.*outside the scope"):
        PC(config={"relay.FuseOps.max_depth": 3})
    with pytest.raises(TVMError, match=r"'tir.UnrollLoop' has no field 'max_step'; its fields are auto_max"):
        PC(config={"tir.UnrollLoop": {"max_step": 3}})
    with pytest.raises(TVMError, match=r"'tir.UnrollLoop.auto_max_step' takes an int, got 'x'"):
        PC(config={"tir.UnrollLoop": {"auto_max_step": "x"}})
    with pytest.raises(TVMError, match=r"'tir.disable_vectorize' takes a bool, got 'yes'"):
        PC(config={"tir.disable_vectorize": "yes"})
    with pytest.raises(TVMError, match=r"tir.add_lower_pass.*cannot be inserted"):
        PC(config={"tir.add_lower_pass": [(1, lambda f: f)]})
    with pytest.raises(TVMError, match=r"instruments.*outside the scope"):
        PC(instruments=[object()])
    with pytest.raises(TVMError, match=r"disabled_pass takes pass names \(str\), got 3"):
        PC(disabled_pass=[3])


def test_device_errors():
    with pytest.raises(TVMError, match=r"unknown device type 'tpu'; expected one of cpu, cuda, opencl"):
        tvm.device("tpu")
    with pytest.raises(TVMError, match=r"vulkan devices are not supported by kernels"):
        tvm.nd.empty((2,), "float32", tvm.vulkan(0))


# -- buffers and ir_builder ----------------------------------------------------------------------


def test_decl_buffer_errors():
    with pytest.raises(TVMError, match=r"decl_buffer B: vector dtype 'float32x4' is not supported"):
        tvm.tir.decl_buffer((4,), "float32x4", name="B")
    with pytest.raises(TVMError, match=r"decl_buffer B: shape\[1\] = 2\.5 must be an integer"):
        tvm.tir.decl_buffer((4, 2.5), name="B")
    with pytest.raises(TVMError, match=r"decl_buffer B: 1 strides for 2 dimensions"):
        tvm.tir.decl_buffer((4, 4), name="B", strides=[1])
    with pytest.raises(TVMError, match=r"buffer_type must be '' or 'auto_broadcast', got 'ragged'"):
        tvm.tir.decl_buffer((4,), name="B", buffer_type="ragged")
    with pytest.raises(TVMError, match=r"data must be a handle variable"):
        tvm.tir.decl_buffer((4,), name="B", data=te.var("x"))
    b = tvm.tir.decl_buffer((4, 4), "int32", name="B")
    with pytest.raises(TVMError, match=r"buffer B has 2 dimension\(s\) but was indexed with 1 index"):
        b.vload([1])
    with pytest.raises(TVMError, match=r"buffer B: vstore of a float32 value into a int32 buffer"):
        b.vstore([0, 0], te.var("f", "float32"))
    with pytest.raises(TVMError, match=r"buffer B: access_ptr: unknown access mask 'x'"):
        b.access_ptr("x")
    with pytest.raises(TVMError, match=r"buffer index 0 \(f\) has type float32"):
        b.vload([te.var("f", "float32"), 0])


def test_ir_builder_errors():
    ib = tvm.tir.ir_builder.create()
    with pytest.raises(TVMError, match=r"else_scope can only follow an if_scope"):
        ib.else_scope()
    with pytest.raises(TVMError, match=r"while_loop is not supported"):
        ib.while_loop(te.var("x") < 3)
    with pytest.raises(TVMError, match=r"for_range: unknown loop kind 'simd'"):
        ib.for_range(0, 4, kind="simd")
    with pytest.raises(TVMError, match=r"if_scope: the condition x has type int32; it must be boolean"):
        ib.if_scope(te.var("x"))
    with pytest.raises(TVMError, match=r"needs a thread axis such as te.thread_axis"):
        ib.scope_attr(te.var("x"), "thread_extent", 4)
    with pytest.raises(TVMError, match=r"buffer_ptr takes a buffer .*got 3"):
        ib.buffer_ptr(3)
    p = ib.pointer("int32", name="P")
    with pytest.raises(TVMError, match=r"store into P: data type does not match content type float32 vs "):
        p[0] = te.var("f", "float32")
    with pytest.raises(TVMError, match=r"index f into P has type float32"):
        p[te.var("f", "float32")]
    ib2 = tvm.tir.ir_builder.create()
    with pytest.raises(TVMError, match=r"get\(\) was called inside a construction scope"):
        with ib2.for_range(0, 3):
            ib2.get()


# -- te.extern -------------------------------------------------------------------------------------


def test_extern_construction_errors():
    A = te.placeholder((4,), name="A")
    I = te.placeholder((4,), name="I", dtype="int32")  # noqa: E741
    with pytest.raises(TVMError, match=r"extern C: inputs\[1\] must be a tensor, got 3"):
        te.extern((4,), [A, 3], lambda ins, outs: None, name="C")
    with pytest.raises(TVMError, match=r"extern C: 1 inputs but 2 in_buffers"):
        te.extern((4,), [A], lambda ins, outs: None, name="C", in_buffers=[tvm.tir.decl_buffer((4,))] * 2)
    with pytest.raises(TVMError, match=r"cannot infer the output type from inputs of types \['float32', "):
        te.extern((4,), [A, I], lambda ins, outs: None, name="C")
    with pytest.raises(TVMError, match=r"extern C: fcompute 'returns_list' must return a statement"):
        def returns_list(ins, outs):
            return [1]
        te.extern((4,), [A], returns_list, name="C")
    with pytest.raises(TVMError, match=r"in_buffers\[0\] \(Q\) is int32 but input A is float32"):
        te.extern((4,), [A], lambda ins, outs: None, name="C",
                  in_buffers=[tvm.tir.decl_buffer((4,), "int32", name="Q")])
    with pytest.raises(TVMError, match=r"out_buffers\[0\] \(R\) is int32 but dtype says float32"):
        te.extern((4,), [A], lambda ins, outs: None, name="C", dtype="float32",
                  out_buffers=[tvm.tir.decl_buffer((4,), "int32", name="R")])


def _copy(ins, outs):
    ib = tvm.tir.ir_builder.create()
    a, o = ib.buffer_ptr(ins[0]), ib.buffer_ptr(outs[0])
    with ib.for_range(0, ins[0].shape[0], name="i") as i:
        o[i] = a[i]
    return ib.get()


def test_extern_lowering_errors():
    A = te.placeholder((8,), name="A")
    B = te.compute((8,), lambda i: A[i] + 1.0, name="B")
    C = te.extern((8,), [B], _copy, name="C")
    s = te.create_schedule(C.op)
    s[B].compute_inline()
    with pytest.raises(LoweringError, match=r"stage B is inlined \(compute_inline\), but extern op C "):
        tvm.lower(s, [A, C])

    A2 = te.placeholder((4, 6), name="A2")
    B2 = te.compute((4, 6), lambda i, j: A2[i, j] * 2.0, name="B2")

    def copy2(ins, outs):
        ib = tvm.tir.ir_builder.create()
        ib.emit(outs[0].vstore([0, 0], ins[0].vload([0, 0])))
        return ib.get()

    C2 = te.extern((4, 6), [B2], copy2, name="C2")
    s2 = te.create_schedule(C2.op)
    s2[B2].storage_align(B2.op.axis[0], 8, 1)
    with pytest.raises(LoweringError, match=r"extern op C2: in_buffers\[0\] \(B2\) bound to tensor B2: "
                                            r"the tensor is stored with stride 9 in dimension 0 .*declare "
                                            r"it with strides="):
        tvm.lower(s2, [A2, C2])

    C3 = te.extern((8,), [A], _copy, name="C3", in_buffers=[tvm.tir.decl_buffer((6,), name="W")])
    with pytest.raises(LoweringError, match=r"in_buffers\[0\] \(W\) bound to tensor A: shape\[0\]: "
                                            r"declared 6 but the tensor has 8"):
        tvm.lower(te.create_schedule(C3.op), [A, C3])

    def stray_pointer(ins, outs):
        ib = tvm.tir.ir_builder.create()
        p = ib.pointer("float32", name="stray")
        o = ib.buffer_ptr(outs[0])
        o[0] = p[0]
        return ib.get()

    C4 = te.extern((8,), [A], stray_pointer, name="C4")
    with pytest.raises(LoweringError, match=r"extern op C4: its body accesses stray, which is neither "):
        tvm.lower(te.create_schedule(C4.op), [A, C4])


def test_extern_stage_has_no_loops_to_schedule():
    A = te.placeholder((8,), name="A")
    C = te.extern((8,), [A], _copy, name="C")
    D = te.compute((8,), lambda i: C[i] * 2.0, name="D")
    s = te.create_schedule(D.op)
    with pytest.raises(TVMError, match=r"stage C: compute_at: only computed tensors can be scheduled "
                                       r"\(this is an extern op: it has no loops\)"):
        s[C].compute_at(s[D], D.op.axis[0])
    with pytest.raises(TVMError, match=r"stage C: compute_inline: .*extern op"):
        s[C].compute_inline()


def test_extern_input_attached_elsewhere():
    A = te.placeholder((8,), name="A")
    B = te.compute((8,), lambda i: A[i] + 1.0, name="B")
    D = te.compute((8,), lambda i: B[i] * 2.0, name="D")
    C = te.extern((8,), [B], _copy, name="C")
    E = te.compute((8,), lambda i: C[i] + D[i], name="E")
    s = te.create_schedule(E.op)
    s[B].compute_at(s[D], D.op.axis[0])
    with pytest.raises(LoweringError, match=r"stage B is computed at D but also read by C, which is outside"):
        tvm.lower(s, [A, E])


# -- packed calls ------------------------------------------------------------------------------------


def test_call_packed_argument_errors():
    with pytest.raises(TVMError, match=r"call_packed: the first argument must be the registered function"):
        tvm.tir.call_packed(3)
    A = te.placeholder((4,), name="A")
    with pytest.raises(TVMError, match=r"call_packed\('f'\): argument 1 is the tensor A; pass a buffer"):
        tvm.tir.call_packed("f", A)
    with pytest.raises(TVMError, match=r"call_packed\('f'\): argument 1 \(\{\}\) is neither a buffer"):
        tvm.tir.call_packed("f", {})


def test_call_packed_inside_a_loop_is_refused():
    A = te.placeholder((4,), name="A")

    def looped(ins, outs):
        ib = tvm.tir.ir_builder.create()
        with ib.for_range(0, 4, name="i"):
            ib.emit(tvm.tir.call_packed("f", ins[0], outs[0]))
        return ib.get()

    C = te.extern((4,), [A], looped, name="C")
    with pytest.raises(BuildError, match=r"call_packed\('f'\) sits inside a loop.*top level of the extern "):
        tvm.build(te.create_schedule(C.op), [A, C], "c")


def _packed_module(name):
    A = te.placeholder((4,), name="A")
    C = te.extern((4,), [A], lambda ins, outs: tvm.tir.call_packed(name, ins[0], outs[0]), name="C")
    return tvm.build(te.create_schedule(C.op), [A, C], "c")


def test_missing_packed_function_is_named_when_called():
    f = _packed_module("errors.not_registered")
    with pytest.raises(PackedFuncError, match=r"Cannot find global function errors.not_registered; "
                                              r"register it with @tvm.register_func"):
        f(np.zeros(4, "float32"), np.zeros(4, "float32"))


def test_packed_function_exception_is_wrapped():
    def boom(x, y):
        raise KeyError("inner problem")

    tvm.register_func("errors.boom", boom, override=True)
    try:
        f = _packed_module("errors.boom")
        with pytest.raises(PackedFuncError, match=r"packed function 'errors.boom' raised KeyError") as info:
            f(np.zeros(4, "float32"), np.zeros(4, "float32"))
        assert isinstance(info.value.__cause__, KeyError)
    finally:
        remove_global_func("errors.boom")


def test_register_func_errors():
    with pytest.raises(TVMError, match=r"register_func: the name must be a non-empty string, got 3"):
        tvm.register_func(3, lambda: None)
    with pytest.raises(ValueError, match=r"Cannot find global function errors.none"):
        tvm.get_global_func("errors.none")


def test_extern_op_tutorial_cblas_part_is_out_of_scope():
    """The tutorial's cblas section: the import and the packed function both name the scope rule."""
    with pytest.raises(ImportError, match=r"tvm.contrib.cblas .*outside the scope of kernels"):
        from kernels.contrib import cblas  # noqa: F401
    assert tvm.get_global_func("tvm.contrib.cblas.matmul", allow_missing=True) is None
    n, l_, m = 16, 8, 12
    A = te.placeholder((n, l_), name="A")
    B = te.placeholder((l_, m), name="B")
    C = te.extern((n, m), [A, B], lambda ins, outs: tvm.tir.call_packed(
        "tvm.contrib.cblas.matmul", ins[0], ins[1], outs[0], False, False), name="C")
    f = tvm.build(te.create_schedule(C.op), [A, B, C], "llvm")
    with pytest.raises(PackedFuncError, match=r"tvm.contrib.cblas.matmul: tvm.contrib.cblas \(BLAS-backed "
                                              r"operators\) is outside the scope"):
        f(np.zeros((n, l_), "float32"), np.zeros((l_, m), "float32"), np.zeros((n, m), "float32"))


def test_access_ptr_of_an_unbound_buffer():
    buf = tvm.tir.decl_buffer((4,), name="Free")
    A = te.placeholder((4,), name="A")
    B = te.compute((4,), lambda i: A[i] + tvm.tir.call_extern("float32", "g", buf.access_ptr("r")), name="B")
    with pytest.raises(BuildError, match=r"access_ptr of a buffer that is not bound to any storage"):
        tvm.build(te.create_schedule(B.op), [A, B], "c")


# -- saved modules -----------------------------------------------------------------------------------


def _small_module():
    A = te.placeholder((4,), name="A")
    B = te.compute((4,), lambda i: A[i] * 2.0, name="B")
    return tvm.build(te.create_schedule(B.op), [A, B], "c")


def test_load_module_errors(tmp_path):
    with pytest.raises(ModuleFormatError, match=r"load_module: .*nothing.so does not exist"):
        tvm.runtime.load_module(str(tmp_path / "nothing.so"))
    (tmp_path / "plain.so").write_bytes(b"\x7fELF")
    with pytest.raises(ModuleFormatError, match=r"no description plain.tvm_meta.json beside .*plain.so"):
        tvm.runtime.load_module(str(tmp_path / "plain.so"))
    mod = _small_module()
    mod.export_library(str(tmp_path / "m.so"))
    meta = tmp_path / "m.tvm_meta.json"
    data = json.loads(meta.read_text())
    meta.write_text("{not json")
    with pytest.raises(ModuleFormatError, match=r"m.tvm_meta.json is not valid JSON"):
        tvm.runtime.load_module(str(tmp_path / "m.so"))
    meta.write_text(json.dumps(dict(data, format="other/9")))
    with pytest.raises(ModuleFormatError, match=r"format 'other/9'; this kernels reads 'kbench-module/1'"):
        tvm.runtime.load_module(str(tmp_path / "m.so"))
    broken = dict(data)
    bad = {"text": "n ** 2", "tree": ["pow", ["var", "n"], ["int", 2]]}
    broken["kernels"] = [{"kind": "kernel", "name": "f", "params": [], "grid": [bad], "block": [1]}]
    meta.write_text(json.dumps(broken))
    with pytest.raises(ModuleFormatError, match=r"grid: malformed host expression"):
        tvm.runtime.load_module(str(tmp_path / "m.so"))
    (tmp_path / "bad.tar").write_bytes(b"not a tar")
    with pytest.raises(ModuleFormatError, match=r"bad.tar is not a module archive"):
        tvm.runtime.load_module(str(tmp_path / "bad.tar"))


def test_export_library_errors(tmp_path):
    mod = _small_module()
    with pytest.raises(ArgumentError, match=r"export_library: fcompile is not supported"):
        mod.export_library(str(tmp_path / "m.so"), fcompile=lambda *a: None)
    with pytest.raises(TVMError, match=r"export_library: the folder .*missing does not exist"):
        mod.export_library(str(tmp_path / "missing" / "m.so"))
    from harness.execute.portable import freeze, thaw
    from kernels.runtime import build_module

    thawed = build_module(thaw(freeze(mod.spec, {})))
    with pytest.raises(TVMError, match=r"is a Python function .*only modules built by kernels.build can be "
                                       r"exported"):
        thawed.export_library(str(tmp_path / "t.so"))


def test_import_module_and_create_shared_errors(tmp_path):
    from kernels.contrib import cc

    host = _small_module()
    with pytest.raises(ArgumentError, match=r"import_module: expected a device module"):
        host.import_module(3)
    A = te.placeholder((4,), name="A")
    B = te.compute((4,), lambda i: A[i] + 1.0, name="B")
    s = te.create_schedule(B.op)
    s[B].bind(B.op.axis[0], te.thread_axis("threadIdx.x"))
    gpu = tvm.build(s, [A, B], "opencl")
    with pytest.raises(ArgumentError, match=r"import_module: Module\(c, default_function\) has no device "):
        host.import_module(gpu.imported_modules[0])
    s2 = te.create_schedule(B.op)
    s2[B].bind(B.op.axis[0], te.thread_axis("blockIdx.x"))
    other = tvm.build(s2, [A, B], "opencl")
    with pytest.raises(ArgumentError, match=r"is not the device code of"):
        gpu.import_module(other)
    with pytest.raises(BuildError, match=r"create_shared: the object file .*none.o does not exist"):
        cc.create_shared(str(tmp_path / "x.so"), [str(tmp_path / "none.o")])
    host.save(str(tmp_path / "a.o"))
    gpu.save(str(tmp_path / "b.o"))
    with pytest.raises(BuildError, match=r"hold 2 kernels modules; a library loaded by load_module holds"):
        cc.create_shared(str(tmp_path / "x.so"), [str(tmp_path / "a.o"), str(tmp_path / "b.o")])


# -- math functions ---------------------------------------------------------------------------------


def test_math_function_errors():
    i = te.var("i")
    with pytest.raises(TVMError, match=r"fmod: arguments i and 2 have type int32; fmod needs floats"):
        te.fmod(i, 2)
    with pytest.raises(TVMError, match=r"popcount: argument f has type float32; popcount needs an integer"):
        te.popcount(te.var("f", "float32"))
    with pytest.raises(TVMError, match=r"ldexp: exponent 1.5f32 has type float32"):
        tvm.tir.ldexp(te.var("f", "float32"), 1.5)
    with pytest.raises(TVMError, match=r"truncmod: arguments .* have type float32; truncmod needs integers"):
        te.truncmod(te.var("f", "float32"), 2.0)
    with pytest.raises(TVMError, match=r"truncdiv: division by zero"):
        te.truncdiv(3, 0)
    with pytest.raises(TVMError, match=r"call_llvm_intrin .* not supported: kernels emits C-family source"):
        tvm.tir.call_llvm_intrin("float32", "llvm.fma", 1, 2, 3)


# -- testing helpers ---------------------------------------------------------------------------------


def test_testing_helper_errors():
    with pytest.raises(TVMError, match=r"parametrize_targets takes target strings such as 'llvm', got 3"):
        tvm.testing.parametrize_targets(3, "llvm")
    with pytest.raises(TVMError, match=r"device_enabled takes a target string"):
        tvm.testing.device_enabled(tvm.cpu(0))
    x = te.var("x")
    with pytest.raises(TVMError, match=r"the range of x must be constant"):
        tvm.testing.check_bool_expr_is_true(x > 0, {x: (0, te.var("n"))})
