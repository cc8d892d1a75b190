"""Code generation: a lowered function -> source text plus launch description (FuncSpec)."""

from __future__ import annotations

from typing import Dict, List, Tuple

from ..errors import BuildError
from ..target import DEFAULT_CUDA_ARCH
from ..lower import PrimFunc
from ..runtime.spec import BufferArg, DerivedDim, FuncSpec, KernelSpec, LaunchDims, ScalarArg, Workspace
from ..tir import attr
from ..tir.expr import Buffer, Call, IntImm, Var
from ..tir.functor import bound_vars, collect
from ..tir.printer import expr_str
from ..tir.simplify import simplify, structural_equal
from ..tir.stmt import Allocate, AttrStmt, BufferStore, For, LetStmt, SeqStmt, Stmt, seq
from .c import CCodegen
from .c_family import CFamilyCodegen
from .cuda import CUDACodegen, check_shared_limit
from .host import buffers_by_data, host_expr, packed_call, split_packed
from .opencl import OpenCLCodegen
from .vector_dtypes import scalarize_vector_buffers

DIALECTS = {"c": CCodegen, "cuda": CUDACodegen, "opencl": OpenCLCodegen}
_TAGS = ["blockIdx.x", "blockIdx.y", "blockIdx.z", "threadIdx.x", "threadIdx.y", "threadIdx.z"]


def shape_vars_of(func: PrimFunc) -> Dict[str, Var]:
    out: Dict[str, Var] = {}
    for b in func.buffers:
        for d in b.shape:
            for v in collect(d, lambda n: isinstance(n, Var)):
                prev = out.get(v.name)
                if prev is not None and prev is not v:
                    raise BuildError(f"two different shape variables are both named {v.name!r}; give "
                                     "symbolic sizes distinct names")
                out[v.name] = v
    return out


def scalar_params_of(func: PrimFunc) -> List[Tuple[int, Var]]:
    """The scalar variables passed by value, with their positions in the argument list."""
    return [(k, p) for k, p in enumerate(func.params) if isinstance(p, Var) and p.dtype != "handle"]


def call_vars_of(func: PrimFunc, shape_vars: Dict[str, Var]) -> Dict[str, Var]:
    """Every variable known when the function is called: the shape variables of the arguments and
    the scalar arguments (checked not to clash by name)."""
    out = dict(shape_vars)
    for k, v in scalar_params_of(func):
        prev = out.get(v.name)
        if prev is not None and prev is not v:
            raise BuildError(f"scalar argument {k} ({v.name}) and a shape variable of the arguments are two "
                             f"different variables named {v.name!r}; give them distinct names")
        out[v.name] = v
    return out


def hoist_global_allocs(stmt: Stmt) -> Tuple[List[Allocate], Stmt]:
    """Pull global allocations that sit outside every loop to the front (they become workspaces)."""
    allocs: List[Allocate] = []

    def visit(s: Stmt) -> Stmt:
        if isinstance(s, Allocate) and s.buffer.scope == attr.GLOBAL:
            allocs.append(s)
            return visit(s.body)
        if isinstance(s, SeqStmt):
            return seq(*[visit(x) for x in s.seq])
        return s

    return allocs, visit(stmt)


def _dim(e, shape_vars) -> object:
    e = simplify(e)
    if isinstance(e, IntImm):
        return e.value
    if isinstance(e, Var) and e.name in shape_vars:
        return e.name
    text = expr_str(e)
    return DerivedDim(text, host_expr(e, f"dimension {text}"))


def _check_host_expr(e, shape_vars, what: str) -> None:
    for v in collect(e, lambda n: isinstance(n, Var)):
        if v.name not in shape_vars or shape_vars[v.name] is not v:
            raise BuildError(f"{what} = {expr_str(e)} depends on {v.name}, which is not a shape variable of "
                             "the arguments; launch sizes may only depend on argument shapes (bind loops "
                             "whose extent does not depend on an enclosing unbound loop)")


def _thread_attrs(nodes: List) -> List[AttrStmt]:
    return [n for n in nodes if isinstance(n, AttrStmt) and n.attr_key == attr.THREAD_EXTENT]


