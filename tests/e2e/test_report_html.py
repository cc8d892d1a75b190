"""The HTML report in a real browser: headless Chromium (Debian package ``chromium``) renders it,
runs its script without a console error (its Content-Security-Policy included) and sorts the table.
Skipped only where no chromium binary exists (scripts/install.sh installs it)."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import time
from pathlib import Path

import numpy as np
import pytest
from null.test_reports import build_store

from reports import collect, write_html


def _chromium() -> str | None:
    for name in ("chromium", "chromium-browser"):
        found = shutil.which(name)
        if found:
            return found
    return "/usr/bin/chromium" if os.access("/usr/bin/chromium", os.X_OK) else None


CHROMIUM = _chromium()
pytestmark = pytest.mark.skipif(CHROMIUM is None, reason="no chromium binary (Debian: apt-get "
                                                          "install chromium;"
                                                          " scripts/install.sh installs it as root)")

# console lines Chromium writes with --enable-logging=stderr, e.g.
#   [..:INFO:CONSOLE(12)] "Uncaught ReferenceError: x is not defined", source: file:///...
_CONSOLE = re.compile(r"CONSOLE|Uncaught|Content Security Policy|Refused to", re.IGNORECASE)


def browser(tmp: Path, *args: str, timeout: int = 90) -> subprocess.CompletedProcess:
    profile = tmp / f"profile-{time.monotonic_ns()}"
    cmd = [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-extensions",
           "--disable-background-networking", "--disable-sync", "--hide-scrollbars",
           f"--user-data-dir={profile}", "--enable-logging=stderr", "--v=0", *args]
    return subprocess.run(cmd, check=False, capture_output=True, text=True, timeout=timeout, cwd=tmp)


def console_errors(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if _CONSOLE.search(line)]


@pytest.fixture(scope="module")
def page(tmp_path_factory) -> Path:
    tmp = tmp_path_factory.mktemp("html")
    store, run_id, verdicts = build_store(tmp / "k.db")
    with store:
        data = collect(store, run_id, verdicts, baseline_label=f"run {run_id - 1}")
    return write_html(data, tmp / "kbench-out" / f"run{run_id}-report.html")


def test_console_detector_sees_a_broken_page(tmp_path):
    """The console check below is not vacuous: a page whose script throws is caught."""
    bad = tmp_path / "bad.html"
    bad.write_text("<!DOCTYPE html><html><body><p>x</p><script>undefinedFunction();</script></body></html>")
    proc = browser(tmp_path, "--dump-dom", bad.as_uri())
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert any("undefinedFunction" in line for line in console_errors(proc.stderr)), proc.stderr[-3000:]


def test_script_runs_without_console_errors_and_sorts(page, tmp_path):
    proc = browser(tmp_path, "--dump-dom", page.as_uri() + "?sort=median&dir=desc")
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert console_errors(proc.stderr) == [], proc.stderr[-3000:]
    dom = proc.stdout
    body = re.search(r"<body[^>]*>", dom).group(0)
    assert 'data-sort-ready="1"' in body and 'data-sorted-by="median"' in body, body
    # the rows are in descending median order, cases without a median last
    tbody = re.search(r'<table id="cases">.*?<tbody>(.*?)</tbody>', dom, re.DOTALL).group(1)
    rows = re.findall(r"<tr\b.*?</tr>", tbody, re.DOTALL)
    medians = [re.findall(r'<td class="num" data-sort="([^"]*)"', row)[1] for row in rows]  # [0] is Δ
    timed = [float(m) for m in medians if m]
    assert len(rows) == 13 and len(timed) == 12
    assert timed == sorted(timed, reverse=True)
    assert medians[-1] == ""
    assert 'aria-sort="descending"' in re.search(r"<thead>.*?</thead>", dom, re.DOTALL).group(0)
    # hostile names were text, never markup, in the live DOM as well
    assert "<script>alert(1)</script>" not in dom and "&lt;script&gt;alert(1)&lt;/script&gt;" in dom


def test_screenshot_is_not_blank(page, tmp_path):
    shot = tmp_path / "report.png"
    proc = browser(tmp_path, f"--screenshot={shot}", "--window-size=1280,2000", page.as_uri())
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert console_errors(proc.stderr) == [], proc.stderr[-3000:]
    assert shot.is_file() and shot.stat().st_size > 10_000
    from matplotlib import image

    img = image.imread(shot)  # floats in [0, 1], height x width x channels
    assert img.shape[:2] == (2000, 1280)
    grey = img[..., :3].mean(axis=2)
    assert float(np.std(grey)) > 0.05  # not one flat colour
    assert float(np.mean(grey < 0.9)) > 0.02  # text, chips and table lines cover part of the page
    # the verdict chips' colours are on screen (SLOWER red #c62828 somewhere in the summary)
    rgb = (img[..., :3] * 255).round().astype(int)
    assert np.any(np.all(np.abs(rgb - np.array([0xC6, 0x28, 0x28])) <= 6, axis=-1))
