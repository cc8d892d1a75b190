"""Tuning tasks made from TensorIR with no template: the design space is generated from the block
structure of the function (meta_schedule's way), then searched by the same tuners as templates.

For a GPU target and a block with two spatial and one reduction iterators (a matrix-product-like
computation, the notes' ``MyModuleMatmul``), the space is multi-level tiling: each spatial loop split
into blocks x threads x a per-thread tile, the reduction into an outer loop x a step; the output
accumulated in a ``local`` cache written back by each thread; both inputs staged in ``shared`` memory
at the outer reduction loop and fetched cooperatively by all the block's threads with vector loads;
the step loop unrolled or not. The knobs are the tilings (split knobs ``tile_y = [-1, threads,
per-thread]``, ``tile_x``, ``tile_k = [-1, step]``, whose factors divide the extents, so every point
builds), the fetch vector width and the unroll. For a CPU target and such a block the space is multi-level tiling too
(``cpu_tile2s1r``): ``i -> i0 x i1 x i2``, ``j -> j0 x j1 x j2``, ``k -> k0 x k1`` in the order
``i0 j0 i1 j1 k0 k1 i2 j2`` (knobs ``tile_i = [-1, i1, i2]``, ``tile_j``, ``tile_k = [-1, k1]``), the outer tiles fused into one parallel loop, an ``i2 x j2`` register
tile accumulated in a ``local`` write cache (written back at ``j1``), ``j2`` vectorized, ``k1``
unrolled or not. For any other block with spatial loops (and for the other targets)
the space is: spatial loops fused, split by a number of threads (GPU: bound to blockIdx.x /
threadIdx.x; CPU: an outer parallel loop and a vectorized inner one).

:class:`TIRTask` has what the tuners use: ``config_space``, ``flop``, ``target``, ``workload`` (a
hash of the function's TVMScript) and ``instantiate(config) -> (IRModule, argument buffers)``;
:meth:`TIRTask.schedule` gives the ``tir.Schedule`` (with its trace) of a configuration.
"""

from __future__ import annotations

import hashlib
from typing import TYPE_CHECKING, Any, List, Sequence, Tuple

from ..errors import TVMError
from .space import ConfigSpace

if TYPE_CHECKING:
    from ..tir.schedule import Schedule

__all__ = ["TIRTask", "TIRTaskError"]


class TIRTaskError(TVMError):
    """A function the design-space generator cannot work on (named)."""


def _divisors(n: int, cap: int) -> List[int]:
    return [d for d in range(1, min(n, cap) + 1) if n % d == 0]


def _blocks(func) -> List[Any]:
    from ..tir.block import BlockRealize
    from ..tir.functor import collect

    return [r.block for r in collect(func.body, lambda x: isinstance(x, BlockRealize))
            if r.block.name_hint != "root"]