def _thread_extents(nodes: List, shape_vars) -> Dict[str, object]:
    found: Dict[str, object] = {}
    for a in _thread_attrs(nodes):
        tag = a.node.thread_tag
        ext = simplify(a.value)
        prev = found.get(tag)
        if prev is not None and not structural_equal(prev, ext):
            raise BuildError(f"{tag} is bound with two different extents in one kernel ({expr_str(prev)} and "
                             f"{expr_str(ext)}); loops bound to one thread tag must have equal extents")
        _check_host_expr(ext, shape_vars, f"thread extent of {tag}")
        found[tag] = ext
    return found


def _used_buffers(nodes: List) -> List[Buffer]:
    seen, out = set(), []
    for n in nodes:
        b = getattr(n, "buffer", None)
        if not isinstance(b, Buffer):
            continue
        if id(b) not in seen:
            seen.add(id(b))
            out.append(b)
    return out


def _launch_extents(cg: CFamilyCodegen, nodes: List, func: PrimFunc, shape_vars) -> Dict[str, object]:
    """The thread extents of one printed function (a GPU kernel must bind threads, C must not);
    ``nodes`` are all the function's IR nodes."""
    if cg.device_kernels:
        ext = _thread_extents(nodes, shape_vars)
        if not ext:
            stores = {n.buffer.name for n in nodes if isinstance(n, BufferStore)}
            raise BuildError(
                f"target {cg.target}: a loop nest of {func.name} (writing "
                f"{', '.join(sorted(stores)) or '?'}) "
                "is not bound to any "
                "GPU thread; bind its loops with s[T].bind(axis, te.thread_axis('blockIdx.x')) "
                "(did you forget to bind?)")
        return ext
    tb = _thread_attrs(nodes)
    if tb:
        raise BuildError(f"target {cg.target} cannot run loops bound to GPU threads "
                         f"({tb[0].node.thread_tag}); build this schedule for cuda or opencl, or drop the "
                         "bind() calls")
    return {}


