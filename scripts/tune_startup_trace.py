"""Where the start of a `kbench tune` session goes: runs `kbench tune` with the same arguments and
prints, to stderr, the seconds since this process started at which the executor was made, each
batch was proposed, built and measured, and the session ended (a diagnostic of the fixed costs
that `scripts/device_tune_scaling.sh` sees as "trial 24 at ... s").

    python3 scripts/tune_startup_trace.py SUITE --tuner xgb --trials 96 --executor ray --db X.db

With TRACE_PROFILE=N the main thread is profiled until the first batch is built, and the N
functions of the project (kernels, harness) that took longest (cumulative) are printed.
"""

from __future__ import annotations

import functools
import sys
import time

T0 = time.time()


def note(what: str) -> None:
    print(f"[trace {time.time() - T0:7.2f} s] {what}", file=sys.stderr, flush=True)


def traced(fn, label):
    @functools.wraps(fn)
    def wrapper(*a, **kw):
        note(f"{label} starts")
        try:
            return fn(*a, **kw)
        finally:
            note(f"{label} ends")
    return wrapper


def _profile_until_first_build():
    """cProfile of the main thread up to the first batch built (TRACE_PROFILE=N: print N rows)."""
    import cProfile
    import os
    import pstats

    n = int(os.environ.get("TRACE_PROFILE", "0") or 0)
    if n <= 0:
        return lambda: None
    prof = cProfile.Profile()
    prof.enable()
    done = []

    def stop():
        if done:
            return
        done.append(1)
        prof.disable()
        st = pstats.Stats(prof, stream=sys.stderr).sort_stats("cumulative")
        st.print_stats(r"(kernels|harness|ray/_private/worker)", n)
    return stop


def main() -> int:
    stop_profile = _profile_until_first_build()
    note("imports start")
    from harness import cli
    from harness.execute import ray_executor
    from harness.tune import runner, session
    from kernels.tuning import tuner

    note("imports end")
    ray_executor.RayExecutor.__init__ = traced(ray_executor.RayExecutor.__init__, "executor")
    orig_option = runner.measure_option_for

    def option_for(*a, **kw):
        opt = orig_option(*a, **kw)
        build = traced(opt.builder.build, "build of a batch")

        def first_build(*a, **kw):
            stop_profile()  # the startup profiled: the build runs in the tuner's thread
            return build(*a, **kw)
        opt.builder.build = first_build
        opt.runner.run = traced(opt.runner.run, "measuring a batch")
        note("builder and runner made")
        return opt
    session.measure_option_for = option_for
    orig_next = tuner.ModelTuner.next_batch

    def next_batch(self, n):
        out = traced(orig_next, "proposal")(self, n)
        ex = self.extractor
        if ex is not None:
            note(f"features: {len(ex.cache)} known, {ex.extracted} extracted, {ex.seconds:.1f} s waited")
        return out
    tuner.ModelTuner.next_batch = next_batch
    tuner.ModelTuner._fit = traced(tuner.ModelTuner._fit, "model fit")
    try:
        return cli.main(["tune", *sys.argv[1:]])
    finally:
        stop_profile()
        note("session end")


if __name__ == "__main__":
    sys.exit(main())
