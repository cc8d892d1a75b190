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
    dtypes = ["float32"]                 # default: the workload's first dtype
    variants = ["default", { name = "rfactor_crossthread", knobs = { factor = [16, 32] } }]
                                         # default: every variant with its default knobs
    targets = ["c", "cuda"]              # overrides [suite].targets
    rtol = 1e-5                          # default: the workload's tolerance for the dtype, else
    atol = 1e-5                          #   kernels.workloads.tutorial.default_tolerance(dtype)
    regression_threshold = 0.05          # per-workload override of the suite's threshold
    timeout_s = 60                       # per-workload override of the suite's timeout
    peers = ["torch.sum(dim=1)"]         # peers timed alongside (names offered by the workload)
    gpu_models = ["H100"]                # cuda cases of this workload only on these GPU models

Expansion, per [[workload]] entry in file order: variants (in the listed order) x knob grid (the
cartesian product of the knob lists; a scalar is a one-element list; knobs left out keep the
variant's defaults) x shape grid (cartesian product in the workload's parameter order) x dtypes x
targets. A target is used for a variant only when the variant can build for it; a target that no
variant of the entry can build is an error when the entry names it, and skipped when it comes from
[suite].targets (unless no entry at all can use it). ``Case.gpu_model`` is "" here: harness.plan
assigns GPU models.

Every problem is found before anything runs and raised as :class:`SuiteError` whose text is
``file:line: message``; the line is the one of the offending key or value (for ``[[workload]]``
entries, the n-th ``[[workload]]`` header counts as the n-th entry). The CLI exits with
:data:`EXIT_CONFIG` (4) on it.
"""

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

from .errors import ConfigError, ExitCode
from .measure.stopping import CRITERIA as STOPPING_CRITERIA
from .model import DEFAULT_THRESHOLD, Case, MeasureConfig, pairs

#: exit code of the CLI for a malformed suite (a usage or configuration error)
EXIT_CONFIG = ExitCode.USAGE

#: the targets a suite may name
TARGETS = ("c", "opencl", "cuda")

DEFAULT_TIMEOUT_S = 120.0

TOP_KEYS = ("suite", "measure", "workload")
SUITE_KEYS = ("name", "description", "targets", "regression_threshold", "timeout_s", "imports")
WORKLOAD_KEYS = ("name", "params", "dtypes", "variants", "targets", "rtol", "atol",
                 "regression_threshold", "timeout_s", "peers", "gpu_models")
VARIANT_KEYS = ("name", "knobs")
MEASURE_MODES = ("cold", "hot")

Where = tuple[Any, ...]  # ("workload", 2, "params", "n"): a table path, an index after an array name


class SuiteError(ConfigError):
    """A malformed suite (or a plan that cannot be made from it).

    Attributes
    ----------
    path : str
        The suite file ("<string>" for text parsed directly).
    line : int or None
        1-based line of the offending key or value; None only when the file cannot be read.
    message : str
        What is wrong, naming the table, the key and what would be accepted.
    """

    names_its_place = True  # printed as file:line: message

    def __init__(self, path: str, line: int | None, message: str):
        super().__init__(path, line, message)
        self.path = str(path)
        self.line = line
        self.message = message

    def __str__(self) -> str:
        if self.line is None:
            return f"{self.path}: {self.message}"
        return f"{self.path}:{self.line}: {self.message}"


@dataclass(frozen=True)
class Suite:
    """A parsed, validated and expanded suite.

    Per-workload settings are tuples of pairs (hashable); use :meth:`threshold`,
    :meth:`gpu_models_for` and :meth:`peers_for` to read them.
    """

    name: str
    path: str
    description: str
    cases: tuple[Case, ...]
    regression_threshold: float
    thresholds: tuple[tuple[str, float], ...]  # workload -> threshold, where overridden
    peers: tuple[tuple[str, str], ...]  # (workload, peer name)
    measure: MeasureConfig
    imports: tuple[str, ...]
    sha256: str  # of the file's bytes
    gpu_models: tuple[tuple[str, tuple[str, ...]], ...]  # workload -> GPU models its cuda cases need
    gpu_model_lines: tuple[tuple[str, int], ...] = ()  # workload -> line of its gpu_models (errors)

    def threshold(self, workload: str) -> float:
        """The practical regression threshold (a fraction) for the cases of ``workload``."""
        return dict(self.thresholds).get(workload, self.regression_threshold)

    def gpu_models_for(self, workload: str) -> tuple[str, ...]:
        """The GPU models ``workload``'s cuda cases are restricted to (() = no restriction)."""
        return dict(self.gpu_models).get(workload, ())

    def peers_for(self, workload: str) -> tuple[str, ...]:
        """The peers to time next to ``workload``, in suite order."""
        return tuple(p for w, p in self.peers if w == workload)

    @property
    def workloads(self) -> tuple[str, ...]:
        """The workloads of the suite, in order of first appearance."""
        return tuple(dict.fromkeys(c.workload for c in self.cases))

    @property
    def targets(self) -> tuple[str, ...]:
        """The targets the cases use, in order of first appearance."""
        return tuple(dict.fromkeys(c.target for c in self.cases))


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


