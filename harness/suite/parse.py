"""Reading a suite: TOML text -> validated, expanded :class:`~harness.suite.values.Suite` (the format
is in the package docstring of :mod:`harness.suite`); every problem is a
:class:`~harness.suite.values.SuiteError` naming its ``file:line``."""

from __future__ import annotations

import dataclasses
import hashlib
import importlib
import itertools
import math
import os
import re
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10: the same parser as a package (tomli; pyproject marker)
    import tomli as tomllib


from harness.errors import InvalidSetting
from harness.measure.stopping import CRITERIA as STOPPING_CRITERIA
from harness.model import DEFAULT_THRESHOLD, Case, MeasureConfig, Pairs, pairs
from kernels import workloads

from .locate import Locator, key_needle, value_needle
from .values import (
    DEFAULT_TIMEOUT_S,
    MEASURE_MODES,
    SUITE_KEYS,
    TARGETS,
    TOP_KEYS,
    VARIANT_KEYS,
    WORKLOAD_KEYS,
    Space,
    Suite,
    SuiteError,
    Where,
)

__all__ = ["load_suite", "parse_suite"]


def load_suite(path: str | os.PathLike[str]) -> Suite:
    """Read, validate and expand the suite file at ``path``.

    Raises
    ------
    SuiteError
        The file cannot be read, is not TOML, or breaks a rule of the format.
    """
    p = os.fspath(path)
    try:
        data = Path(p).read_bytes()
    except OSError as e:
        raise SuiteError(p, None, f"cannot read the suite: {e.strerror or e}") from None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise SuiteError(p, data[:e.start].count(b"\n") + 1, "the suite is not UTF-8 text") from None
    return _Parser(text, p, data).parse()


def parse_suite(text: str, path: str = "<string>") -> Suite:
    """Validate and expand a suite given as TOML text (``path`` is only used in messages)."""
    return _Parser(text, str(path), text.encode("utf-8")).parse()



# -- validation --------------------------------------------------------------------------------------


def _tname(v: Any) -> str:
    """The TOML name of a parsed value's type."""
    if isinstance(v, bool):
        return "boolean"
    return {str: "string", int: "integer", float: "float", list: "array", dict: "table"}.get(
        type(v), type(v).__name__)


