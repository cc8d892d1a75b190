"""TOML suites: a file naming workloads, shapes, dtypes, variants (with knob grids) and targets,
expanded into the list of :class:`~harness.model.Case` a run builds and times.

Format (docs/SUITES.md has the full reference)::

    [suite]
    name = "tutorials"                   # required; becomes Case.suite
    description = "..."                  # optional
    targets = ["c", "opencl", "cuda"]    # default targets of every [[workload]] (default: all three)
    regression_threshold = 0.03          # practical threshold of the verdicts, a fraction in (0, 1)
    timeout_s = 120                      # default per-case timeout in seconds
    imports = []                         # Python modules imported first (they may register workloads)

    [measure]                            # optional overrides of harness.model.MeasureConfig fields
    max_time_s = 2.0

    [[workload]]                         # one entry per workload (a workload may have several)
    name = "row_sum"                     # required; a name in kernels.workloads
    params = { n = [1024, 4096], m = [1024, 333] }   # required; every shape parameter, cartesian product
                                         # (sizes; a parameter with named choices, e.g. a layout, takes
                                         #  those names: layout = ["NN", "TN"])
    dtypes = ["float32"]                 # default: the workload's first dtype
    variants = ["default", { name = "rfactor_crossthread", knobs = { factor = [16, 32] } }]
                                         # default: every variant with its default knobs
                                         # { name = ..., tuned = true, knobs = { ... } }: the knob
                                         #   lists are a tuning space (kbench tune), not cases
    targets = ["c", "cuda"]              # overrides [suite].targets
    rtol = 1e-5                          # default: the workload's tolerance for the dtype, else
    atol = 1e-5                          #   kernels.workloads.base.default_tolerance(dtype)
    regression_threshold = 0.05          # per-workload override of the suite's threshold
    timeout_s = 60                       # per-workload override of the suite's timeout
    peers = ["torch.sum(dim=1)"]         # peers timed alongside (names offered by the workload)
    gpu_models = ["H100"]                # cuda cases of this workload only on these GPU models

Expansion, per [[workload]] entry in file order: variants (in the listed order) x knob grid (the
cartesian product of the knob lists; a scalar is a one-element list; knobs left out keep the
variant's defaults) x shape grid (cartesian product in the workload's parameter order) x dtypes x
targets; a variant marked ``tuned = true`` gives one case per shape x dtype x target instead of one
per point of its knob grid (``Case.tuned``; the grid is its tuning space, ``Suite.space_for``),
which `kbench run` runs with the best configuration `kbench tune` stored. A target is used for a
variant only when the variant can build for it; a target that no variant of the entry can build is
an error when the entry names it, and skipped when it comes from [suite].targets (unless no entry
at all can use it). ``Case.gpu_model`` is "" here: harness.plan
assigns GPU models.

Every problem is found before anything runs and raised as :class:`SuiteError` whose text is
``file:line: message``; the line is the one of the offending key or value (for ``[[workload]]``
entries, the n-th ``[[workload]]`` header counts as the n-th entry). The CLI exits with
:data:`EXIT_CONFIG` (4) on it.
"""


from harness.suite.parse import load_suite, parse_suite
from harness.suite.values import EXIT_CONFIG, TARGETS, Suite, SuiteError

__all__ = ["EXIT_CONFIG", "TARGETS", "Suite", "SuiteError", "load_suite", "parse_suite"]
