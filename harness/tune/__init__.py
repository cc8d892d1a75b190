"""`kbench tune`: the tuned cases of a suite searched with the tuning engine (kernels.tuning), every
trial and the best configuration per device kept in the result store.

Modules: :mod:`~harness.tune.task` (a workload variant and its suite knob lists as a tuning task),
:mod:`~harness.tune.runner` (the builder and runner a session measures with: in-process, checking
every candidate against the workload's float64 reference, or on Ray workers),
:mod:`~harness.tune.session` (a suite's tuned cases tuned one device at a time, results stored).
Nothing is imported here: the package loads the compiler and the tuners when a module is used.
"""
