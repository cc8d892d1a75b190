"""``build``: schedule -> lowered IR -> target passes -> source -> runtime module."""

from __future__ import annotations

from .codegen import generate
from .errors import BuildError, TVMError
from .lower import IRModule, PrimFunc, is_tensor_ir, lower, lower_for_target, run_passes
from .runtime.cuda import default_arch
from .target import Target


def _check_no_threads(sch) -> None:
    for st in sch.stages:
        for iv, attr in st.iter_var_attrs.items():
            if attr.bind_thread is not None and attr.bind_thread.thread_tag not in ("vthread", "cthread") \
                    and any(iv is x for x in st.leaf_iter_vars):
                raise BuildError(f"stage {st.name}: axis {iv.var.name} is bound to "
                                 f"{attr.bind_thread.thread_tag}; "
                                 "target c cannot run GPU thread bindings (build for cuda or opencl, or drop "
                                 "the bind)")


def resolve_target(target) -> Target:
    if target is None:
        # as TVM: the current target context, else the host (TVM's llvm; here the C target)
        t = Target.current()
        return t if t is not None else Target("c")
    if isinstance(target, dict):
        if len(target) != 1:
            raise TVMError("build: a dict target must map exactly one target to one module")
        target = next(iter(target))
    return Target(target)


def build_spec(inputs, args=None, target=None, name: str = "default_function"):
    """Lower and generate code; returns the runtime's FuncSpec (no native compilation)."""
    tgt = resolve_target(target)
    if is_tensor_ir(inputs):
        from .lower.from_blocks import tir_function

        func = lower_for_target(run_passes(tir_function(inputs, tgt.kind, name)), tgt.kind)
        arch = tgt.arch or (default_arch() if tgt.kind == "cuda" else "")
        return generate(func, tgt.kind, arch)
    if isinstance(inputs, IRModule):
        func: PrimFunc = next(iter(inputs.functions.values()))
        func = PrimFunc(name if name != "default_function" else func.name, func.params, func.buffers,
                        func.body)
    else:
        if args is None:
            raise TVMError("build: the argument list is missing, e.g. tvm.build(s, [A, B], 'cuda')")
        func = lower(inputs, args, name=name)[name if name != "default_function" else "main"]
        func = PrimFunc(name, func.params, func.buffers, func.body)
    if tgt.kind == "c" and not isinstance(inputs, IRModule):
        _check_no_threads(inputs)
    func = lower_for_target(func, tgt.kind)
    arch = tgt.arch or (default_arch() if tgt.kind == "cuda" else "")
    return generate(func, tgt.kind, arch)


def build(inputs, args=None, target=None, target_host=None, name: str = "default_function", binds=None):
    """Build a schedule (or a lowered module) for ``target`` into a callable module.

    CUDA sources are compiled to a cubin with nvcc at once (no GPU needed); loading and running
    need one. OpenCL programs are compiled when first called; C is compiled at once.
    """
    spec = build_spec(inputs, args, target, name)
    from .runtime import build_module as _rt_build

    return _rt_build(spec)