class TIRTask:
    """A TensorIR function to tune for ``target`` (see the module docstring)."""

    def __init__(self, mod: Any, target: Any, task_name: str = "main"):
        from ..target import Target
        from ..tir.block import IterVarType
        from ..tir.function import IRModule, PrimFunc

        if isinstance(mod, PrimFunc):
            mod = IRModule({"main": mod})
        if not isinstance(mod, IRModule):
            raise TIRTaskError(f"tune_tir: expected an IRModule or PrimFunc, got {type(mod).__name__}")
        self.mod = mod
        self.task_name = task_name
        self.target = target if isinstance(target, Target) else Target(str(target))
        self.func_name = "main" if "main" in mod else next(iter(mod.functions))
        func = mod[self.func_name]
        blocks = _blocks(func)
        if len(blocks) != 1:
            raise TIRTaskError(f"tune_tir: function {self.func_name} has {len(blocks)} blocks "
                               f"({', '.join(b.name_hint for b in blocks)}); the design-space generator "
                               "takes one compute block")
        self.block = blocks[0]
        kinds = [iv.iter_type for iv in self.block.iter_vars]
        self.extents = [int(iv.dom.extent) for iv in self.block.iter_vars]
        self.spatial = [k == IterVarType.DataPar for k in kinds]
        gpu = self.target.kind.name in ("cuda", "opencl")
        s2r1 = kinds == [IterVarType.DataPar, IterVarType.DataPar, IterVarType.CommReduce]
        self.kind = ("tile2s1r" if gpu else "cpu_tile2s1r") if s2r1 else "fuse_split"
        self.gpu = gpu
        text = mod.script() if hasattr(mod, "script") else str(mod)
        self.workload = (f"tir/{task_name}", hashlib.sha1(text.encode()).hexdigest()[:16])
        self.config_space = ConfigSpace()
        self._define(self.config_space)
        n = 1
        for e in self.extents:
            n *= e
        self.flop = float(2 * n)  # one multiply-add (or one operation pair) per point of the block
        self.buffers = [b for _, b in func.buffer_map]

    def _define(self, cfg: ConfigSpace) -> None:
        # every tiling is a split knob whose factors divide the extent (meta_schedule's perfect
        # tiles): each point of the space is a schedule that builds, none is refused for its shape
        if self.kind == "tile2s1r":
            ni, nj, nk = self.extents
            threads_y = [d for d in (4, 8, 16, 32) if ni % d == 0] or [1]
            threads_x = [d for d in (4, 8, 16, 32) if nj % d == 0] or [1]
            steps = [d for d in (4, 8, 16, 32) if nk % d == 0] or [1]
            per_thread = (1, 2, 4, 8, 16)
            cfg.define_split("tile_y", ni, num_outputs=3,
                             filter=lambda e: e.size[1] in threads_y and e.size[2] in per_thread)
            cfg.define_split("tile_x", nj, num_outputs=3,
                             filter=lambda e: e.size[1] in threads_x and e.size[2] in per_thread)
            cfg.define_split("tile_k", nk, num_outputs=2, filter=lambda e: e.size[1] in steps)
            cfg.define_knob("vector", [1, 2, 4])
            cfg.define_knob("unroll_k", [0, 1])
        elif self.kind == "cpu_tile2s1r":
            ni, nj, nk = self.extents
            lanes = [d for d in (8, 16, 32, 64) if nj % d == 0] or [1]
            cfg.define_split("tile_i", ni, num_outputs=3,
                             filter=lambda e: e.size[1] in (1, 2, 4, 8, 16) and e.size[2] in (1, 2, 4, 8))
            cfg.define_split("tile_j", nj, num_outputs=3,
                             filter=lambda e: e.size[1] in (1, 2, 4, 8) and e.size[2] in lanes)
            cfg.define_split("tile_k", nk, num_outputs=2,
                             filter=lambda e: e.size[1] in (1, 4, 8, 16, 32, 64))
            cfg.define_knob("unroll_k", [0, 1])
        else:
            total = 1
            for e, sp in zip(self.extents, self.spatial):
                total *= e if sp else 1
            cfg.define_knob("threads", [t for t in (32, 64, 128, 256, 512) if total % t == 0] or [1])

    # -- applying a configuration ---------------------------------------------------------------
    def schedule(self, config: Any):
        """The ``tir.Schedule`` of ``config`` (its trace records every step)."""
        from ..tir.schedule import Schedule

        values = config.to_values() if hasattr(config, "to_values") else dict(config)
        sch = Schedule(self.mod)
        if self.kind == "tile2s1r":
            self._tile(sch, values)
        elif self.kind == "cpu_tile2s1r":
            self._cpu_tile(sch, values)
        else:
            self._fuse_split(sch, values)
        return sch

    def _tile(self, sch, v) -> None:
        ni, nj, _ = self.extents
        (_, ty, ly), (_, tx, lx), (_, tk) = v["tile_y"], v["tile_x"], v["tile_k"]
        if ni % (ty * ly) or nj % (tx * lx):
            raise TIRTaskError(f"tiles {ty}x{ly} / {tx}x{lx} do not divide {ni} x {nj}")
        if ty * tx > 1024:
            raise TIRTaskError(f"{ty * tx} threads a block exceed 1024")
        block = sch.get_block(self.block.name_hint, self.func_name)
        c_local = sch.cache_write(block, 0, "local")
        i, j, k = sch.get_loops(block)
        i0, i1, i2 = sch.split(i, [None, ty, ly])
        j0, j1, j2 = sch.split(j, [None, tx, lx])
        k0, k1 = sch.split(k, [None, tk])
        sch.reorder(i0, j0, i1, j1, k0, k1, i2, j2)
        sch.reverse_compute_at(c_local, j1)
        sch.bind(i0, "blockIdx.y")
        sch.bind(j0, "blockIdx.x")
        t = sch.fuse(i1, j1)
        sch.bind(t, "threadIdx.x")
        # both inputs staged in shared memory, fetched by all the block's threads (the notes' helper)
        for idx in (0, 1):
            cache_read_and_coop_fetch(sch, block, ty * tx, idx, k0, vector=v["vector"])
        if v["unroll_k"]:
            sch.unroll(k1)
        sch.decompose_reduction(block, k0)

    def _cpu_tile(self, sch, v) -> None:
        ni, nj, _ = self.extents
        (_, i1, i2), (_, j1, j2), (_, tk) = v["tile_i"], v["tile_j"], v["tile_k"]
        if ni % (i1 * i2) or nj % (j1 * j2):
            raise TIRTaskError(f"tiles {i1}x{i2} / {j1}x{j2} do not divide {ni} x {nj}")
        block = sch.get_block(self.block.name_hint, self.func_name)
        c_local = sch.cache_write(block, 0, "local")
        i, j, k = sch.get_loops(block)
        li0, li1, li2 = sch.split(i, [None, i1, i2])
        lj0, lj1, lj2 = sch.split(j, [None, j1, j2])
        lk0, lk1 = sch.split(k, [None, tk])
        sch.reorder(li0, lj0, li1, lj1, lk0, lk1, li2, lj2)
        sch.reverse_compute_at(c_local, lj1)
        sch.parallel(sch.fuse(li0, lj0))
        if j2 > 1:
            sch.vectorize(lj2)
        if v["unroll_k"] and tk > 1:
            sch.unroll(lk1)
        sch.decompose_reduction(block, lk0)

    def _fuse_split(self, sch, v) -> None:
        block = sch.get_block(self.block.name_hint, self.func_name)
        loops = sch.get_loops(block)
        spatial = [lp for lp, sp in zip(loops, self.spatial) if sp]
        if not spatial:
            raise TIRTaskError("the block has no spatial loop to parallelize")
        if [sp for sp in self.spatial][:len(spatial)] != [True] * len(spatial):
            sch.reorder(*spatial)
        fused = sch.fuse(*spatial) if len(spatial) > 1 else spatial[0]
        outer, inner = sch.split(fused, [None, v["threads"]])
        if self.gpu:
            sch.bind(outer, "blockIdx.x")
            sch.bind(inner, "threadIdx.x")
        else:
            sch.parallel(outer)

    def instantiate(self, config: Any) -> Tuple[Any, Sequence[Any]]:
        """``(IRModule, argument buffers)`` of ``config``: what the builder builds and the runner
        fills with random data."""
        return self.schedule(config).mod, list(self.buffers)

    def __repr__(self) -> str:
        return (f"TIRTask({self.task_name}, {self.kind}, extents={self.extents}, "
                f"target={self.target.kind.name})")


# the GPU notes' cooperative fetch; kernels.workloads.tensorir (the notes' schedules) re-exports it
def cache_read_and_coop_fetch(sch: Schedule, block, nthread: int, read_idx: int, read_loc,
                              vector: int = 4) -> None:
    """The notes' helper: a shared cache of one input, fetched by all threads with ``vector``-wide
    vectors (the notes' 4; 1 fetches one element a thread and step)."""
    read_cache = sch.cache_read(block=block, read_buffer_index=read_idx, storage_scope="shared")
    sch.compute_at(block=read_cache, loop=read_loc)
    # the copy's own loops, inside read_loc: two for a 2-d tile (the notes fuse them), fewer where the
    # tile is one element wide along an axis (compute_at makes no loop of extent 1)
    loops = sch.get_loops(block=read_cache)
    at = sch.get(read_loc)
    own = loops[next(k for k, lp in enumerate(loops) if sch.get(lp) is at) + 1:]
    if not own:
        return  # one element: every thread copies it
    inner = own[0] if len(own) == 1 else sch.fuse(*own)
    _, tx, vec = sch.split(loop=inner, factors=[None, nthread, vector])
    if vector > 1:
        sch.vectorize(vec)
    sch.bind(tx, "threadIdx.x")
