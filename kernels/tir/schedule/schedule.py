"""``tir.Schedule``: TensorIR scheduling over block and loop handles (TVM v0.10-v0.12 API).

A schedule holds the module being transformed (``sch.mod``), hands out handles (:class:`BlockRV`,
:class:`LoopRV`) and records every primitive in ``sch.trace``. Each primitive checks its
preconditions as TVM does and refuses with a :class:`~kernels.errors.ScheduleError` naming the
primitive, the block and the loop; a refused primitive leaves the schedule unchanged.
"""

from __future__ import annotations

import functools
import inspect
import random
from typing import Any, Callable, Dict, List, Optional, Sequence, Union

from ...errors import ScheduleError
from ..block import Block, BlockToken
from ..expr import IntImm, PrimExpr, const
from ..function import IRModule, PrimFunc, as_module
from ..stmt import For, ForKind
from . import annotate as _ann
from . import cache as _cache
from . import compute_at as _ca
from . import inline as _inline
from . import loops as _loops
from . import reduction as _red
from . import rfactor as _rf
from .analysis import consumers, producers
from .handles import BlockRV, ExprRV, LoopRV
from .sref import ModuleState, StmtSRef
from .state import ScheduleState, child_realizes
from .trace import Instruction, InstructionKind, Trace


def _traced(kind: str, list_output: bool = False):
    """Record a successful top-level call in the trace; undo a refused one."""

    def deco(fn: Callable) -> Callable:
        sig = inspect.signature(fn)

        @functools.wraps(fn)
        def wrapper(self: "Schedule", *args, **kwargs):
            snapshot = {k: st.func for k, st in self._states.items()}
            self._depth += 1
            try:
                result = fn(self, *args, **kwargs)
            except Exception as exc:
                for k, f in snapshot.items():
                    if self._states[k].func is not f:
                        self._states[k] = ScheduleState(f)
                if self._depth == 1 and isinstance(exc, ScheduleError) and self._render != "detail":
                    raise ScheduleError(_render(exc, self._render)) from None
                raise
            finally:
                self._depth -= 1
            outs = result if isinstance(result, (list, tuple)) else [result]
            self._symbols.update(o for o in outs if isinstance(o, (BlockRV, LoopRV, ExprRV)))
            if self._depth == 0:
                ba = sig.bind(self, *args, **kwargs)
                ba.apply_defaults()
                self._record(InstructionKind.get(kind), dict(list(ba.arguments.items())[1:]), result)
            else:
                self._decision = None  # a nested call is not recorded, nor is its decision
            return result

        return wrapper

    return deco


