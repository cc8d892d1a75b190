"""export_library / runtime.load_module: a saved module runs like the one built (C, OpenCL; CUDA's
cubin round trip here, its run marked ``gpu``)."""

from __future__ import annotations

import json
import tarfile

import numpy as np
import pytest

import kernels as tvm
from kernels import te
from kernels.runtime import remove_global_func
from kernels.runtime.serialize import spec_from_json, spec_to_json
from kernels.runtime.spec import PackedCall


def _shrink_and_sum(target: str):
    """B[i] = A[i] + A[i + 2] (a derived output size n - 2), C = a row reduction through a temp."""
    n, m = te.size_var("n"), te.size_var("m")
    A = te.placeholder((n,), name="A")
    B = te.compute((n - 2,), lambda i: A[i] + A[i + 2], name="B")
    X = te.placeholder((m, 8), name="X")
    T = te.compute((m, 8), lambda i, j: X[i, j] * 2.0, name="T")
    k = te.reduce_axis((0, 8), name="k")
    C = te.compute((m,), lambda i: te.sum(T[i, k], axis=k), name="C")
    s = te.create_schedule([B.op, C.op])
    if target != "c":
        for t in (B, T, C):
            xo, xi = s[t].split(t.op.axis[0], factor=4)
            s[t].bind(xo, te.thread_axis("blockIdx.x"))
            s[t].bind(xi, te.thread_axis("threadIdx.x"))
    return tvm.build(s, [A, X, B, C], target)


def _check_shrink_and_sum(mod, dev, n=11, m=6):
    rng = np.random.default_rng(0)
    a, x = rng.random(n, dtype=np.float32), rng.random((m, 8), dtype=np.float32)
    b, c = tvm.nd.empty((n - 2,), "float32", dev), tvm.nd.empty((m,), "float32", dev)
    mod(tvm.nd.array(a, dev), tvm.nd.array(x, dev), b, c)
    np.testing.assert_allclose(b.numpy(), a[:-2].astype(np.float64) + a[2:], rtol=1e-6)
    np.testing.assert_allclose(c.numpy(), (x.astype(np.float64) * 2).sum(axis=1), rtol=1e-5)


@pytest.mark.parametrize("target", ["c", "opencl"])
@pytest.mark.parametrize("suffix", [".so", ".tar"])
def test_export_and_load_runs_like_the_original(tmp_path, target, suffix):
    mod = _shrink_and_sum(target)
    dev = tvm.cpu(0) if target == "c" else tvm.opencl(0)
    path = tmp_path / f"deploy{suffix}"
    mod.export_library(str(path))
    if suffix == ".tar":
        with tarfile.open(path) as tar:
            assert sorted(tar.getnames()) == sorted(["meta.json", "lib.so" if target == "c" else "module.cl"])
    else:
        assert (tmp_path / "deploy.tvm_meta.json").exists()
    loaded = tvm.runtime.load_module(str(path))
    assert type(loaded) is type(mod) and loaded.entry_name == mod.entry_name
    assert loaded.get_source() == mod.get_source()
    for n, m in ((11, 6), (40, 3)):
        _check_shrink_and_sum(loaded, dev, n, m)
    timer = loaded.time_evaluator(loaded.entry_name, dev, number=1, repeat=2)
    a, x = tvm.nd.array(np.ones(5, "float32"), dev), tvm.nd.array(np.ones((2, 8), "float32"), dev)
    res = timer(a, x, tvm.nd.empty((3,), "float32", dev), tvm.nd.empty((2,), "float32", dev))
    assert len(res.results) == 2


def test_loaded_module_checks_arguments(tmp_path):
    mod = _shrink_and_sum("c")
    mod.export_library(str(tmp_path / "m.so"))
    loaded = tvm.runtime.load_module(str(tmp_path / "m.so"))
    with pytest.raises(tvm.errors.ArgumentError,
                       match=r"argument B \(index 2\): shape\[0\] must be \(n - 2\) = 3, got 4"):
        ones = [np.ones(shape, "float32") for shape in (5, (2, 8), 4, 2)]
        loaded(*ones)


def test_exported_packed_call_is_looked_up_when_called(tmp_path):
    n = te.size_var("n")
    A = te.placeholder((n,), name="A")
    B = te.extern(A.shape, [A],
                  lambda ins, outs: tvm.tir.call_packed("export.scale", ins[0], outs[0], n, 0.5), name="B")
    C = te.compute(A.shape, lambda i: B[i] + 1.0, name="C")
    mod = tvm.build(te.create_schedule(C.op), [A, C], "c")
    mod.export_library(str(tmp_path / "p.tar"))
    loaded = tvm.runtime.load_module(str(tmp_path / "p.tar"))
    assert [type(k) for k in loaded.spec.kernels] == [type(k) for k in mod.spec.kernels]
    tvm.register_func("export.scale", lambda x, y, count, f: y.copyfrom(x.numpy() * count * f), override=True)
    try:
        a = np.arange(6, dtype="float32")
        c = np.zeros(6, "float32")
        loaded(a, c)
        np.testing.assert_allclose(c, a * 6 * 0.5 + 1)
    finally:
        remove_global_func("export.scale")


def test_spec_description_round_trips():
    mod = _shrink_and_sum("opencl")
    data = json.loads(json.dumps(spec_to_json(mod.spec)))  # through real JSON text
    back = spec_from_json(data)
    assert back == mod.spec  # names, params, args, shape variables (callables compare by value below)
    for env in ({"n": 11, "m": 6}, {"n": 100, "m": 33}):
        for k0, k1 in zip(mod.spec.kernels, back.kernels):
            assert not isinstance(k0, PackedCall)
            assert k0.grid(env) == k1.grid(env) and k0.block(env) == k1.block(env)
        for w0, w1 in zip(mod.spec.workspaces, back.workspaces):
            assert w0.size(env) == w1.size(env)
        derived0 = mod.spec.args[2].shape[0]
        derived1 = back.args[2].shape[0]
        assert derived0(env) == derived1(env) == env["n"] - 2 and derived1.text == derived0.text


