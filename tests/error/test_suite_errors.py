"""Malformed suites: each fails in load_suite, before anything runs, with ``file:line: message``.

Every suite below marks the line the error must point at with ``# <-``; the test checks the exact
``path:line:`` prefix and the message's content.
"""

from __future__ import annotations

import re
import sys

import pytest

from harness.suite import EXIT_CONFIG, SuiteError, load_suite, parse_suite
from kernels import workloads

HEAD = """\
[suite]
name = "bad"
targets = ["c", "opencl"]
"""

ROW_SUM = """\
[[workload]]
name = "row_sum"
params = { n = [64], m = [45] }
dtypes = ["float32"]
"""

CASES = {
    # -- TOML syntax ---------------------------------------------------------------------------------
    "toml_unclosed_string": (HEAD + '[[workload]]\nname = "row_sum  # <-\n', r"invalid TOML: "),
    "toml_missing_equals": (HEAD + '[[workload]]\nname "row_sum"  # <-\n', r"invalid TOML: Expected '='"),
    "toml_duplicate_key": (HEAD + ROW_SUM + 'dtypes = ["float64"]  # <-\n', r"invalid TOML: "),
    # -- unknown keys ----------------------------------------------------------------------------------
    "unknown_top_table": (
        HEAD + ROW_SUM + "[sute]  # <-\nname = 'x'\n",
        r"unknown top-level key 'sute'; known keys: suite, measure, workload",
    ),
    "unknown_suite_key": (
        '[suite]\nname = "bad"\nthreshold = 0.1  # <-\n' + ROW_SUM,
        (
            r"unknown key 'threshold' in \[suite\]; known keys: name, description, targets, "
            r"regression_threshold, timeout_s, imports, import_paths"
        ),
    ),
    "unknown_measure_key": (
        HEAD + "[measure]\nmax_time_s = 1.0\nmax_time = 2  # <-\n" + ROW_SUM,
        r"unknown key 'max_time' in \[measure\] .*known keys: max_rel_ci, min_samples",
    ),
    "unknown_workload_key": (
        HEAD + ROW_SUM + ROW_SUM.replace('dtypes = ["float32"]', 'dtype = ["float32"]  # <-'),
        (
            r"unknown key 'dtype' in \[\[workload\]\] #2 \(row_sum\); known keys: name, "
            r"params, dtypes, variants"
        ),
    ),
    "unknown_variant_key": (
        HEAD + ROW_SUM + 'variants = [\n  "default",\n'
        '  { name = "split", knob = { factor = 8 } },  # <-\n]\n',
        r"unknown key 'knob' in a workload row_sum variant table; known keys: name, knobs",
    ),
    # -- unknown names ---------------------------------------------------------------------------------
    "unknown_workload": (
        HEAD + '[[workload]]\nname = "row_summ"  # <-\nparams = { n = [4] }\n',
        r"unknown workload 'row_summ'; known: conv2d_3x3, exp, log, matmul, matmul_tensorcore, "
        r"product_reduce, row_sum, vector_add, window_sum",
    ),
    "unknown_variant": (
        HEAD + ROW_SUM + 'variants = [\n  "default",\n  "fast",  # <-\n]\n',
        (
            r"workload row_sum has no variant 'fast'; variants: default, split, bind, "
            r"rfactor_crossthread"
        ),
    ),
    "unknown_knob": (
        HEAD + ROW_SUM + 'variants = [\n  { name = "split", knobs = { factor = [8, 16] } },\n'
        '  { name = "bind", knobs = { factor = [8], tile = 4 } },  # <-\n]\n',
        r"variant row_sum/bind has no knob 'tile'; knobs: rows, factor",
    ),
    "unknown_knob_default_variant": (
        HEAD + ROW_SUM + 'variants = [{ name = "default", knobs = { x = 1 } }]  # <-\n',
        r"variant row_sum/default has no knob 'x'; knobs: none",
    ),
    "unknown_suite_target": (
        '[suite]\nname = "bad"\ntargets = ["c",\n  "metal"]  # <-\n' + ROW_SUM,
        r"unknown target 'metal' \(\[suite\] targets\); targets: c, opencl, cuda",
    ),
    "unknown_workload_target": (
        HEAD + ROW_SUM + 'targets = ["c", "llvm"]  # <-\n',
        r"unknown target 'llvm' \(workload row_sum: targets\); targets: c, opencl, cuda",
    ),
    "unknown_param": (
        HEAD + '[[workload]]\nname = "exp"\nparams = { n = [4], m = [4] }  # <-\n',
        r"workload exp has no shape parameter 'm'; params: n",
    ),
    "unsupported_dtype": (
        HEAD + ROW_SUM.replace('dtypes = ["float32"]', 'dtypes = [\n  "float32",\n  "int8",  # <-\n]'),
        r"workload row_sum does not support dtype 'int8'; dtypes: float32, float64",
    ),
    "unknown_peer": (
        HEAD + ROW_SUM + 'peers = ["torch.sum(dim=1)", "jax.sum"]  # <-\n',
        r"workload row_sum offers no peer 'jax.sum'; peers: torch.sum\(dim=1\), cupy.sum\(axis=1\)",
    ),
    # -- wrong types -----------------------------------------------------------------------------------
    "param_zero": (
        HEAD + ROW_SUM.replace("params = { n = [64], m = [45] }", "params = { n = [64], m = [45, 0] }  # <-"),
        r"workload row_sum: params.m must be positive integers, got 0 \(integer\)",
    ),
    "param_float": (
        HEAD + '[[workload]]\nname = "exp"\nparams = { n = [1.5] }  # <-\n',
        r"workload exp: params.n must be positive integers, got 1.5 \(float\)",
    ),
    "param_string": (
        HEAD + '[[workload]]\nname = "exp"\n[workload.params]\nn = "big"  # <-\n',
        r"workload exp: params.n must be positive integers, got 'big' \(string\)",
    ),
    "param_bool": (
        HEAD + '[[workload]]\nname = "exp"\nparams = { n = true }  # <-\n',
        r"params.n must be positive integers, got True \(boolean\)",
    ),
    "params_not_table": (
        HEAD + '[[workload]]\nname = "exp"\nparams = [4]  # <-\n',
        r"workload exp: params must be a table of shape parameters \(n\), got \[4\] \(array\)",
    ),
    "dtype_not_string": (
        HEAD + ROW_SUM.replace('dtypes = ["float32"]', "dtypes = [32]  # <-"),
        r"workload row_sum: dtypes must be an array of non-empty strings, got 32 \(integer\)",
    ),
    "dtypes_not_array": (
        HEAD + ROW_SUM.replace('dtypes = ["float32"]', 'dtypes = "float32"  # <-'),
        r"workload row_sum: dtypes must be an array of strings, got 'float32' \(string\)",
    ),
    "rtol_string": (
        HEAD + ROW_SUM + 'rtol = "1e-5"  # <-\n',
        r"workload row_sum: rtol must be a non-negative number, got '1e-5' \(string\)",
    ),
    "atol_negative": (
        HEAD + ROW_SUM + "atol = -1e-5  # <-\n",
        r"workload row_sum: atol must be a non-negative number, got -1e-05 \(float\)",
    ),
    "suite_threshold_big": (
        '[suite]\nname = "bad"\nregression_threshold = 3  # <-\n' + ROW_SUM,
        (
            r"\[suite\] regression_threshold must be a fraction in \(0, 1\) \(e.g. 0.03 for 3 %\), "
            r"got 3 \(integer\)"
        ),
    ),
    "workload_threshold_zero": (
        HEAD + ROW_SUM + "regression_threshold = 0.0  # <-\n",
        r"workload row_sum: regression_threshold must be a fraction in \(0, 1\)",
    ),
    "suite_timeout_negative": (
        '[suite]\nname = "bad"\ntimeout_s = -5  # <-\n' + ROW_SUM,
        r"\[suite\] timeout_s must be a positive number of seconds, got -5",
    ),
    "suite_name_not_string": (
        "[suite]\nname = 7  # <-\n" + ROW_SUM,
        r"\[suite\] needs `name`, a non-empty string, got 7 \(integer\)",
    ),
    "workload_name_not_string": (
        HEAD + "[[workload]]\nname = 7  # <-\n",
        r"\[\[workload\]\] #1: name must be a string, got 7 \(integer\)",
    ),
    "variants_not_array": (
        HEAD + ROW_SUM + 'variants = "split"  # <-\n',
        r"workload row_sum: variants must be an array of variant names",
    ),
    "variant_not_name": (
        HEAD + ROW_SUM + 'variants = ["split", 3]  # <-\n',
        r"workload row_sum: a variant must be a name or a \{ name, knobs \} table, got 3",
    ),
    "knob_wrong_type": (
        HEAD + ROW_SUM + 'variants = [\n  { name = "split", knobs = { rows = 4 } },\n'
        '  { name = "split", knobs = { factor = ["16"] } },  # <-\n]\n',
        (
            r"variant row_sum/split: knob 'factor' takes integer values \(default 16\), "
            r"got '16' \(string\)"
        ),
    ),
    "knobs_not_table": (
        HEAD + ROW_SUM + 'variants = [{ name = "split", knobs = 4 }]  # <-\n',
        r"workload row_sum: knobs of variant 'split' must be a table, got 4 \(integer\)",
    ),
    "variant_table_without_name": (
        HEAD + ROW_SUM + "variants = [{ knobs = { factor = 4 } }]  # <-\n",
        r"a variant table needs `name`, a string, got nothing",
    ),
    "workload_not_array": (
        HEAD + '[workload]  # <-\nname = "row_sum"\n',
        r"`workload` must be an array of tables: write \[\[workload\]\], not \[workload\]",
    ),
    "suite_not_table": ('suite = "x"  # <-\n' + ROW_SUM, r"`suite` must be a table, got 'x' \(string\)"),
    # -- empty axes ------------------------------------------------------------------------------------
    "empty_param": (
        HEAD + ROW_SUM.replace("params = { n = [64], m = [45] }", "params = { n = [64], m = [] }  # <-"),
        r"workload row_sum: params.m is empty: list at least one size",
    ),
    "empty_param_subtable": (
        HEAD + '[[workload]]\nname = "row_sum"\n[workload.params]\nn = [4]\nm = []  # <-\n',
        r"workload row_sum: params.m is empty: list at least one size",
    ),
    "empty_dtypes": (
        HEAD + ROW_SUM.replace('dtypes = ["float32"]', "dtypes = []  # <-"),
        r"workload row_sum: dtypes is empty: list at least one",
    ),
    "empty_variants": (
        HEAD + ROW_SUM + "variants = []  # <-\n",
        (
            r"workload row_sum: variants is empty: list at least one of default, split, bind, "
            r"rfactor_crossthread \(or leave `variants` out for all\)"
        ),
    ),
    "empty_knob": (
        HEAD + ROW_SUM + 'variants = [{ name = "split", knobs = { factor = [] } }]  # <-\n',
        r"variant row_sum/split: knob 'factor' is empty: list at least one value",
    ),
    "empty_suite_targets": (
        '[suite]\nname = "bad"\ntargets = []  # <-\n' + ROW_SUM,
        r"\[suite\] targets is empty: list at least one",
    ),
    "empty_workload_targets": (
        HEAD + ROW_SUM + "targets = []  # <-\n",
        r"workload row_sum: targets is empty: list at least one",
    ),
    "empty_peers": (HEAD + ROW_SUM + "peers = []  # <-\n", r"workload row_sum: peers is empty"),
    "empty_gpu_models": (
        HEAD + ROW_SUM + "gpu_models = []  # <-\n",
        r"workload row_sum: gpu_models is empty",
    ),
    # -- [measure] values ------------------------------------------------------------------------------
    "measure_mode": (
        HEAD + '[measure]\nmode = "warm"  # <-\n' + ROW_SUM,
        r"\[measure\] mode must be one of cold, hot, got 'warm'",
    ),
    "measure_stopping": (
        HEAD + '[measure]\nstopping = "mean"  # <-\n' + ROW_SUM,
        r"\[measure\] stopping must be the name of a stopping criterion \(median-ci\), got 'mean'",
    ),
    "measure_min_samples": (
        HEAD + "[measure]\nmin_samples = 0  # <-\n" + ROW_SUM,
        r"\[measure\] min_samples must be at least 1, got 0",
    ),
    "measure_type": (
        HEAD + '[measure]\nmax_time_s = "2"  # <-\n' + ROW_SUM,
        r"\[measure\] max_time_s must be a number, got '2' \(string\)",
    ),
    "measure_int_type": (
        HEAD + "[measure]\nmin_samples = 2.5  # <-\n" + ROW_SUM,
        r"\[measure\] min_samples must be an integer, got 2.5 \(float\)",
    ),
    "measure_min_over_max": (
        HEAD + "[measure]\nmin_time_s = 3.0\nmax_time_s = 1.0  # <-\n" + ROW_SUM,
        r"\[measure\] min_time_s \(3.0\) exceeds max_time_s \(1.0\)",
    ),
    "measure_ci": (
        HEAD + "[measure]\nmax_rel_ci = 5  # <-\n" + ROW_SUM,
        r"\[measure\] max_rel_ci must be a fraction in \(0, 1\), got 5.0",
    ),
    # -- structure ------------------------------------------------------------------------------------
    "no_suite_table": (
        "# a suite without [suite]  # <-\n" + ROW_SUM,
        r"the suite has no \[suite\] table \(it needs at least `name`\)",
    ),
    "no_suite_name": (
        '[suite]  # <-\ndescription = "x"\n' + ROW_SUM,
        r"\[suite\] needs `name`, a non-empty string, got nothing",
    ),
    "no_workloads": (
        '[suite]  # <-\nname = "empty"\n[measure]\nseed = 1\n',
        r"suite 'empty' has no cases: it has no \[\[workload\]\] entries",
    ),
    "no_workload_name": (
        HEAD + "[[workload]]  # <-\nparams = { n = [4] }\n",
        r"\[\[workload\]\] #1 needs `name`, the workload's name; known: conv2d_3x3",
    ),
    "no_params": (
        HEAD + ROW_SUM + '[[workload]]  # <-\nname = "exp"\n',
        (
            r"workload exp needs `params`, a table of its shape parameters \(n\), "
            r"e.g. params = \{ n = \[1024\] \}"
        ),
    ),
    "missing_param": (
        HEAD + '[[workload]]\nname = "row_sum"\nparams = { n = [4] }  # <-\n',
        r"workload row_sum: params lacks shape parameter 'm'; params: n, m",
    ),
    # -- targets and cases ------------------------------------------------------------------------------
    "target_no_variant_builds": (
        HEAD + ROW_SUM + 'variants = ["default", "split"]\ntargets = ["c",\n  "cuda"]  # <-\n',
        (
            r"workload row_sum: no listed variant can build for target 'cuda' "
            r"\(variant targets: default: c; split: c\)"
        ),
    ),
    "entry_without_cases": (
        '[suite]\nname = "bad"\ntargets = ["cuda"]\n' + ROW_SUM + 'variants = ["default"]  # <-\n',
        (
            r"workload row_sum gives no cases: its variants build for other targets than cuda "
            r"\(variant targets: default: c\)"
        ),
    ),
    "suite_target_unused": (
        '[suite]\nname = "bad"\ntargets = ["c", "cuda"]  # <-\n' + ROW_SUM + 'variants = ["default"]\n',
        (
            r"target 'cuda' of \[suite\] targets gives no case: no variant of the entries "
            r"that use it can build for it"
        ),
    ),
    "duplicate_in_entry": (
        HEAD
        + ROW_SUM.replace("[[workload]]", "[[workload]]  # <-").replace("n = [64]", "n = [64, 64]")
        + 'variants = ["default"]\n',
        r"duplicate case row_sum/default\[\]/m=45,n=64/float32/c: this entry already produces it",
    ),
    "duplicate_across_entries": (
        HEAD
        + ROW_SUM
        + 'variants = ["split"]\n'
        + ROW_SUM.replace("[[workload]]", "[[workload]]  # <-")
        + 'variants = [{ name = "split", knobs = { factor = 16 } }]\n',
        (
            r"duplicate case row_sum/split\[factor=16,rows=32\]/m=45,n=64/float32/c: "
            r"the \[\[workload\]\] at line 4 already produces it"
        ),
    ),
    "threshold_conflict": (
        HEAD
        + ROW_SUM
        + "regression_threshold = 0.05\n"
        + ROW_SUM.replace("n = [64]", "n = [65]")
        + "regression_threshold = 0.1  # <-\n",
        (
            r"workload row_sum: regression_threshold 0.1 differs from 0.05 given at line 8 "
            r"\(it is set per workload\)"
        ),
    ),
    "gpu_models_conflict": (
        HEAD
        + ROW_SUM
        + 'gpu_models = ["H100"]\n'
        + ROW_SUM.replace("n = [64]", "n = [65]")
        + 'gpu_models = ["A100"]  # <-\n',
        r"workload row_sum: gpu_models \['A100'\] differ from \['H100'\] given at line 8",
    ),
    "import_fails": (
        '[suite]\nname = "bad"\nimports = [\n  "json",\n  "kbench_no_such_module_xyz",  # <-\n]\n' + ROW_SUM,
        r"cannot import 'kbench_no_such_module_xyz' from \[suite\] imports: ModuleNotFoundError",
    ),
    "import_path_not_a_folder": (
        '[suite]\nname = "bad"\nimport_paths = [\n  ".",\n  "../no_such_lib",  # <-\n]\n' + ROW_SUM,
        r"\[suite\] import_paths: '../no_such_lib' is not a folder \(/.*/no_such_lib\)",
    ),
    "import_paths_not_strings": (
        '[suite]\nname = "bad"\nimport_paths = [3]  # <-\n' + ROW_SUM,
        r"\[suite\] import_paths",
    ),
}