class Schedule:
    """The user-facing TensorIR schedule: ``sch = tvm.tir.Schedule(mod)``.

    Parameters
    ----------
    mod : IRModule or PrimFunc
        The module (or a function, scheduled as ``main``) to transform; it is not modified.
    seed : int, optional
        Seed of the sampling primitives (``sample_categorical``, ``sample_perfect_tile``).
    debug_mask
        Accepted for compatibility with TVM; every primitive here is always checked.
    error_render_level : str
        ``"detail"`` (the full message), ``"fast"`` (a short one) or ``"none"`` ("(not rendered)").
    """

    def __init__(self, mod: Union[IRModule, PrimFunc], *, seed: Optional[int] = None,
                 debug_mask: Union[str, int] = "none", error_render_level: str = "detail",
                 enable_check: bool = True):
        m = as_module(mod)
        self._states: Dict[str, ScheduleState] = {k: ScheduleState(f) for k, f in m.functions.items()}
        self._order = list(m.functions)
        self._func = "main" if "main" in self._states else self._order[0]
        self._trace = Trace()
        self._depth = 0
        self._decision: Any = None
        self._values: Dict[ExprRV, int] = {}
        self._rng = random.Random(seed if seed is not None and seed >= 0 else None)
        self._symbols: set = set()
        self._render = error_render_level
        if error_render_level not in ("detail", "fast", "none"):
            raise ScheduleError(f"Schedule: error_render_level {error_render_level!r} must be 'detail', "
                                "'fast' or 'none'")
        self._state_view: Optional[ModuleState] = None

    def _record(self, kind: InstructionKind, arguments: Dict[str, Any], result: Any) -> None:
        """Append the instruction of a top-level primitive call to the trace."""
        inputs: List[Any] = []
        for name in kind.inputs:
            if name[0] in "*+":
                inputs += list(arguments[name[1:]])
            else:
                inputs.append(arguments[name])
        if kind.name == "GetBlock":  # record the function the name was looked up in
            attrs: List[Any] = [result.name, result.func]
        else:
            attrs = [arguments[name] for name in kind.attrs]
        outs = list(result) if kind.list_output else ([] if result is None else [result])
        decision, self._decision = self._decision, None
        self._trace.append(Instruction(kind, inputs, attrs, outs), decision)

    # -- state -------------------------------------------------------------------------------------------
    @property
    def mod(self) -> IRModule:
        """IRModule: the module as scheduled so far."""
        return IRModule({k: self._states[k].func for k in self._order})

    @property
    def trace(self) -> Trace:
        """Trace: the primitives applied so far."""
        return Trace(self._trace.insts, self._trace.decisions)

    @property
    def func_working_on(self) -> str:
        return self._func

    def work_on(self, func_name: str) -> None:
        """Make ``func_name`` the default function of :meth:`get_block`."""
        if func_name not in self._states:
            raise ScheduleError(f"work_on: the module has no function {func_name!r}; it has "
                                f"{', '.join(self._order)}")
        self._func = func_name

    def copy(self) -> "Schedule":
        """An independent schedule in the same state (handles stay valid in both)."""
        out = Schedule.__new__(Schedule)
        out._states = {k: ScheduleState(st.func) for k, st in self._states.items()}
        out._order = list(self._order)
        out._func = self._func
        out._trace = Trace(self._trace.insts, self._trace.decisions)
        out._depth = 0
        out._decision = None
        out._values = dict(self._values)
        out._rng = random.Random()
        out._rng.setstate(self._rng.getstate())
        out._symbols = set(self._symbols)
        out._render = self._render
        out._state_view = None
        return out

    def seed(self, seed: int) -> None:
        """Seed the generator the sampling primitives draw from."""
        self._rng = random.Random(seed if seed >= 0 else None)

    def fork_seed(self) -> int:
        """A new seed drawn from this schedule's generator."""
        return self._rng.randrange(1, 2 ** 31 - 1)

    @property
    def state(self) -> ModuleState:
        """ModuleState: the module being scheduled, with references (:class:`StmtSRef`) to its blocks
        and loops (``tvm.tir.ScheduleState``)."""
        if self._state_view is None:
            self._state_view = ModuleState(_states=self._states, _order=self._order)
        return self._state_view

    def _check_symbol(self, prim: str, rv) -> None:
        if rv not in self._symbols:
            raise IndexError(f"{prim}: {rv!r} does not belong to this schedule (it was made by another "
                             "schedule, or removed with remove_rv)")

    def get_sref(self, rand_var_or_stmt) -> Optional[StmtSRef]:
        """The :class:`StmtSRef` of a block or loop handle (or of a Block / For of the module)."""
        if isinstance(rand_var_or_stmt, (Block, For)):
            return self.state.get_sref(rand_var_or_stmt)
        rv = rand_var_or_stmt
        if isinstance(rv, (BlockRV, LoopRV)):
            self._check_symbol("get_sref", rv)
            self.get(rv)
            if isinstance(rv, BlockRV):
                return self.state._block_sref(rv.func, rv.token)
            return self.state._loop_sref(rv.func, rv.var)
        raise ScheduleError(f"get_sref: expected a BlockRV, a LoopRV, a Block or a For, got "
                            f"{type(rv).__name__}")

    def get(self, rv) -> Union[Block, For, int]:
        """The block or loop a handle refers to now (the value of a sampled :class:`ExprRV`)."""
        if isinstance(rv, (BlockRV, LoopRV, ExprRV)):
            self._check_symbol("get", rv)
        if isinstance(rv, ExprRV):
            if rv not in self._values:
                raise ScheduleError("get: the ExprRV was not sampled by this schedule")
            return self._values[rv]
        if isinstance(rv, BlockRV):
            return self._state(rv.func).realize(rv.token, "get", rv.name).block
        if isinstance(rv, LoopRV):
            return self._state(rv.func).loop(rv.var, "get")
        raise ScheduleError(f"get: expected a BlockRV or a LoopRV, got {type(rv).__name__}")

    def show(self, rand_var=None) -> None:
        """Print what a handle refers to, or (without one) the trace and the module."""
        if rand_var is not None:
            from ...script.printer import stmt_script

            print(stmt_script(self.get(rand_var)))
            return
        print(self.trace)
        self.mod.show()

    def remove_rv(self, rand_var) -> None:
        """Forget a handle: later uses of it in this schedule raise IndexError."""
        self._check_symbol("remove_rv", rand_var)
        self._symbols.discard(rand_var)
        self._values.pop(rand_var, None)

    # -- argument checks ---------------------------------------------------------------------------------
    def _state(self, func: str) -> ScheduleState:
        return self._states[func]

    def _block(self, prim: str, rv) -> BlockRV:
        if isinstance(rv, str):
            return self.get_block(rv)
        if not isinstance(rv, BlockRV):
            raise ScheduleError(f"{prim}: expected a block (BlockRV from get_block, or a block name), got "
                                f"{type(rv).__name__} {rv!r}")
        return rv

    def _loop(self, prim: str, rv) -> LoopRV:
        if not isinstance(rv, LoopRV):
            raise ScheduleError(f"{prim}: expected a loop (LoopRV from get_loops, split or fuse), got "
                                f"{type(rv).__name__} {rv!r}")
        return rv

    def _same_func(self, prim: str, *rvs) -> ScheduleState:
        funcs = {rv.func for rv in rvs}
        if len(funcs) != 1:
            raise ScheduleError(f"{prim}: the handles belong to different functions "
                                f"({', '.join(sorted(funcs))})")
        return self._state(funcs.pop())

    def _brv(self, func: str, token: BlockToken) -> BlockRV:
        r = self._state(func).index.realize[token]
        return BlockRV(func, token, r.block.name_hint)

    # -- lookup ------------------------------------------------------------------------------------------
    @_traced("GetBlock")
    def get_block(self, name: str, func_name: Optional[str] = None) -> BlockRV:
        """The block called ``name`` (exactly one must exist)."""
        func = func_name or self._func
        if func not in self._states:
            raise ScheduleError(f"get_block: the module has no function {func!r}; it has "
                                f"{', '.join(self._order)}")
        st = self._state(func)
        tokens = st.index.by_name.get(name, [])
        if not tokens:
            known = sorted(n for n in st.index.by_name if n != "root")
            err = ScheduleError(f"get_block: Cannot find a block with the name: {name} in function {func}; "
                                f"its blocks are {', '.join(known) or 'none'}")
            err.fast_message = "get_block: Cannot find a block with the specified name"
            raise err
        if len(tokens) > 1:
            raise ScheduleError(f"get_block: {len(tokens)} blocks are named {name!r} in function {func}")
        return BlockRV(func, tokens[0], name)

    get_sblock = get_block  # TVM 0.2x's name (tvm.s_tir.Schedule)

    @_traced("GetLoops", list_output=True)
    def get_loops(self, block) -> List[LoopRV]:
        """The loops above ``block`` in its scope, outermost first."""
        b = self._block("get_loops", block)
        st = self._state(b.func)
        r = st.realize(b.token, "get_loops", b.name)
        return [LoopRV(b.func, lp.loop_var) for lp in st.index.loops_above(r)]

    @_traced("GetChildBlocks", list_output=True)
    def get_child_blocks(self, block_or_loop) -> List[BlockRV]:
        """The blocks directly under a block or a loop (not those nested in other blocks)."""
        if isinstance(block_or_loop, str):
            block_or_loop = self.get_block(block_or_loop)
        if not isinstance(block_or_loop, (BlockRV, LoopRV)):
            raise ScheduleError(f"get_child_blocks: expected a block or a loop, got "
                                f"{type(block_or_loop).__name__} "
                                f"{block_or_loop!r}")
        node = self.get(block_or_loop)
        return [BlockRV(block_or_loop.func, r.block.sref, r.block.name_hint) for r in child_realizes(node)]

    @_traced("GetProducers", list_output=True)
    def get_producers(self, block) -> List[BlockRV]:
        """The blocks of the same scope that write what ``block`` reads."""
        b = self._block("get_producers", block)
        st = self._state(b.func)
        r = st.realize(b.token, "get_producers", b.name)
        return [BlockRV(b.func, q.block.sref, q.block.name_hint)
                for q in producers(st.index.scope_block(r), r)]

    @_traced("GetConsumers", list_output=True)
    def get_consumers(self, block) -> List[BlockRV]:
        """The blocks of the same scope that read what ``block`` writes."""
        b = self._block("get_consumers", block)
        st = self._state(b.func)
        r = st.realize(b.token, "get_consumers", b.name)
        return [BlockRV(b.func, q.block.sref, q.block.name_hint)
                for q in consumers(st.index.scope_block(r), r)]

    # -- loops -------------------------------------------------------------------------------------------
    @_traced("Split", list_output=True)
    def split(self, loop, factors: Sequence[Optional[Union[int, PrimExpr]]],
              preserve_unit_iters: bool = True) -> List[LoopRV]:
        """Split ``loop`` into nested loops of the given extents; one factor may be None (inferred).

        ``split(i, [None, 128])`` on ``for i in range(1024)`` gives ``i_0`` (8) and ``i_1`` (128) with
        ``vi = i_0 * 128 + i_1``; a product larger than the extent adds ``T.where(... < 1024)``.
        """
        lv = self._loop("split", loop)
        if isinstance(factors, (list, tuple)):
            factors = [self.get(f) if isinstance(f, ExprRV) else f for f in factors]
        out = _loops.split(self._state(lv.func), lv.var, factors, preserve_unit_iters)
        return [LoopRV(lv.func, v) for v in out]

    @_traced("Fuse")
    def fuse(self, *loops, preserve_unit_iters: bool = True) -> LoopRV:
        """Fuse directly nested loops (outermost first) into one: ``i_j_fused`` with ``i = f // n_j``,
        ``j = f % n_j``."""
        lvs = [self._loop("fuse", x) for x in loops]
        st = self._same_func("fuse", *lvs) if lvs else self._state(self._func)
        return LoopRV(lvs[0].func if lvs else self._func,
                      _loops.fuse(st, [x.var for x in lvs], preserve_unit_iters))

    @_traced("Reorder")
    def reorder(self, *ordered_loops) -> None:
        """Reorder loops of one chain: ``reorder(i0, j0, i1, j1)`` puts them in that order in the
        positions they occupy."""
        lvs = [self._loop("reorder", x) for x in ordered_loops]
        if not lvs:
            return
        _loops.reorder(self._same_func("reorder", *lvs), [x.var for x in lvs])

    @_traced("Parallel")
    def parallel(self, loop) -> None:
        """Run ``loop`` on CPU threads.

        Every block under the loop must keep compact data flow (a complete block, or a reduction
        block whose reduction variables do not index its output; the only writer of its outputs) and
        the loop may compute only spatial block variables; otherwise the iterations would race and
        the primitive raises a ScheduleError naming the block and the rule. ``vectorize`` and
        ``bind`` check the same (``bind`` to ``threadIdx`` may compute a reduction variable).
        """
        lv = self._loop("parallel", loop)
        _loops.set_kind(self._state(lv.func), lv.var, ForKind.PARALLEL, "parallel")

    @_traced("Vectorize")
    def vectorize(self, loop) -> None:
        """Vectorize ``loop`` (the rules of :meth:`parallel` apply)."""
        lv = self._loop("vectorize", loop)
        _loops.set_kind(self._state(lv.func), lv.var, ForKind.VECTORIZED, "vectorize")

    @_traced("Unroll")
    def unroll(self, loop) -> None:
        """Unroll ``loop``."""
        lv = self._loop("unroll", loop)
        _loops.set_kind(self._state(lv.func), lv.var, ForKind.UNROLLED, "unroll")

    @_traced("Bind")
    def bind(self, loop, thread_axis: str) -> None:
        """Bind ``loop`` to a GPU thread index: ``bind(i0, "blockIdx.x")`` (the rules of
        :meth:`parallel` apply; a loop bound to ``threadIdx`` may compute a reduction variable)."""
        lv = self._loop("bind", loop)
        _loops.bind(self._state(lv.func), lv.var, thread_axis)

    # -- sampling ----------------------------------------------------------------------------------------
    @_traced("SampleCategorical")
    def sample_categorical(self, candidates: Sequence[int], probs: Sequence[float],
                           decision: Optional[int] = None) -> ExprRV:
        """Draw one of ``candidates`` with probabilities ``probs`` (the trace keeps the index drawn as
        the decision; replaying passes it back as ``decision``)."""
        cands = [int(c.value) if hasattr(c, "value") else int(c) for c in candidates]
        ps = [float(p.value) if hasattr(p, "value") else float(p) for p in probs]
        if not cands or len(cands) != len(ps):
            raise ScheduleError(f"sample_categorical: {len(cands)} candidates and {len(ps)} probabilities; "
                                "give one probability per candidate (at least one)")
        if any(p < 0 for p in ps) or sum(ps) <= 0:
            raise ScheduleError(f"sample_categorical: probabilities {ps} must be non-negative with a "
                                "positive sum")
        if decision is None:
            decision = self._rng.choices(range(len(cands)), weights=ps)[0]
        elif not isinstance(decision, int) or not 0 <= decision < len(cands):
            decision = int(decision.value) if hasattr(decision, "value") else decision
            if not isinstance(decision, int) or not 0 <= decision < len(cands):
                raise ScheduleError(f"sample_categorical: decision {decision!r} is not an index into the "
                                    f"{len(cands)} candidates")
        rv = ExprRV()
        self._values[rv] = cands[decision]
        self._decision = const(decision)
        return rv

    @_traced("SamplePerfectTile", list_output=True)
    def sample_perfect_tile(self, loop, n: int, max_innermost_factor: int = 16,
                            decision: Optional[Sequence[int]] = None) -> List[ExprRV]:
        """Draw ``n`` factors whose product is the extent of ``loop``, the innermost at most
        ``max_innermost_factor`` (the trace keeps them as the decision)."""
        lv = self._loop("sample_perfect_tile", loop)
        lp = self._state(lv.func).loop(lv.var, "sample_perfect_tile")
        if not isinstance(lp.extent, IntImm):
            raise ScheduleError(f"sample_perfect_tile: loop {lp.loop_var.name} has the non-constant extent "
                                f"{lp.extent}; perfect tiles need a constant extent")
        ext = lp.extent.value
        if not isinstance(n, int) or n < 1:
            raise ScheduleError(f"sample_perfect_tile: n = {n!r} must be a positive integer")
        if decision is None:
            facs = _perfect_tile(self._rng, ext, n, max_innermost_factor)
        else:
            facs = [int(d.value) if hasattr(d, "value") else int(d) for d in decision]
            prod = 1
            for f in facs:
                prod *= f
            if len(facs) != n or prod != ext:
                raise ScheduleError(f"sample_perfect_tile: decision {facs} is not {n} factors of the extent "
                                    f"{ext} of loop {lp.loop_var.name}")
        rvs = [ExprRV() for _ in facs]
        for rv, f in zip(rvs, facs):
            self._values[rv] = f
        self._decision = [const(f) for f in facs]
        return rvs

    @_traced("EnterPostproc")
    def enter_postproc(self) -> None:
        """Mark the start of post-processing in the trace (``simplified(remove_postproc=True)`` drops
        what follows)."""

    # -- caches ------------------------------------------------------------------------------------------
    @_traced("CacheRead")
    def cache_read(self, block, read_buffer_index: int, storage_scope: str,
                   consumer_blocks: Optional[Sequence] = None) -> BlockRV:
        """Read the ``read_buffer_index``-th buffer ``block`` reads through a copy in ``storage_scope``;
        returns the copy block (``A_shared``)."""
        b = self._block("cache_read", block)
        toks = None if consumer_blocks is None else \
            [self._block("cache_read", c).token for c in consumer_blocks]
        st = self._state(b.func)
        tok = _cache.cache_read(st, b.token, b.name, read_buffer_index, storage_scope, toks)
        return self._brv(b.func, tok)

    @_traced("CacheWrite")
    def cache_write(self, block, write_buffer_index: int, storage_scope: str,
                    consumer_blocks: Optional[Sequence] = None) -> BlockRV:
        """Make ``block`` write a copy in ``storage_scope`` and copy it back after; returns the copy-back
        block (``C_local``)."""
        b = self._block("cache_write", block)
        st = self._state(b.func)
        tok = _cache.cache_write(st, b.token, b.name, write_buffer_index, storage_scope)
        return self._brv(b.func, tok)

    # -- compute location --------------------------------------------------------------------------------
    @_traced("ComputeAt")
    def compute_at(self, block, loop, preserve_unit_loops: bool = False, index: int = -1) -> None:
        """Move producer ``block`` under ``loop``, before its first consumer, over the region the
        consumers there read."""
        b, lv = self._block("compute_at", block), self._loop("compute_at", loop)
        _ca.compute_at(self._same_func("compute_at", b, lv), b.token, b.name, lv.var, preserve_unit_loops,
                       index, reverse=False)

    @_traced("ReverseComputeAt")
    def reverse_compute_at(self, block, loop, preserve_unit_loops: bool = False, index: int = -1) -> None:
        """Move consumer ``block`` under ``loop``, after its producers, over the region they write there."""
        b, lv = self._block("reverse_compute_at", block), self._loop("reverse_compute_at", loop)
        _ca.compute_at(self._same_func("reverse_compute_at", b, lv), b.token, b.name, lv.var,
                       preserve_unit_loops, index, reverse=True)

    @_traced("ComputeInline")
    def compute_inline(self, block) -> None:
        """Substitute an elementwise ``block`` into its consumers and remove it."""
        b = self._block("compute_inline", block)
        _inline.compute_inline(self._state(b.func), b.token, b.name)

    @_traced("ReverseComputeInline")
    def reverse_compute_inline(self, block) -> None:
        """Fold an elementwise consumer ``block`` into its producer and remove it."""
        b = self._block("reverse_compute_inline", block)
        _inline.reverse_compute_inline(self._state(b.func), b.token, b.name)

    # -- reduction ---------------------------------------------------------------------------------------
    @_traced("DecomposeReduction")
    def decompose_reduction(self, block, loop) -> BlockRV:
        """Split reduction ``block`` into ``<name>_init`` (before ``loop``) and ``<name>_update``;
        returns the init block."""
        b, lv = self._block("decompose_reduction", block), self._loop("decompose_reduction", loop)
        st = self._same_func("decompose_reduction", b, lv)
        tok = _red.decompose_reduction(st, b.token, b.name, lv.var)
        return self._brv(b.func, tok)

    @_traced("RFactor")
    def rfactor(self, loop, factor_axis: int) -> BlockRV:
        """Factor the reduction of the block under ``loop`` over ``loop``: a block ``<name>_rf`` keeps
        one partial result per iteration of ``loop`` in ``<buffer>_rf`` (the extent of ``loop``
        inserted at ``factor_axis`` of the output's shape) and the block itself becomes the reduction
        of those partials (see :mod:`kernels.tir.schedule.rfactor`). Returns the ``_rf`` block."""
        lv = self._loop("rfactor", loop)
        st = self._state(lv.func)
        rf_block, _ = _rf.rfactor(st, lv.var, factor_axis)
        return self._brv(lv.func, rf_block.sref)

    # -- annotations -------------------------------------------------------------------------------------
    @_traced("StorageAlign")
    def storage_align(self, block, buffer_index: int, axis: int, factor: int, offset: int) -> None:
        """Pad the stride of ``axis`` of the ``buffer_index``-th buffer ``block`` writes so that
        ``stride % factor == offset``."""
        b = self._block("storage_align", block)
        _ann.storage_align(self._state(b.func), b.token, b.name, buffer_index, axis, factor, offset)

    @_traced("SetScope")
    def set_scope(self, block, buffer_index: int, storage_scope: str) -> None:
        """Move the ``buffer_index``-th buffer ``block`` writes to ``storage_scope``."""
        b = self._block("set_scope", block)
        _ann.set_scope(self._state(b.func), b.token, b.name, buffer_index, storage_scope)

    @_traced("Annotate")
    def annotate(self, block_or_loop, ann_key: str, ann_val: Any) -> None:
        """Set annotation ``ann_key`` of a block (``T.block_attr``) or a loop (``annotations=``)."""
        if isinstance(block_or_loop, str):
            block_or_loop = self.get_block(block_or_loop)
        if not isinstance(block_or_loop, (BlockRV, LoopRV)):
            raise ScheduleError(f"annotate: expected a block or a loop, got {type(block_or_loop).__name__}")
        _ann.annotate(self._state(block_or_loop.func), block_or_loop, ann_key, ann_val)

    @_traced("Unannotate")
    def unannotate(self, block_or_loop, ann_key: str) -> None:
        """Remove annotation ``ann_key``."""
        if isinstance(block_or_loop, str):
            block_or_loop = self.get_block(block_or_loop)
        _ann.unannotate(self._state(block_or_loop.func), block_or_loop, ann_key)

    def __repr__(self) -> str:
        return f"Schedule({', '.join(self._order)})"


def _render(exc: ScheduleError, level: str) -> str:
    """The message of ``exc`` at error_render_level ``level`` ("fast": the rule without the names of
    the program's parts where the primitive gives one; "none": nothing)."""
    if level == "none":
        return "ScheduleError: (not rendered)"
    return getattr(exc, "fast_message", None) or str(exc)


def _perfect_tile(rng: random.Random, extent: int, n: int, max_innermost: int) -> List[int]:
    """``n`` factors of ``extent`` drawn at random, the last at most ``max_innermost``: the innermost
    uniformly among the divisors allowed, then every prime factor of the rest to a random slot."""
    divisors = [d for d in range(1, min(extent, max(max_innermost, 1)) + 1) if extent % d == 0]
    inner = rng.choice(divisors) if n > 1 else extent
    facs = [1] * (n - 1) + [inner]
    rest, p = extent // inner, 2
    while rest > 1 and n > 1:
        while rest % p == 0:
            facs[rng.randrange(n - 1)] *= p
            rest //= p
        p += 1
        if p * p > rest and rest > 1:
            facs[rng.randrange(n - 1)] *= rest
            rest = 1
    return facs


__all__ = ["Schedule", "BlockRV", "LoopRV", "ExprRV"]