@pytest.mark.parametrize("target", ["llvm", "opencl"])
def test_save_object_create_shared_and_import_module(target):
    """The getting-started tutorial's flow: save the host object (and the device code), link it
    with contrib.cc.create_shared, load both and join them with import_module."""
    from kernels.contrib import cc, utils

    tgt = tvm.target.Target(target=target, host="llvm")
    n = te.var("n")
    A, B = te.placeholder((n,), name="A"), te.placeholder((n,), name="B")
    C = te.compute(A.shape, lambda i: A[i] + B[i], name="C")
    s = te.create_schedule(C.op)
    if target == "opencl":
        bx, tx = s[C].split(C.op.axis[0], factor=64)
        s[C].bind(bx, te.thread_axis("blockIdx.x"))
        s[C].bind(tx, te.thread_axis("threadIdx.x"))
    fadd = tvm.build(s, [A, B, C], tgt, name="myadd")
    dev = tvm.device(tgt.kind.name, 0)
    temp = utils.tempdir()
    fadd.save(temp.relpath("myadd.o"))
    expected = {"myadd.o", "myadd.tvm_meta.json", "myadd.so"}
    if target == "opencl":
        fadd.imported_modules[0].save(temp.relpath("myadd.cl"))
        expected.add("myadd.cl")
    cc.create_shared(temp.relpath("myadd.so"), [temp.relpath("myadd.o")])
    assert set(temp.listdir()) == expected
    fadd1 = tvm.runtime.load_module(temp.relpath("myadd.so"))
    if target == "opencl":
        fadd1.import_module(tvm.runtime.load_module(temp.relpath("myadd.cl")))
    a = np.random.default_rng(3).random(1000, dtype=np.float32)
    b = np.random.default_rng(4).random(1000, dtype=np.float32)
    c = tvm.nd.empty((1000,), "float32", dev)
    fadd1(tvm.nd.array(a, dev), tvm.nd.array(b, dev), c)
    np.testing.assert_allclose(c.numpy(), a.astype(np.float64) + b, rtol=1e-6)
    temp.remove()
    assert not __import__("os").path.exists(temp.temp_dir)


def test_create_shared_links_c_objects_with_openmp(tmp_path):
    from kernels.contrib import cc

    A = te.placeholder((64,), name="A")
    B = te.compute((64,), lambda i: A[i] * A[i], name="B")
    s = te.create_schedule(B.op)
    s[B].parallel(B.op.axis[0])
    mod = tvm.build(s, [A, B], "c")
    assert mod.spec.uses_openmp
    mod.save(str(tmp_path / "sq.o"))
    cc.create_shared(str(tmp_path / "libsq.so"), [str(tmp_path / "sq.o")])
    assert (tmp_path / "libsq.tvm_meta.json").exists()  # the description follows the library's name
    loaded = tvm.runtime.load_module(str(tmp_path / "libsq.so"))
    a = np.arange(64, dtype="float32")
    b = np.zeros(64, "float32")
    loaded(a, b)
    np.testing.assert_array_equal(b, a * a)


def test_cuda_cubin_round_trip(tmp_path):
    from kernels.contrib.nvcc import find_nvcc

    if find_nvcc() is None:
        pytest.skip("no nvcc")
    mod = _shrink_and_sum("cuda -arch=sm_80")
    mod.export_library(str(tmp_path / "k.cubin"))
    assert (tmp_path / "k.cubin").read_bytes() == mod.binary
    loaded = tvm.runtime.load_module(str(tmp_path / "k.cubin"))  # loading the spec needs no GPU
    assert loaded.arch == "sm_80" and loaded.binary == mod.binary
    assert loaded.imported_modules[0].get_source() == mod.imported_modules[0].get_source()
    assert [k.name for k in loaded.spec.kernels] == [k.name for k in mod.spec.kernels]
    mod.export_library(str(tmp_path / "k.tar"))
    assert tvm.runtime.load_module(str(tmp_path / "k.tar")).binary == mod.binary
    mod.imported_modules[0].save(str(tmp_path / "dev.ptx"))
    ptx = (tmp_path / "dev.ptx").read_bytes()
    assert b".visible .entry" in ptx and b"default_function_kernel0" in ptx
    from_ptx = tvm.runtime.load_module(str(tmp_path / "dev.ptx"))
    assert from_ptx.binary == ptx + b"\0"  # NUL-terminated for the driver
    mod.save(str(tmp_path / "host.o"))  # the host stub; the device code comes from the description
    assert (tmp_path / "host.o").read_bytes()[:4] == b"\x7fELF"


@pytest.mark.gpu
def test_cuda_export_and_load_runs(tmp_path):
    mod = _shrink_and_sum("cuda")
    mod.export_library(str(tmp_path / "k.tar"))
    loaded = tvm.runtime.load_module(str(tmp_path / "k.tar"))
    _check_shrink_and_sum(loaded, tvm.cuda(0))
    mod.save(str(tmp_path / "k.o"))
    mod.imported_modules[0].save(str(tmp_path / "k.ptx"))
    from kernels.contrib import cc

    cc.create_shared(str(tmp_path / "k.so"), [str(tmp_path / "k.o")])
    host = tvm.runtime.load_module(str(tmp_path / "k.so"))
    host.import_module(tvm.runtime.load_module(str(tmp_path / "k.ptx")))
    _check_shrink_and_sum(host, tvm.cuda(0))