def marked_line(text: str) -> int:
    lines = [i + 1 for i, ln in enumerate(text.split("\n")) if "# <-" in ln]
    assert len(lines) == 1, f"the test suite must mark exactly one line, marked {lines}"
    return lines[0]


@pytest.mark.parametrize("name", sorted(CASES))
def test_malformed_suite_names_file_and_line(name, tmp_path):
    text, message = CASES[name]
    path = tmp_path / f"{name}.toml"
    path.write_text(text)
    with pytest.raises(SuiteError) as info:
        load_suite(path)
    err = info.value
    line = marked_line(text)
    prefix = f"{path}:{line}: "
    assert str(err).startswith(prefix), f"{err}\n--- expected prefix {prefix}\n{text}"
    assert err.path == str(path) and err.line == line
    assert re.search(message, err.message), f"{err.message!r} !~ {message!r}"
    assert str(err) == prefix + err.message


def test_exit_code_is_the_configuration_error_code():
    assert EXIT_CONFIG == 4


def test_parse_suite_uses_the_given_path_in_messages():
    with pytest.raises(SuiteError, match=r"^<string>:3: unknown key 'colour'"):
        parse_suite('[suite]\nname = "x"\ncolour = "red"\n')
    with pytest.raises(SuiteError, match=r"^my.toml:2: invalid TOML"):
        parse_suite('[suite]\nname = = "x"\n', path="my.toml")


