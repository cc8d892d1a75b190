"""Where a key or a value sits in a suite's TOML text, so that every error names its ``file:line``
(tomllib gives the data, not where it came from)."""

from __future__ import annotations

import itertools
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from .values import Where

__all__ = ["Locator", "key_needle", "value_needle"]


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


class Locator:
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
        pats = [key_needle(k) for k in target[len(best.path):]] + list(needles)
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


def key_needle(key: str) -> str:
    return r"(?:^|[\s{,.])[\"']?" + re.escape(key) + r"[\"']?\s*[=.]"


def value_needle(value: Any) -> str:
    if isinstance(value, str):
        return r"([\"'])" + re.escape(value) + r"\1"
    if isinstance(value, bool):
        return r"\b" + ("true" if value else "false") + r"\b"
    return r"(?<![\w.])" + re.escape(str(value)) + r"(?![\w.])"


