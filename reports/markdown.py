"""A short Markdown summary of a run for a pull-request comment: the verdict counts and a table of the
cases that are not SAME, with their change and its confidence interval.

Link-free (a CI comment must not point at artefacts that expire) and safe to paste anywhere: every
name that comes from data is escaped for GitHub-flavoured Markdown: table pipes, Markdown
punctuation and HTML (``<``, ``>``, ``&`` become entities), newlines become spaces.
"""

from __future__ import annotations

import re

from reports.data import (
    ReportData,
    case_rows,
    fmt_p,
    fmt_pct,
    fmt_time,
    missing_verdicts,
    outcome_counts,
    short_commit,
    summary_sentence,
    verdict_counts,
)

#: at most this many rows in the table of non-SAME cases
MAX_ROWS = 50

_ICON = {"SAME": "⚪", "FASTER": "🟢", "SLOWER": "🔴", "AMBIGUOUS": "🟡", "WRONG": "❌", "NEW": "🆕",
         "MISSING": "➖"}
_ORDER = ("WRONG", "SLOWER", "AMBIGUOUS", "MISSING", "FASTER", "NEW")
# characters that can start Markdown inline syntax anywhere in a line (links need "[", which is
# escaped, so parentheses stay readable); "$" starts GitHub math
_MD_PUNCT = re.compile(r"([\\`*_\[\]|~$])")
_AUTOLINK = re.compile(r"(?i)\b(https?|ftp|file)://|\bwww\.")


def md_escape(text: object, limit: int = 160) -> str:
    """``text`` as inert Markdown: one line, pipes and Markdown punctuation backslash-escaped,
    ``&``, ``<`` and ``>`` as HTML entities, URLs defused (``http\\://``, ``www\\.``: no
    autolink); cut to ``limit`` characters."""
    s = " ".join(str(text).split())
    if len(s) > limit:
        s = s[:limit - 1] + "…"
    s = s.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    s = _MD_PUNCT.sub(r"\\\1", s)
    return _AUTOLINK.sub(lambda m: m.group(0).replace("://", "\\://").replace(".", "\\."), s)


def markdown_summary(data: ReportData) -> str:
    """The PR-comment summary of ``data`` as Markdown text.

    Contents: a title line (run, suite, commit, baseline), the one-sentence summary, verdict and
    outcome counts, a table of every case whose verdict is not SAME (or, without a baseline, every
    case that did not finish ok) with its median, Δ against the baseline, the bootstrap CI of Δ
    and the q-value, and the list of MISSING cases.
    """
    run = data.run
    lines = []
    title = f"### kbench run {data.run_id} · suite {md_escape(run.get('suite_name') or '')}"
    commit = short_commit(run.get("git_commit"))
    if commit:
        title += f" · commit {md_escape(commit)}"
    if data.baseline_label:
        title += f" · vs {md_escape(data.baseline_label)}"
    lines += [title, "", f"**{md_escape(summary_sentence(data), limit=600)}**", ""]

    counts = verdict_counts(data)
    if counts:
        lines.append(" · ".join(f"{_ICON.get(k, '')} {k} {v}" for k, v in counts.items()))
    outcomes = outcome_counts(data)
    lines.append("Outcomes: " + ", ".join(f"{v} {md_escape(k)}" for k, v in outcomes.items()) + "")
    lines.append("")

    rows = case_rows(data)
    if data.verdicts:
        picked = [r for r in rows if r["verdict"] not in ("", "SAME", "MISSING")]
        picked.sort(key=lambda r: (_ORDER.index(r["verdict"]) if r["verdict"] in _ORDER else 99,
                                   -(r["delta_pct"] or 0)))
        heading = "Cases that changed or need a look"
    else:
        picked = [r for r in rows if r["outcome"] != "ok"]
        heading = "Cases that did not finish correctly"
    if picked:
        lines += [f"#### {heading}", "",
                  "| verdict | workload / variant | shape · dtype · target | device | median | Δ "
                  "| 95 % CI of Δ | q |",
                  "|---|---|---|---|---:|---:|---:|---:|"]
        for r in picked[:MAX_ROWS]:
            verdict = r["verdict"] or r["outcome"]
            delta = fmt_pct(r["delta_pct"], signed=True)
            ci = "—"
            if r["ratio_lo"] is not None and r["ratio_hi"] is not None:
                ci = f"{(r['ratio_lo'] - 1) * 100:+.1f} … {(r['ratio_hi'] - 1) * 100:+.1f} %"
            name = f"{md_escape(r['workload'], 60)} / {md_escape(r['variant'], 60)}"
            if r["knobs"]:
                name += f" \\[{md_escape(r['knobs'], 60)}\\]"
            if r["outcome"] != "ok":
                name += f"<br>{md_escape(r['outcome'])}: {md_escape(r['message'], 120)}"
            where = md_escape(" · ".join(x for x in (r["shape"], r["dtype"], r["target"]) if x), 80)
            lines.append(f"| {_ICON.get(verdict, '')} {md_escape(verdict)} | {name} | {where} | "
                         f"{md_escape(r['device'] or '—', 60)} | {fmt_time(r['median_s'])} | "
                         f"{delta} | {ci} | "
                         f"{md_escape(fmt_p(r['q_value']))} |")
        if len(picked) > MAX_ROWS:
            lines.append(f"\n… and {len(picked) - MAX_ROWS} more (see the HTML report).")
        lines.append("")
    missing = missing_verdicts(data)
    if missing:
        lines.append("#### In the baseline but not in this run")
        lines.append("")
        for v in missing[:MAX_ROWS]:
            lines.append(f"- {md_escape(v.case_key, 200)} on {md_escape(v.device or 'unknown device', 60)}")
        lines.append("")
    lines.append(f"<sub>{len(rows)} cases · medians with 95 % CI · verdicts: Mann-Whitney U + bootstrap CI "
                 "of the ratio of medians, Benjamini-Hochberg q-values, practical threshold.</sub>")
    return "\n".join(lines) + "\n"


__all__ = ["MAX_ROWS", "markdown_summary", "md_escape"]
