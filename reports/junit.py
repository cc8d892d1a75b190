"""The run as a JUnit XML report (the Ant/Jenkins shape every CI system reads).

One ``<testsuite>`` for the run and one ``<testcase classname="workload.variant" name="case_key"
time="median seconds">`` per case. A case fails (``<failure>``) when its verdict is SLOWER or WRONG,
or when it did not finish ok (wrong output, crash, timeout, build error); NEW and MISSING cases are
``<skipped>`` (there was nothing to compare with, resp. the case did not run); SAME, FASTER and
AMBIGUOUS pass, with the verdict in ``<system-out>``. Text is escaped by ElementTree; characters
XML 1.0 cannot carry at all (terminal escapes in compiler output...) are replaced by U+FFFD.
"""

from __future__ import annotations

import math
import re
import xml.etree.ElementTree as ET
from datetime import datetime
from typing import Any

import numpy as np

from reports.data import ReportData, case_rows, fmt_p, fmt_time, missing_verdicts

_XML_INVALID = re.compile("[^\u0009\u000a\u000d\u0020-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")


def _x(text: Any) -> str:
    """Text XML 1.0 can hold (invalid characters become U+FFFD)."""
    return _XML_INVALID.sub("\ufffd", "" if text is None else str(text))


def _seconds(x: float | None) -> str:
    """Seconds as an xs:decimal (positional, no exponent), shortest exact form."""
    if x is None or not math.isfinite(x):
        return "0"
    return np.format_float_positional(x, trim="-")


def _ratio_text(r: dict[str, Any], base: str) -> str:
    ratio = r["ratio"]
    text = f"{ratio:.4f}x the median of {base}" if ratio is not None else f"slower than {base}"
    if r["ratio_lo"] is not None and r["ratio_hi"] is not None:
        text += f" (95 % CI {r['ratio_lo']:.4f}-{r['ratio_hi']:.4f})"
    text += f"; median {fmt_time(r['median_s'])} vs {fmt_time(r['base_median_s'])}"
    if r["q_value"] is not None:
        text += f"; q = {fmt_p(r['q_value'])}"
    elif r["p_value"] is not None:
        text += f"; p = {fmt_p(r['p_value'])}"
    if r["threshold"] is not None:
        text += f"; threshold {r['threshold'] * 100:g} %"
    return text


def junit_xml(data: ReportData) -> str:
    """The JUnit XML text of ``data`` (UTF-8, with an XML declaration).

    Attributes of ``<testsuite>``: name (``kbench.<suite>``), tests, failures, errors (always 0:
    kbench's failures are the cases' own), skipped, time (the run's wall time, else the sum of the
    medians), timestamp, hostname; ``<properties>`` carry run id, commit, kbench version, baseline.
    """
    run = data.run
    base = data.baseline_label or "the baseline"
    suite = ET.Element("testsuite")
    props = ET.SubElement(suite, "properties")
    for name, value in (("run_id", data.run_id), ("suite", run.get("suite_name")),
                        ("git_commit", run.get("git_commit")), ("kbench_version", run.get("kbench_version")),
                        ("status", run.get("status")), ("baseline", data.baseline_label)):
        if value not in (None, ""):
            ET.SubElement(props, "property", name=name, value=_x(value))
    tests = failures = skipped = 0
    total = 0.0
    for r in case_rows(data):
        tests += 1
        t = r["median_s"]
        total += t or 0.0
        tc = ET.SubElement(suite, "testcase", classname=_x(f"{r['workload']}.{r['variant']}"),
                           name=_x(r["case_key"]), time=_seconds(t))
        verdict = r["verdict"]
        if r["outcome"] != "ok" or verdict == "WRONG":
            failures += 1
            msg = f"{r['outcome']}: {r['message']}" if r["message"] else r["outcome"]
            if verdict == "WRONG" and r["outcome"] == "ok":  # a verdict from elsewhere; say so
                msg = f"WRONG: {r['verdict_message'] or msg}"
            f = ET.SubElement(tc, "failure", message=_x(msg[:1000]), type=_x(r["outcome"]))
            f.text = _x(r["message"] or msg)
        elif verdict == "SLOWER":
            failures += 1
            msg = "SLOWER: " + _ratio_text(r, base)
            f = ET.SubElement(tc, "failure", message=_x(msg), type="SLOWER")
            f.text = _x(msg + (f"\n{r['verdict_message']}" if r["verdict_message"] else ""))
        elif verdict == "NEW":
            skipped += 1
            ET.SubElement(tc, "skipped", message=_x(f"NEW: not in {base}, nothing to compare with"))
        if verdict in ("SAME", "FASTER", "AMBIGUOUS", "NEW") and r["outcome"] == "ok":
            out = ET.SubElement(tc, "system-out")
            out.text = _x(f"{verdict}: " + _ratio_text(r, base) if r["ratio"] is not None else
                          f"{verdict}: median {fmt_time(r['median_s'])}")
    for v in missing_verdicts(data):
        tests += 1
        skipped += 1
        classname = f"{v.workload}.{v.variant}" if v.workload else "missing"
        tc = ET.SubElement(suite, "testcase", classname=_x(classname), name=_x(v.case_key), time="0")
        ET.SubElement(tc, "skipped", message=_x(f"MISSING: in {base} but not in this run"))
    wall = _wall_seconds(run)
    host = next((fp.get("host") for fp in data.environments.values() if fp.get("host")), None)
    name = f"kbench.{run.get('suite_name') or 'run'}"
    attrs = {"name": name, "tests": str(tests), "failures": str(failures), "errors": "0",
             "skipped": str(skipped), "time": f"{wall if wall is not None else total:.6f}",
             "timestamp": _timestamp(run.get("started_at"))}
    if host:
        attrs["hostname"] = _x(host)
    for k, v in attrs.items():
        suite.set(k, _x(v))
    ET.indent(suite, space="  ")
    return ET.tostring(suite, encoding="unicode", xml_declaration=False).join(
        ('<?xml version="1.0" encoding="UTF-8"?>\n', "\n"))


def _wall_seconds(run: dict[str, Any]) -> float | None:
    try:
        return (datetime.fromisoformat(str(run["ended_at"]))
                - datetime.fromisoformat(str(run["started_at"]))).total_seconds()
    except (KeyError, TypeError, ValueError):
        return None


def _timestamp(text: Any) -> str:
    """ISO 8601 without a zone (the JUnit schema's xs:dateTime pattern), in UTC as stored."""
    try:
        return datetime.fromisoformat(str(text)).strftime("%Y-%m-%dT%H:%M:%S")
    except (TypeError, ValueError):
        return datetime.now().strftime("%Y-%m-%dT%H:%M:%S")


__all__ = ["junit_xml"]
