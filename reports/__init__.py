"""kbench's reports: one run of the result store as HTML, Markdown, JUnit XML, pytest-benchmark JSON,
CSV and Parquet.

>>> from harness.store import Store                                    # doctest: +SKIP
>>> from reports import collect, write_all
>>> with Store.open("kbench.db") as store:
...     data = collect(store, 7, verdicts, baseline_label="run 3")
>>> write_all(data, "kbench-out")
{'html': PosixPath('kbench-out/run7-report.html'), 'markdown': ..., ...}

Modules: :mod:`reports.data` (what a report shows, gathered once), :mod:`reports.plots`
(matplotlib charts as inline SVG), :mod:`reports.html`, :mod:`reports.markdown`,
:mod:`reports.junit`, :mod:`reports.pybench_json`. Reports go to an output folder (default
``./kbench-out/``), never into the source tree.
"""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

from reports.data import ReportData, collect
from reports.html import render_html, write_html
from reports.junit import junit_xml
from reports.markdown import markdown_summary
from reports.pybench_json import pybench_json


def write_all(data: ReportData, out_dir: str | Path) -> dict[str, Path]:
    """Write every report of ``data`` into ``out_dir`` (created if missing).

    Files are named ``run<ID>-<name>``: ``report.html``, ``summary.md``, ``junit.xml``,
    ``benchmarks.json`` (pytest-benchmark format), ``results.csv`` and, when pyarrow is
    importable, ``results.parquet`` (both: the run's results with raw samples; in CSV the sample
    lists are JSON text).

    Returns
    -------
    dict
        kind -> path, kinds "html", "markdown", "junit", "pybench", "csv" and "parquet" (when
        written).
    """
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    prefix = f"run{data.run_id}-"
    paths: dict[str, Path] = {}
    paths["html"] = write_html(data, out / f"{prefix}report.html")
    paths["markdown"] = out / f"{prefix}summary.md"
    paths["markdown"].write_text(markdown_summary(data), encoding="utf-8")
    paths["junit"] = out / f"{prefix}junit.xml"
    paths["junit"].write_text(junit_xml(data), encoding="utf-8")
    paths["pybench"] = out / f"{prefix}benchmarks.json"
    paths["pybench"].write_text(json.dumps(pybench_json(data), indent=2, allow_nan=False) + "\n",
                                encoding="utf-8")
    frame = data.results.copy()
    csv_frame = frame.copy()
    for col in ("samples", "sm_clocks_mhz"):
        if col in csv_frame.columns:
            csv_frame[col] = [json.dumps(list(v)) for v in csv_frame[col]]
    paths["csv"] = out / f"{prefix}results.csv"
    csv_frame.to_csv(paths["csv"], index=False)
    if importlib.util.find_spec("pyarrow") is not None:
        paths["parquet"] = out / f"{prefix}results.parquet"
        try:
            frame.to_parquet(paths["parquet"], index=False)
        except (TypeError, ValueError, ImportError):
            # pyarrow refuses object columns of mixed types (env fields differ between
            # fingerprint versions); store those as text rather than lose the file
            mixed = frame.copy()
            for col in mixed.columns:
                if mixed[col].dtype == object and col not in ("samples", "sm_clocks_mhz"):
                    mixed[col] = [None if v is None else str(v) for v in mixed[col]]
            mixed.to_parquet(paths["parquet"], index=False)
    return paths


__all__ = ["ReportData", "collect", "junit_xml", "markdown_summary", "pybench_json", "render_html",
           "write_all", "write_html"]