def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _is_num(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def _show(v: Any) -> str:
    return f"{v!r} ({_tname(v)})"


def _toml_line(e: tomllib.TOMLDecodeError, text: str) -> tuple[int, str]:
    msg = str(e)
    m = re.search(r"\s*\(at line (\d+), column \d+\)\s*$", msg)
    if m:
        return int(m.group(1)), msg[:m.start()]
    m = re.search(r"\s*\(at end of document\)\s*$", msg)
    if m:
        return max(1, len(text.splitlines())), msg[:m.start()]
    return 1, msg


class _Parser:
    def __init__(self, text: str, path: str, raw: bytes):
        self.text = text
        self.path = path
        self.sha256 = hashlib.sha256(raw).hexdigest()
        self.loc: Locator | None = None

    # errors ------------------------------------------------------------------------------------

    def err(self, where: Where, message: str, *needles: str) -> SuiteError:
        assert self.loc is not None
        return SuiteError(self.path, self.loc.line(where, needles), message)

    def check_keys(self, table: dict[str, Any], known: Sequence[str], where: Where, what: str) -> None:
        for k in table:
            if k not in known:
                raise self.err(where + (k,), f"unknown key {k!r} in {what}; known keys: {', '.join(known)}")

    def str_list(self, v: Any, where: Where, what: str, allow_empty: bool = False) -> list[str]:
        if not isinstance(v, list):
            raise self.err(where, f"{what} must be an array of strings, got {_show(v)}")
        if not v and not allow_empty:
            raise self.err(where, f"{what} is empty: list at least one")
        for x in v:
            if not isinstance(x, str) or not x:
                raise self.err(where, f"{what} must be an array of non-empty strings, got {_show(x)}",
                               value_needle(x))
        seen = set()
        for x in v:
            if x in seen:
                raise self.err(where, f"{what} lists {x!r} twice", value_needle(x))
            seen.add(x)
        return list(v)

    def fraction(self, v: Any, where: Where, what: str) -> float:
        if not _is_num(v) or not 0 < v < 1:
            raise self.err(where, f"{what} must be a fraction in (0, 1) (e.g. 0.03 for 3 %), got {_show(v)}")
        return float(v)

    def positive(self, v: Any, where: Where, what: str) -> float:
        if not _is_num(v) or v <= 0:
            raise self.err(where, f"{what} must be a positive number of seconds, got {_show(v)}")
        return float(v)

    def targets(self, v: Any, where: Where, what: str) -> list[str]:
        ts = self.str_list(v, where, what)
        for t in ts:
            if t not in TARGETS:
                raise self.err(where, f"unknown target {t!r} ({what}); targets: {', '.join(TARGETS)}",
                               value_needle(t))
        return ts

    # the document ------------------------------------------------------------------------------

    def parse(self) -> Suite:
        try:
            doc = tomllib.loads(self.text)
        except tomllib.TOMLDecodeError as e:
            line, msg = _toml_line(e, self.text)
            raise SuiteError(self.path, line, f"invalid TOML: {msg}") from None
        self.loc = Locator(self.text)
        for k in doc:
            if k not in TOP_KEYS:
                raise self.err((k,), f"unknown top-level key {k!r}; known keys: {', '.join(TOP_KEYS)}")

        s = doc.get("suite")
        if s is None:
            raise SuiteError(self.path, 1, "the suite has no [suite] table (it needs at least `name`)")
        if not isinstance(s, dict):
            raise self.err(("suite",), f"`suite` must be a table, got {_show(s)}")
        W = ("suite",)
        self.check_keys(s, SUITE_KEYS, W, "[suite]")
        name = s.get("name")
        if not isinstance(name, str) or not name.strip():
            where = W + ("name",) if "name" in s else W
            raise self.err(where, f"[suite] needs `name`, a non-empty string, got "
                                  f"{_show(name) if name is not None else 'nothing'}")
        description = s.get("description", "")
        if not isinstance(description, str):
            raise self.err(W + ("description",),
                           f"[suite] description must be a string, got {_show(description)}")
        explicit_targets = "targets" in s
        suite_targets = (self.targets(s["targets"], W + ("targets",), "[suite] targets")
                         if explicit_targets else list(TARGETS))
        threshold = (self.fraction(s["regression_threshold"], W + ("regression_threshold",),
                                   "[suite] regression_threshold")
                     if "regression_threshold" in s else DEFAULT_THRESHOLD)
        timeout = (self.positive(s["timeout_s"], W + ("timeout_s",), "[suite] timeout_s")
                   if "timeout_s" in s else DEFAULT_TIMEOUT_S)
        imports = (self.str_list(s["imports"], W + ("imports",), "[suite] imports", allow_empty=True)
                   if "imports" in s else [])
        folders = self.import_folders(s)

        measure = self.measure(doc.get("measure", {}))
        self.run_imports(imports, folders)

        entries = doc.get("workload", [])
        if isinstance(entries, dict):
            raise self.err(("workload",), "`workload` must be an array of tables: write [[workload]], "
                                          "not [workload]")
        if not isinstance(entries, list) or not all(isinstance(e, dict) for e in entries):
            raise self.err(("workload",), "`workload` must be an array of tables ([[workload]] entries)")
        if not entries:
            raise self.err(W, f"suite {name!r} has no cases: it has no [[workload]] entries")

        ctx = _SuiteContext(name, suite_targets, timeout)
        cases: list[Case] = []
        spaces: dict[str, Space] = {}
        origin: dict[str, int] = {}  # case key -> entry index
        thresholds: dict[str, tuple[float, int]] = {}
        gpu_models: dict[str, tuple[tuple[str, ...], int]] = {}
        peers: dict[tuple[str, str], None] = {}
        inherited_used: dict[str, bool] = {}
        for i, entry in enumerate(entries):
            r = self.entry(i, entry, ctx)
            for c in r.cases:
                if c.key in origin:
                    j = origin[c.key]
                    where = ("workload", i)
                    other = ("this entry" if j == i else
                             f"the [[workload]] at line {self.loc.line(('workload', j))}")
                    raise self.err(where, f"duplicate case {c.key}: {other} already produces it")
                origin[c.key] = i
                cases.append(c)
            spaces.update(r.spaces)
            if r.inherits_targets:
                for t in suite_targets:
                    inherited_used[t] = inherited_used.get(t, False) or t in r.used_targets
            if r.threshold is not None:
                prev = thresholds.get(r.workload)
                if prev is not None and prev[0] != r.threshold:
                    raise self.err(("workload", i, "regression_threshold"),
                                   f"workload {r.workload}: regression_threshold {r.threshold} differs from "
                                   f"{prev[0]} given at line {prev[1]} (it is set per workload)")
                if prev is None:
                    line = self.loc.line(("workload", i, "regression_threshold"))
                    thresholds[r.workload] = (r.threshold, line)
            if r.gpu_models:
                prev_g = gpu_models.get(r.workload)
                line = self.loc.line(("workload", i, "gpu_models"))
                if prev_g is not None and prev_g[0] != r.gpu_models:
                    raise self.err(("workload", i, "gpu_models"),
                                   f"workload {r.workload}: gpu_models {list(r.gpu_models)} differ from "
                                   f"{list(prev_g[0])} given at line {prev_g[1]} (they are set per workload)")
                gpu_models.setdefault(r.workload, (r.gpu_models, line))
            for p in r.peers:
                peers[(r.workload, p)] = None
        if explicit_targets:
            for t, used in inherited_used.items():
                if not used:
                    raise self.err(W + ("targets",), f"target {t!r} of [suite] targets gives no case: no "
                                                     "variant of the entries that use it can build for it",
                                   value_needle(t))

        return Suite(
            name=name, path=self.path, description=description, cases=tuple(cases),
            regression_threshold=threshold,
            thresholds=tuple((w, t) for w, (t, _) in thresholds.items()),
            peers=tuple(peers), measure=measure, imports=tuple(imports), sha256=self.sha256,
            gpu_models=tuple((w, g) for w, (g, _) in gpu_models.items()),
            gpu_model_lines=tuple((w, ln) for w, (_, ln) in gpu_models.items()),
            spaces=tuple(spaces.items()), import_folders=tuple(folders),
        )

    def measure(self, m: Any) -> MeasureConfig:
        W = ("measure",)
        if not isinstance(m, dict):
            raise self.err(W, f"`measure` must be a table, got {_show(m)}")
        fields = {f.name: f for f in dataclasses.fields(MeasureConfig)}
        self.check_keys(m, tuple(fields), W, "[measure] (fields of harness.model.MeasureConfig)")
        defaults = MeasureConfig()
        values: dict[str, Any] = {}
        for k, v in m.items():
            d = getattr(defaults, k)
            where = W + (k,)
            if isinstance(d, bool):
                ok = isinstance(v, bool)
            elif isinstance(d, int):
                ok = _is_int(v)
            elif isinstance(d, float):
                ok = _is_num(v)
                v = float(v) if ok else v
            elif isinstance(d, str):
                ok = isinstance(v, str)
            else:
                ok = True
            if not ok:
                kind = "number" if isinstance(d, float) else _tname(d)
                article = "an" if kind[0] in "aeiou" else "a"
                raise self.err(where, f"[measure] {k} must be {article} {kind}, got {_show(v)}")
            rule = _MEASURE_RULES.get(k)
            if rule is not None and not rule[0](v):
                raise self.err(where, f"[measure] {k} must be {rule[1]}, got {v!r}")
            values[k] = v
        try:  # MeasureConfig checks the settings together (min_time_s <= max_time_s, ...)
            return dataclasses.replace(defaults, **values)
        except InvalidSetting as e:
            given = [k for k in e.settings if k in m] or list(e.settings)
            raise self.err(W + (given[-1],), f"[measure] {e.detail}") from None

    def import_folders(self, s: dict[str, Any]) -> list[str]:
        """The folders ``imports`` are looked for in: the suite file's own, then ``[suite]
        import_paths`` (relative to the suite file), each an existing folder."""
        here = Path(self.path).resolve().parent if self.path != "<string>" else None
        folders = [str(here)] if here is not None else []
        if "import_paths" not in s:
            return folders
        where = ("suite", "import_paths")
        for entry in self.str_list(s["import_paths"], where, "[suite] import_paths", allow_empty=True):
            path = Path(entry).expanduser()
            if not path.is_absolute():
                path = (here or Path.cwd()) / path
            if not path.is_dir():
                raise self.err(where, f"[suite] import_paths: {entry!r} is not a folder ({path.resolve()})",
                               value_needle(entry))
            folder = str(path.resolve())
            if folder not in folders:
                folders.append(folder)
        return folders

    def run_imports(self, modules: Sequence[str], folders: Sequence[str] = ()) -> None:
        """Import ``modules`` (``folders``, the suite file's and ``import_paths``, are first on
        sys.path meanwhile)."""
        added = [f for f in folders if f not in sys.path]
        sys.path[:0] = added
        try:
            for mod in modules:
                try:
                    importlib.import_module(mod)
                except Exception as e:
                    raise self.err(("suite", "imports"),
                                   f"cannot import {mod!r} from [suite] imports: {type(e).__name__}: {e}",
                                   value_needle(mod)) from None
        finally:
            for folder in added:
                sys.path.remove(folder)

    def entry(self, i: int, e: dict[str, Any], ctx: _SuiteContext) -> _EntryResult:
        W = ("workload", i)
        what = f"[[workload]] #{i + 1}"
        name = e.get("name")
        if name is None:
            raise self.err(W, f"{what} needs `name`, the workload's name; known: "
                              f"{', '.join(workloads.names())}")
        if not isinstance(name, str):
            raise self.err(W + ("name",), f"{what}: name must be a string, got {_show(name)}")
        if name not in workloads.REGISTRY:
            raise self.err(W + ("name",), f"unknown workload {name!r}; known: {', '.join(workloads.names())}")
        wl = workloads.get(name)
        self.check_keys(e, WORKLOAD_KEYS, W, f"{what} ({name})")
        ctxw = f"workload {name}"

        # shapes
        if "params" not in e:
            raise self.err(W, f"{ctxw} needs `params`, a table of its shape parameters "
                              f"({', '.join(wl.params)}), e.g. params = {{ {wl.params[0]} = [1024] }}")
        p = e["params"]
        if not isinstance(p, dict):
            raise self.err(W + ("params",), f"{ctxw}: params must be a table of shape parameters "
                                            f"({', '.join(wl.params)}), got {_show(p)}")
        for k in p:
            if k not in wl.params:
                raise self.err(W + ("params", k), f"{ctxw} has no shape parameter {k!r}; params: "
                                                  f"{', '.join(wl.params)}")
        axes: list[list[int]] = []
        for k in wl.params:
            if k not in p:
                raise self.err(W + ("params",), f"{ctxw}: params lacks shape parameter {k!r}; params: "
                                                f"{', '.join(wl.params)}")
            vals = p[k] if isinstance(p[k], list) else [p[k]]
            if not vals:
                raise self.err(W + ("params", k), f"{ctxw}: params.{k} is empty: list at least one size")
            choices = wl.choices.get(k)
            for v in vals:
                if choices is not None:
                    if v not in choices:
                        raise self.err(W + ("params", k), f"{ctxw}: params.{k} takes "
                                                          f"{', '.join(map(repr, choices))}, got {_show(v)}",
                                       value_needle(v))
                elif not _is_int(v) or v <= 0:
                    raise self.err(W + ("params", k), f"{ctxw}: params.{k} must be positive integers, "
                                                      f"got {_show(v)}", value_needle(v))
            axes.append(vals)

        # dtypes
        if "dtypes" in e:
            dtypes = self.str_list(e["dtypes"], W + ("dtypes",), f"{ctxw}: dtypes")
            for d in dtypes:
                if d not in wl.dtypes:
                    raise self.err(W + ("dtypes",), f"{ctxw} does not support dtype {d!r}; dtypes: "
                                                    f"{', '.join(wl.dtypes)}", value_needle(d))
        else:
            dtypes = [wl.dtypes[0]]

        # variants and knob grids
        variants = self.variants(e.get("variants"), wl, W, ctxw) if "variants" in e else [
            (v, [v.knob_defaults()], None) for v in wl.variants.values()]

        # targets
        inherits = "targets" not in e
        if inherits:
            targets = ctx.targets
        else:
            targets = self.targets(e["targets"], W + ("targets",), f"{ctxw}: targets")
            for t in targets:
                if not any(t in v.targets for v, _, _ in variants):
                    builds = "; ".join(f"{v.name}: {', '.join(v.targets)}" for v, _, _ in variants)
                    raise self.err(W + ("targets",), f"{ctxw}: no listed variant can build for target {t!r} "
                                                     f"(variant targets: {builds})", value_needle(t))

        # tolerances, thresholds, timeouts
        tol_given: dict[str, float] = {}
        for k in ("rtol", "atol"):
            if k in e:
                v = e[k]
                if not _is_num(v) or v < 0:
                    raise self.err(W + (k,), f"{ctxw}: {k} must be a non-negative number, got {_show(v)}")
                tol_given[k] = float(v)
        threshold = (self.fraction(e["regression_threshold"], W + ("regression_threshold",),
                                   f"{ctxw}: regression_threshold") if "regression_threshold" in e else None)
        timeout = (self.positive(e["timeout_s"], W + ("timeout_s",), f"{ctxw}: timeout_s")
                   if "timeout_s" in e else ctx.timeout_s)

        peers: list[str] = []
        if "peers" in e:
            peers = self.str_list(e["peers"], W + ("peers",), f"{ctxw}: peers")
            for pn in peers:
                if pn not in wl.peers:
                    raise self.err(W + ("peers",), f"{ctxw} offers no peer {pn!r}; peers: "
                                                   f"{', '.join(wl.peers) or 'none'}", value_needle(pn))
        gpu_models: tuple[str, ...] = ()
        if "gpu_models" in e:
            gpu_models = tuple(self.str_list(e["gpu_models"], W + ("gpu_models",), f"{ctxw}: gpu_models"))

        # expansion
        cases: list[Case] = []
        spaces: dict[str, Space] = {}
        used: set = set()
        for v, grid, space in variants:
            tuned = space is not None
            for knobs in grid[:1] if tuned else grid:  # a tuned variant: one case, its space aside
                for shape in itertools.product(*axes):
                    params = pairs(dict(zip(wl.params, shape)))
                    for d in dtypes:
                        why = wl.invalid(dict(params), d)
                        if why is not None:
                            raise self.err(W + ("params",), f"{ctxw}: {_pairs_text(params)} in {d} makes "
                                                            f"no case: {why}")
                        tol = dict(zip(("rtol", "atol"), wl.tolerance_for(d, dict(params))))
                        tol.update(tol_given)
                        for t in targets:
                            if t not in v.targets:
                                continue
                            used.add(t)
                            cases.append(Case(
                                suite=ctx.name, workload=name, variant=v.name, params=params,
                                knobs=pairs(knobs), dtype=d, target=t, rtol=float(tol["rtol"]),
                                atol=float(tol["atol"]), timeout_s=timeout, tuned=tuned))
                            if tuned:
                                spaces[cases[-1].tuning_key] = space
        if not cases:
            builds = "; ".join(f"{v.name}: {', '.join(v.targets)}" for v, _, _ in variants)
            where = W + ("variants",) if "variants" in e else W
            raise self.err(where, f"{ctxw} gives no cases: its variants build for other targets than "
                                  f"{', '.join(targets)} (variant targets: {builds})")
        return _EntryResult(name, cases, inherits, used, threshold, gpu_models, peers, spaces)

    def variants(self, vs: Any, wl: Any, W: Where,
                 ctxw: str) -> list[tuple[Any, list[dict[str, Any]], Space | None]]:
        """Each listed variant with its knob grid, and its tuning space when it is ``tuned``."""
        where = W + ("variants",)
        if not isinstance(vs, list):
            raise self.err(where, f"{ctxw}: variants must be an array of variant names or "
                                  f"{{ name = ..., knobs = {{ ... }} }} tables, got {_show(vs)}")
        if not vs:
            raise self.err(where, f"{ctxw}: variants is empty: list at least one of "
                                  f"{', '.join(wl.variants)} (or leave `variants` out for all)")
        out = []
        for item in vs:
            tuned = False
            if isinstance(item, str):
                vname, knobs = item, {}
            elif isinstance(item, dict):
                self.check_keys(item, VARIANT_KEYS, where, f"a {ctxw} variant table")
                vname, knobs, tuned = item.get("name"), item.get("knobs", {}), item.get("tuned", False)
                if not isinstance(vname, str):
                    raise self.err(where, f"{ctxw}: a variant table needs `name`, a string, got "
                                          f"{_show(vname) if vname is not None else 'nothing'}",
                                   key_needle("name") if vname is not None else r"\{")
                if not isinstance(knobs, dict):
                    raise self.err(where, f"{ctxw}: knobs of variant {vname!r} must be a table, got "
                                          f"{_show(knobs)}", value_needle(vname), key_needle("knobs"))
            else:
                raise self.err(where, f"{ctxw}: a variant must be a name or a {{ name, knobs }} table, got "
                                      f"{_show(item)}", value_needle(item))
            v = wl.variants.get(vname)
            if v is None:
                raise self.err(where, f"{ctxw} has no variant {vname!r}; variants: {', '.join(wl.variants)}",
                               value_needle(vname))
            defaults = v.knob_defaults()
            lists: dict[str, list[Any]] = {k: [d] for k, d in defaults.items()}
            for k, val in knobs.items():
                nd = (value_needle(vname), key_needle(k))
                if k not in defaults:
                    raise self.err(where, f"variant {wl.name}/{vname} has no knob {k!r}; knobs: "
                                          f"{', '.join(defaults) or 'none'}", *nd)
                vals = val if isinstance(val, list) else [val]
                if not vals:
                    raise self.err(where, f"variant {wl.name}/{vname}: knob {k!r} is empty: list at least "
                                          "one value", *nd)
                d = defaults[k]
                for x in vals:
                    if not _same_kind(x, d):
                        raise self.err(where, f"variant {wl.name}/{vname}: knob {k!r} takes {_tname(d)} "
                                              f"values (default {d!r}), got {_show(x)}", *nd)
                lists[k] = vals
            if not isinstance(tuned, bool):
                raise self.err(where, f"variant {wl.name}/{vname}: tuned must be true or false, got "
                                      f"{_show(tuned)}", value_needle(vname), key_needle("tuned"))
            grid = [dict(zip(lists, combo)) for combo in itertools.product(*lists.values())]
            if tuned and len(grid) < 2:
                raise self.err(where, f"variant {wl.name}/{vname} is tuned but its knobs give one "
                                      "configuration: list several values of a knob (knobs = { "
                                      f"{next(iter(defaults), 'knob')} = [...] }}) to tune over",
                               value_needle(vname), key_needle("tuned"))
            space = tuple((k, tuple(vals)) for k, vals in lists.items()) if tuned else None
            out.append((v, grid, space))
        return out


def _pairs_text(params: Pairs) -> str:
    return ", ".join(f"{k}={v}" for k, v in params)


def _same_kind(x: Any, default: Any) -> bool:
    if default is None:
        return not isinstance(x, (list, dict))
    if isinstance(default, bool):
        return isinstance(x, bool)
    if isinstance(default, int):
        return _is_int(x)
    if isinstance(default, float):
        return _is_num(x)
    return isinstance(x, type(default))


_MEASURE_RULES = {
    "max_rel_ci": (lambda v: 0 < v < 1, "a fraction in (0, 1)"),
    "min_samples": (lambda v: v >= 1, "at least 1"),
    "max_samples": (lambda v: v >= 1, "at least 1"),
    "min_time_s": (lambda v: v >= 0, "non-negative"),
    "max_time_s": (lambda v: v > 0, "positive"),
    "warmup_min": (lambda v: v >= 0, "non-negative"),
    "clock_floor": (lambda v: 0 <= v <= 1, "a fraction in [0, 1]"),
    "mode": (lambda v: v in MEASURE_MODES, f"one of {', '.join(MEASURE_MODES)}"),
    "stopping": (lambda v: v in STOPPING_CRITERIA, "the name of a stopping criterion "
                 f"({', '.join(sorted(STOPPING_CRITERIA))})"),
    "seed": (lambda v: v >= 0, "a non-negative integer"),
    # an injected slowdown belongs to `kbench calibrate` (its runs are never baselines), not to a suite
    "slowdown": (lambda v: v == 0, "0 in a suite (kbench calibrate --slowdown injects one)"),
    "interleave": (lambda v: not v, "empty in a suite (kbench calibrate sets the sides it interleaves)"),
}


@dataclass
class _SuiteContext:
    name: str
    targets: list[str]
    timeout_s: float


@dataclass
class _EntryResult:
    workload: str
    cases: list[Case]
    inherits_targets: bool
    used_targets: set
    threshold: float | None
    gpu_models: tuple[str, ...]
    peers: list[str]
    spaces: dict[str, Space]