# -- locating keys in the raw text -------------------------------------------------------------------


@dataclass
class _Entry:
    path: tuple[str, ...]  # full dotted path of a header or a key
    line: int  # 1-based
    end: int  # last line of its value (key) or of its table (header)
    header: bool
    array: bool = False


def _split_dotted(s: str) -> tuple[str, ...]:
    """``a."b.c" . d`` -> ("a", "b.c", "d")."""
    parts, cur, quote = [], "", None
    for ch in s:
        if quote:
            if ch == quote:
                quote = None
            else:
                cur += ch
        elif ch in "\"'":
            quote = ch
        elif ch == ".":
            parts.append(cur.strip())
            cur = ""
        else:
            cur += ch
    parts.append(cur.strip())
    return tuple(parts)


def _until_unquoted(s: str, stop: str) -> int | None:
    quote = None
    for i, ch in enumerate(s):
        if quote:
            if ch == quote:
                quote = None
        elif ch in "\"'":
            quote = ch
        elif ch in stop:
            return i
    return None


class _Locator:
    """Maps table/key paths to lines of the raw TOML text (run only on text tomllib accepted).

    A character scanner tracks string state and bracket depth, so only lines that begin a statement
    (depth 0, outside multi-line strings) are read as headers or keys, and each key's value extent
    (for multi-line arrays and inline tables) is known.
    """

    def __init__(self, text: str):
        self.lines = [ln.rstrip("\r") for ln in text.split("\n")]
        starts, ends = self._scan(text)
        self.entries: list[_Entry] = []
        section: tuple[str, ...] = ()
        n = len(self.lines)
        headers: list[_Entry] = []
        for i, raw in enumerate(self.lines):
            if starts[i] is None:
                continue
            s = raw.strip()
            if not s or s.startswith("#"):
                continue
            if s.startswith("["):
                array = s.startswith("[[")
                body = s[2:] if array else s[1:]
                close = _until_unquoted(body, "]")
                section = _split_dotted(body[:close] if close is not None else body)
                e = _Entry(section, i + 1, n, True, array)
                headers.append(e)
                self.entries.append(e)
                continue
            eq = _until_unquoted(s, "=")
            if eq is None:
                continue
            end = i
            while end < n - 1 and ends[end] is None:
                end += 1
            self.entries.append(_Entry(section + _split_dotted(s[:eq]), i + 1, end + 1, False))
        for a, b in itertools.pairwise(headers):
            a.end = b.line - 1

    @staticmethod
    def _scan(text: str):
        """Per line: depth at its start if it starts a statement, else None; the same for its end."""
        starts: list[int | None] = [0]
        ends: list[int | None] = []
        depth, state, i, n = 0, None, 0, len(text)
        while i < n:
            c = text[i]
            if c == "\n":
                ends.append(0 if depth == 0 and state not in ('"""', "'''") else None)
                if state in ('"', "'"):
                    state = None
                starts.append(0 if depth == 0 and state is None else None)
                i += 1
                continue
            if state is None:
                if c == "#":
                    j = text.find("\n", i)
                    i = n if j < 0 else j
                    continue
                if text.startswith('"""', i) or text.startswith("'''", i):
                    state = text[i:i + 3]
                    i += 3
                    continue
                if c in "\"'":
                    state = c
                elif c in "[{":
                    depth += 1
                elif c in "]}":
                    depth = max(0, depth - 1)
            elif state in ('"', '"""') and c == "\\":
                i += 1 if text.startswith("\n", i + 1) else 2  # a line-ending backslash keeps its newline
                continue
            elif state in ('"', "'") and c == state:
                state = None
            elif state in ('"""', "'''") and text.startswith(state, i):
                state = None
                i += 3
                continue
            i += 1
        ends.append(0)
        return starts, ends

    def _scope(self, name: str, index: int | None) -> tuple[int, int, list[_Entry]]:
        """The line range of table ``name`` (the index-th element of an array of tables)."""
        n = len(self.lines)
        if index is None:
            for e in self.entries:
                if e.header and e.path == (name,):
                    lo = e.line
                    break
            else:
                return 1, n, self.entries  # inline or dotted at the root: search the whole file
        else:
            heads = [e for e in self.entries if e.header and e.array and e.path == (name,)]
            if index >= len(heads):
                return 1, n, self.entries
            lo = heads[index].line
        hi = n
        for e in self.entries:
            next_element = index is not None and e.path == (name,)
            if e.header and e.line > lo and (e.path[:1] != (name,) or next_element):
                hi = e.line - 1
                break
        return lo, hi, [e for e in self.entries if lo <= e.line <= hi]

    def line(self, where: Where, needles: Sequence[str] = ()) -> int:
        """The line of ``where`` (a path like ("workload", 1, "variants")); ``needles`` are regexes
        searched in turn inside the value found (e.g. a list element), each from the last match."""
        if not where:
            return 1
        name = where[0]
        index = where[1] if len(where) > 1 and isinstance(where[1], int) else None
        keys = tuple(str(k) for k in where[(2 if index is not None else 1):])
        lo, hi, entries = self._scope(str(name), index)
        target = (str(name),) + keys
        best: _Entry | None = None
        for e in entries:
            prefix = len(e.path) <= len(target) and target[:len(e.path)] == e.path
            if prefix and (best is None or len(e.path) > len(best.path)):
                best = e
        if best is None:
            return lo
        end = hi if best.header else min(hi, best.end)
        pats = [_key_needle(k) for k in target[len(best.path):]] + list(needles)
        pos = best.line
        for pat in pats:
            rx = re.compile(pat)
            for ln in range(pos, end + 1):
                if rx.search(self.lines[ln - 1]):
                    pos = ln
                    break
            else:
                break
        return pos