def generate(func: PrimFunc, target: str, arch: str = DEFAULT_CUDA_ARCH) -> FuncSpec:
    """Print ``func`` (already lowered for ``target``) and describe how to call it."""
    if target not in DIALECTS:
        raise BuildError(f"unknown target {target!r}; expected one of {', '.join(DIALECTS)}")
    sizes = shape_vars_of(func)  # non-negative: they are sizes
    shape_vars = call_vars_of(func, sizes)  # what the host knows at call time: sizes and scalar arguments
    described = func  # the arguments as callers see them (vector types kept)
    func = scalarize_vector_buffers(func)
    allocs, body = hoist_global_allocs(func.body)
    workspaces = [a.buffer for a in allocs]
    ws_size = {id(a.buffer): a.extent for a in allocs}
    for a in allocs:
        _check_host_expr(a.extent, shape_vars, f"size of buffer {a.buffer.name}")
    # packed calls run on the host between native parts: one function (C) or kernel (GPU) each
    parts = split_packed(body, func.name, cg_cls_split(target, shape_vars, sizes))
    natives = sum(1 for p in parts if not isinstance(p, Call))
    host_buffers = buffers_by_data(list(func.buffers) + workspaces)
    cg_cls = DIALECTS[target]
    built_arch = cg_cls(shape_vars).build_arch(arch)
    sources: List[str] = []
    helpers: List[str] = []
    headers: List[str] = []
    prefixes: set = set()
    kernels: List[KernelSpec] = []
    uses_omp = False
    for k, part in enumerate(parts):
        if isinstance(part, Call):
            kernels.append(packed_call(part, host_buffers, shape_vars, func.name))
            continue
        cg: CFamilyCodegen = cg_cls(shape_vars, sizes)
        if not cg.device_kernels and natives > 1:
            name = f"{func.name}_part{k}"
        else:
            name = cg.function_name(func.name, k)
        nodes = collect(part, lambda n: True)  # one walk; the checks below filter it
        ext = _launch_extents(cg, nodes, func, shape_vars)
        # parameters: argument buffers, workspaces, then shape variables (sorted)
        used = _used_buffers(nodes)
        used_ids = {id(b) for b in used}
        params: List[str] = []
        decls: List[str] = []
        for b in list(func.buffers) + workspaces:
            if id(b) in used_ids:
                cname = cg.names.get(b, b.name)
                params.append(b.name)
                decls.append(cg.param_decl("buffer", b, cname))
        for b in used:
            if cg.device_kernels and b.scope == attr.GLOBAL and not any(
                    b is x for x in list(func.buffers) + workspaces):
                raise BuildError(f"buffer {b.name}: global memory inside a loop nest cannot be allocated on "
                                 f"{target}; compute the stage at root or in shared/local scope")
        bound = bound_vars(nodes)
        free = [v for v in nodes if isinstance(v, Var) and v not in bound and v.dtype != "handle"]
        for v in free:
            if v.name not in shape_vars or shape_vars[v.name] is not v:
                raise BuildError(f"variable {v.name} is used in {name} but is neither a loop variable, a "
                                 "shape variable of the arguments nor a scalar argument; pass it in the "
                                 "argument list, e.g. tvm.build(s, [A, B, x])")
        for vname in sorted({v.name for v in free}):
            v = shape_vars[vname]
            cname = cg.names.get(v, vname)
            params.append(vname)
            decls.append(cg.param_decl("scalar", v, cname))
        block_threads = cg.launch_bounds([ext.get(t) for t in _TAGS[3:]])
        cg.lines = []
        cg.prepare(part, nodes)
        if isinstance(cg, CUDACodegen):  # static or dynamic shared memory, from the whole kernel
            cg._plan_dynamic_shared(nodes)
            cg._check_local(name, nodes)
        cg.stmt(part, 1)
        body_lines = cg.lines
        src = [cg.kernel_signature(name, decls, block_threads) + " {"]
        src += ["  " + h for h in cg.hoisted]
        src += body_lines
        src.append("}")
        sources.append("\n".join(src))
        for h in cg.helpers():
            if h not in helpers:
                helpers.append(h)
        hd = cg.header()
        if hd and hd not in headers:
            headers.append(hd)
        prefixes.update(p for p in [cg.source_prefix()] if p)
        uses_omp = uses_omp or cg.uses_openmp

        def launch(tags, _ext=ext):
            return LaunchDims(tuple(host_expr(_ext[t], f"thread extent of {t}") if t in _ext else 1
                                    for t in tags))

        dyn_shared = cg.dynamic_shared_bytes if isinstance(cg, CUDACodegen) else 0
        if dyn_shared:
            check_shared_limit(name, dyn_shared, built_arch, cg.dynamic_arrays)
        concurrent = bool(kernels) and isinstance(kernels[-1], KernelSpec) and any(
            isinstance(n, AttrStmt) and n.attr_key == attr.CONCURRENT_LAUNCH for n in nodes)
        kernels.append(KernelSpec(name, tuple(params), launch(_TAGS[:3]), launch(_TAGS[3:]),
                                  dynamic_shared_bytes=dyn_shared, concurrent=concurrent))
    source = "".join(headers) + ("\n".join(helpers) + "\n" if helpers else "") + "\n\n".join(sources) + "\n"
    if prefixes:  # a line the compiler reads (kernels.target.CUDA_PTXAS_O1)
        source = "".join(sorted(prefixes)) + source
    args = tuple(BufferArg(b.name, b.dtype, tuple(_dim(d, shape_vars) for d in b.shape))
                 for b in described.buffers)
    wss = tuple(Workspace(b.name, b.dtype, _size_fn(host_expr(ws_size[id(b)], f"size of buffer {b.name}")))
                for b in workspaces)
    scalars = tuple(ScalarArg(v.name, v.dtype, k) for k, v in scalar_params_of(func))
    return FuncSpec(func.name, target, source, args, tuple(sorted(shape_vars)), wss, tuple(kernels),
                    arch=built_arch, uses_openmp=uses_omp, scalars=scalars)


def cg_cls_split(target: str, shape_vars, sizes=None):
    """The dialect's split of a body into the functions it prints."""
    return DIALECTS[target](shape_vars, sizes).split_functions


def _size_fn(size):
    """A workspace size callable (a constant becomes a one-value expression, so it can be saved)."""
    if isinstance(size, int):
        from ..runtime.spec import HostExpr

        return HostExpr(str(size), ("int", size))
    return size
