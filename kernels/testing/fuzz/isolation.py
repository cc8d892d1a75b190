"""The fuzzer's warm children: samples run in ``multiprocessing`` "spawn" children, each in its own
temporary folder, kept warm and replaced after a crash, a hang past the timeout or a fatal CUDA
error, so that one faulting kernel costs one sample, never the run.

The children are the fuzzer's own rather than :class:`kernels.contrib.isolate.IsolatedWorker`'s: a
worker there runs one item at a time and blocks its caller, so ``jobs`` children would each need a
thread, and a worker busy with an item cannot be killed from another thread (an interrupted run would
wait for the items in flight); its child answers a poisoned CUDA context with its own report instead
of the item's value (the fuzzer keeps the sample's result, knobs and detail, and replaces the child
after any failure while running on CUDA); and it gives up on the first child that dies while starting
(the fuzzer on the third).
"""

from __future__ import annotations

import multiprocessing
import os
import shutil
import tempfile
import time
from multiprocessing.connection import wait as _wait_conns
from typing import Iterable, Iterator, Optional, Union

from .sample import execute


def _child(conn, build_only: Union[bool, str], workdir: str) -> None:
    import logging
    import warnings

    # what a device compiler leaves in the working directory (PoCL writes a CFG .dot before some of
    # its aborts) lands in the worker's own folder, removed with the worker
    os.chdir(workdir)
    logging.disable(logging.WARNING)
    warnings.simplefilter("ignore")
    conn.send("ready")
    while True:
        try:
            sample = conn.recv()
        except EOFError:
            return
        if sample is None:
            return
        res = execute(sample, build_only)
        conn.send(res)
        if res.get("fatal"):
            return  # a CUDA error poisons the context: the parent starts a fresh child


class _Worker:
    def __init__(self, ctx, build_only: Union[bool, str]):
        self.conn, child = ctx.Pipe()
        self.workdir = tempfile.mkdtemp(prefix="kbench-fuzz-")
        self.proc = ctx.Process(target=_child, args=(child, build_only, self.workdir), daemon=True)
        self.proc.start()
        child.close()
        self.sample: Optional[dict] = None
        self.since = 0.0
        self.ready = False

    def stop(self, kill: bool = False) -> None:
        try:
            if kill:
                self.proc.kill()
            else:
                self.conn.send(None)
        except (OSError, BrokenPipeError):
            pass
        self.proc.join(timeout=5)
        if self.proc.is_alive():
            self.proc.kill()
            self.proc.join(timeout=5)
        self.conn.close()
        shutil.rmtree(self.workdir, ignore_errors=True)


def run_isolated(samples: Iterable[dict], jobs: int = 1, timeout: float = 120.0,
                 build_only: Union[bool, str] = False, deadline: Optional[float] = None) -> Iterator[dict]:
    """Run ``samples`` in ``jobs`` warm child processes; yield each result as it comes.

    A child that dies (a segfault, a CUDA error) is recorded as ``crashed`` for its sample, one that
    runs past ``timeout`` seconds is killed and recorded as ``timeout``; either is replaced. No new
    sample starts after ``deadline`` (a ``time.monotonic()`` value).
    """
    ctx = multiprocessing.get_context("spawn")
    it = iter(samples)
    workers = [_Worker(ctx, build_only) for _ in range(max(1, jobs))]
    exhausted = False
    start_failures = 0
    try:
        while True:
            now = time.monotonic()
            if not exhausted and (deadline is None or now < deadline):
                for wk in workers:
                    if wk.ready and wk.sample is None:
                        nxt = next(it, None)
                        if nxt is None:
                            exhausted = True
                            break
                        wk.sample, wk.since = nxt, time.monotonic()
                        wk.conn.send(nxt)
            elif not exhausted:
                exhausted = True
            busy = [wk for wk in workers if wk.sample is not None or not wk.ready]
            if exhausted and not any(wk.sample is not None for wk in workers):
                return
            ready = _wait_conns([wk.conn for wk in busy], timeout=1.0)
            for k, wk in enumerate(workers):
                if wk.conn in ready:
                    try:
                        msg = wk.conn.recv()
                    except (EOFError, OSError):
                        msg = None
                    if msg == "ready":
                        wk.ready = True
                        continue
                    if msg is None:  # the child died
                        s = wk.sample
                        wk.proc.join(timeout=5)
                        code = wk.proc.exitcode
                        wk.stop(kill=True)
                        if s is None and not wk.ready:
                            start_failures += 1
                            if start_failures >= 3:
                                raise RuntimeError(f"the fuzzer's child process dies before it is ready "
                                                   f"(exit code {code}), {start_failures} times")
                        workers[k] = _Worker(ctx, build_only)
                        if s is not None:
                            yield _bare(s, "crashed", f"the child process died (exit code {code})")
                        elif exhausted:
                            return
                        continue
                    wk.sample = None
                    yield msg
                    if msg.get("fatal"):
                        wk.stop(kill=True)
                        workers[k] = _Worker(ctx, build_only)
                elif wk.sample is not None and time.monotonic() - wk.since > timeout:
                    s = wk.sample
                    wk.stop(kill=True)
                    workers[k] = _Worker(ctx, build_only)
                    yield _bare(s, "timeout", f"no result after {timeout:.0f} s; the child was killed")
    finally:
        for wk in workers:
            wk.stop(kill=wk.sample is not None)


def _bare(sample: dict, outcome: str, detail: str) -> dict:
    out = {k: sample.get(k) for k in ("id", "space", "target", "kind", "workload", "variant", "dtype",
                                       "params", "knobs", "index", "seed")}
    out.update(outcome=outcome, detail=detail, sample=sample)
    return out