def test_unreadable_and_non_utf8_files(tmp_path):
    missing = tmp_path / "nope.toml"
    with pytest.raises(SuiteError) as info:
        load_suite(missing)
    assert info.value.line is None
    assert str(info.value).startswith(f"{missing}: cannot read the suite")
    latin = tmp_path / "latin.toml"
    latin.write_bytes(b'[suite]\nname = "caf\xe9"\n')
    with pytest.raises(SuiteError, match=r":2: the suite is not UTF-8 text$"):
        load_suite(latin)


def test_a_failing_import_module_is_reported_with_its_error(tmp_path):
    (tmp_path / "kbench_broken_plugin.py").write_text("raise RuntimeError('plugin exploded')\n")
    path = tmp_path / "s.toml"
    path.write_text('[suite]\nname = "p"\nimports = ["kbench_broken_plugin"]\n' + ROW_SUM)
    try:
        with pytest.raises(SuiteError) as info:
            load_suite(path)
    finally:
        sys.modules.pop("kbench_broken_plugin", None)
    assert str(info.value) == (
        f"{path}:3: cannot import 'kbench_broken_plugin' from [suite] imports: RuntimeError: plugin exploded"
    )
    assert str(tmp_path) not in sys.path


def test_errors_leave_the_registry_alone():
    before = dict(workloads.REGISTRY)
    with pytest.raises(SuiteError):
        parse_suite('[suite]\nname = "x"\n[[workload]]\nname = "nope"\n')
    assert workloads.REGISTRY == before


def test_suite_error_pickles():
    import pickle

    e = SuiteError("a.toml", 3, "boom")
    e2 = pickle.loads(pickle.dumps(e))
    assert str(e2) == "a.toml:3: boom" and e2.line == 3