def _key_needle(key: str) -> str:
    return r"(?:^|[\s{,.])[\"']?" + re.escape(key) + r"[\"']?\s*[=.]"


def _value_needle(value: Any) -> str:
    if isinstance(value, str):
        return r"([\"'])" + re.escape(value) + r"\1"
    if isinstance(value, bool):
        return r"\b" + ("true" if value else "false") + r"\b"
    return r"(?<![\w.])" + re.escape(str(value)) + r"(?![\w.])"


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
        self.loc: _Locator | None = None

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
                               _value_needle(x))
        seen = set()
        for x in v:
            if x in seen:
                raise self.err(where, f"{what} lists {x!r} twice", _value_needle(x))
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
                               _value_needle(t))
        return ts

    # the document ------------------------------------------------------------------------------

    def parse(self) -> Suite:
        try:
            doc = tomllib.loads(self.text)
        except tomllib.TOMLDecodeError as e:
            line, msg = _toml_line(e, self.text)
            raise SuiteError(self.path, line, f"invalid TOML: {msg}") from None
        self.loc = _Locator(self.text)
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

        measure = self.measure(doc.get("measure", {}))
        self.run_imports(imports)

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
                                   _value_needle(t))

        return Suite(
            name=name, path=self.path, description=description, cases=tuple(cases),
            regression_threshold=threshold,
            thresholds=tuple((w, t) for w, (t, _) in thresholds.items()),
            peers=tuple(peers), measure=measure, imports=tuple(imports), sha256=self.sha256,
            gpu_models=tuple((w, g) for w, (g, _) in gpu_models.items()),
            gpu_model_lines=tuple((w, ln) for w, (_, ln) in gpu_models.items()),
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
        cfg = dataclasses.replace(defaults, **values)
        if cfg.min_time_s > cfg.max_time_s:
            k = "max_time_s" if "max_time_s" in m else "min_time_s"
            raise self.err(W + (k,), f"[measure] min_time_s ({cfg.min_time_s}) exceeds max_time_s "
                                     f"({cfg.max_time_s})")
        if cfg.min_samples > cfg.max_samples:
            k = "max_samples" if "max_samples" in m else "min_samples"
            raise self.err(W + (k,), f"[measure] min_samples ({cfg.min_samples}) exceeds max_samples "
                                     f"({cfg.max_samples})")
        return cfg

    def run_imports(self, modules: Sequence[str]) -> None:
        """Import ``modules`` (the suite file's folder is on sys.path meanwhile)."""
        folder = str(Path(self.path).resolve().parent) if self.path != "<string>" else None
        added = folder is not None and folder not in sys.path
        if added:
            sys.path.insert(0, folder)
        try:
            for mod in modules:
                try:
                    importlib.import_module(mod)
                except Exception as e:
                    raise self.err(("suite", "imports"),
                                   f"cannot import {mod!r} from [suite] imports: {type(e).__name__}: {e}",
                                   _value_needle(mod)) from None
        finally:
            if added:
                sys.path.remove(folder)

    def entry(self, i: int, e: dict[str, Any], ctx: _SuiteContext) -> _EntryResult:
        from kernels import workloads
        from kernels.workloads.tutorial import default_tolerance

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
            for v in vals:
                if not _is_int(v) or v <= 0:
                    raise self.err(W + ("params", k), f"{ctxw}: params.{k} must be positive integers, "
                                                      f"got {_show(v)}", _value_needle(v))
            axes.append(vals)

        # dtypes
        if "dtypes" in e:
            dtypes = self.str_list(e["dtypes"], W + ("dtypes",), f"{ctxw}: dtypes")
            for d in dtypes:
                if d not in wl.dtypes:
                    raise self.err(W + ("dtypes",), f"{ctxw} does not support dtype {d!r}; dtypes: "
                                                    f"{', '.join(wl.dtypes)}", _value_needle(d))
        else:
            dtypes = [wl.dtypes[0]]

        # variants and knob grids
        variants = self.variants(e.get("variants"), wl, W, ctxw) if "variants" in e else [
            (v, [v.knob_defaults()]) for v in wl.variants.values()]

        # targets
        inherits = "targets" not in e
        if inherits:
            targets = ctx.targets
        else:
            targets = self.targets(e["targets"], W + ("targets",), f"{ctxw}: targets")
            for t in targets:
                if not any(t in v.targets for v, _ in variants):
                    builds = "; ".join(f"{v.name}: {', '.join(v.targets)}" for v, _ in variants)
                    raise self.err(W + ("targets",), f"{ctxw}: no listed variant can build for target {t!r} "
                                                     f"(variant targets: {builds})", _value_needle(t))

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
                                                   f"{', '.join(wl.peers) or 'none'}", _value_needle(pn))
        gpu_models: tuple[str, ...] = ()
        if "gpu_models" in e:
            gpu_models = tuple(self.str_list(e["gpu_models"], W + ("gpu_models",), f"{ctxw}: gpu_models"))

        # expansion
        cases: list[Case] = []
        used: set = set()
        for v, grid in variants:
            for knobs in grid:
                for shape in itertools.product(*axes):
                    params = pairs(dict(zip(wl.params, shape)))
                    for d in dtypes:
                        tol = dict(default_tolerance(d))
                        if d in wl.tolerance:
                            tol["rtol"], tol["atol"] = wl.tolerance[d]
                        tol.update(tol_given)
                        for t in targets:
                            if t not in v.targets:
                                continue
                            used.add(t)
                            cases.append(Case(
                                suite=ctx.name, workload=name, variant=v.name, params=params,
                                knobs=pairs(knobs), dtype=d, target=t, rtol=float(tol["rtol"]),
                                atol=float(tol["atol"]), timeout_s=timeout))
        if not cases:
            builds = "; ".join(f"{v.name}: {', '.join(v.targets)}" for v, _ in variants)
            where = W + ("variants",) if "variants" in e else W
            raise self.err(where, f"{ctxw} gives no cases: its variants build for other targets than "
                                  f"{', '.join(targets)} (variant targets: {builds})")
        return _EntryResult(name, cases, inherits, used, threshold, gpu_models, peers)

    def variants(self, vs: Any, wl: Any, W: Where, ctxw: str) -> list[tuple[Any, list[dict[str, Any]]]]:
        where = W + ("variants",)
        if not isinstance(vs, list):
            raise self.err(where, f"{ctxw}: variants must be an array of variant names or "
                                  f"{{ name = ..., knobs = {{ ... }} }} tables, got {_show(vs)}")
        if not vs:
            raise self.err(where, f"{ctxw}: variants is empty: list at least one of "
                                  f"{', '.join(wl.variants)} (or leave `variants` out for all)")
        out = []
        for item in vs:
            if isinstance(item, str):
                vname, knobs = item, {}
            elif isinstance(item, dict):
                self.check_keys(item, VARIANT_KEYS, where, f"a {ctxw} variant table")
                vname, knobs = item.get("name"), item.get("knobs", {})
                if not isinstance(vname, str):
                    raise self.err(where, f"{ctxw}: a variant table needs `name`, a string, got "
                                          f"{_show(vname) if vname is not None else 'nothing'}",
                                   _key_needle("name") if vname is not None else r"\{")
                if not isinstance(knobs, dict):
                    raise self.err(where, f"{ctxw}: knobs of variant {vname!r} must be a table, got "
                                          f"{_show(knobs)}", _value_needle(vname), _key_needle("knobs"))
            else:
                raise self.err(where, f"{ctxw}: a variant must be a name or a {{ name, knobs }} table, got "
                                      f"{_show(item)}", _value_needle(item))
            v = wl.variants.get(vname)
            if v is None:
                raise self.err(where, f"{ctxw} has no variant {vname!r}; variants: {', '.join(wl.variants)}",
                               _value_needle(vname))
            defaults = v.knob_defaults()
            lists: dict[str, list[Any]] = {k: [d] for k, d in defaults.items()}
            for k, val in knobs.items():
                nd = (_value_needle(vname), _key_needle(k))
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
            grid = [dict(zip(lists, combo)) for combo in itertools.product(*lists.values())]
            out.append((v, grid))
        return out


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


__all__ = ["EXIT_CONFIG", "TARGETS", "Suite", "SuiteError", "load_suite", "parse_suite"]
