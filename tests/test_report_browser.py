"""report.html in a real browser: headless Chromium renders it, we look at pixels and DOM.

Needs Debian's ``chromium`` (scripts/ci/browser-deps.sh). Missing browser:
skipped locally, a failure under CI so the check cannot silently vanish.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest
import report_synthetic as synthetic
from PIL import Image

from station.report import write_reports

BROWSERS = ("chromium", "chromium-browser")
# Everything that could reach a network or a profile is off: the page must
# render from the file alone.
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--hide-scrollbars"]


@pytest.fixture(scope="module")
def chromium() -> str:
    for name in BROWSERS:
        path = shutil.which(name)
        if path:
            return path
    message = ("headless browser not found: install Debian package 'chromium' "
               "(scripts/ci/browser-deps.sh)")
    if os.environ.get("CI"):
        pytest.fail(message)
    pytest.skip(message)


@pytest.fixture(scope="module")
def rendered(tmp_path_factory: pytest.TempPathFactory):
    report, samples = synthetic.build(n=20_000)
    out = tmp_path_factory.mktemp("browser")
    paths = write_reports(report, samples, out)
    return report, samples, paths


def _run(chromium: str, tmp: Path, *args: str) -> subprocess.CompletedProcess[str]:
    profile = tmp / "profile"
    return subprocess.run([chromium, *FLAGS, f"--user-data-dir={profile}", *args],
                          capture_output=True, text=True, timeout=180, check=False)


class Screenful:
    """A report page as headless Chromium shows it: its top screenful, its DOM, its own CSS."""

    def __init__(self, chromium: str, page: Path, tmp: Path) -> None:
        self.html = page.read_text(encoding="utf-8")
        png = tmp / "top.png"
        proc = _run(chromium, tmp, "--enable-logging=stderr", "--v=0", f"--screenshot={png}",
                    "--window-size=1280,1400", page.as_uri())
        assert png.exists(), proc.stderr[-2000:]
        # the page has no script: anything it logs (an SVG attribute the parser rejects) is an error
        self.console = [ln for ln in proc.stderr.splitlines() if ":CONSOLE" in ln]
        self.image = np.asarray(Image.open(png).convert("RGB")).astype(int)
        self.dom = _run(chromium, tmp, "--dump-dom", page.as_uri()).stdout

    def shown(self, selector: str) -> bool:
        """The background colour the page's CSS gives `selector` covers part of the first screenful."""
        colour = re.search(rf"{re.escape(selector)} {{[^}}]*?background: #([0-9a-f]{{6}})", self.html).group(1)
        rgb = np.array([int(colour[i:i + 2], 16) for i in (0, 2, 4)])
        return int((np.abs(self.image - rgb).max(axis=2) <= 2).sum()) > 200


# Run in the page by Chromium (a copy with this script; the shipped page has none): every table
# wider than its container (the columns a reader must scroll to), every figure text outside its
# figure (a clipped axis label), as the browser laid them out at 1280 px.
_LAYOUT_PROBE = """<script>
window.addEventListener('load', () => {
  const out = {tables: [], labels: []};
  const page = document.documentElement.clientWidth;
  for (const t of document.querySelectorAll('table')) {
    const box = t.parentElement.getBoundingClientRect(), r = t.getBoundingClientRect();
    if (r.right > box.right + 1 || r.width > page)
      out.tables.push({table: (t.closest('[id]') || {}).id || t.previousElementSibling?.id || '',
                       width: Math.round(r.width), container: Math.round(box.width)});
  }
  for (const svg of document.querySelectorAll('svg')) {
    const s = svg.getBoundingClientRect();
    for (const txt of svg.querySelectorAll('text, g[id^="text_"]')) {
      const r = txt.getBoundingClientRect();
      if (r.width && (r.left < s.left - 1 || r.right > s.right + 1 || r.top < s.top - 1 || r.bottom > s.bottom + 1))
        out.labels.push({figure: (svg.closest('[id]') || {}).id || '',
                         text: (txt.textContent || txt.id).trim().slice(0, 60)});
    }
  }
  document.body.setAttribute('data-layout', JSON.stringify(out));
});
</script>"""


def layout_problems(chromium: str, page: Path, tmp: Path, width: int = 1280) -> dict:
    """The tables wider than their container and the figure texts outside their figure, as
    headless Chromium lays the page out `width` px wide."""
    import html
    import json

    probe = tmp / f"layout-{page.stem}.html"
    probe.write_text(page.read_text(encoding="utf-8").replace("</body>", _LAYOUT_PROBE + "</body>"),
                     encoding="utf-8")
    dom = _run(chromium, tmp, f"--window-size={width},1000", "--virtual-time-budget=3000", "--dump-dom",
               probe.as_uri()).stdout
    found = re.search(r'data-layout="([^"]*)"', dom)
    assert found, "the layout probe did not run: " + dom[-500:]
    return json.loads(html.unescape(found.group(1)))


def test_module_and_cyclictest_reports_fit_1280_px(chromium: str, rendered, tmp_path: Path) -> None:
    """No table wider than the page's column and no clipped figure text, at 1280 px."""
    _, _, paths = rendered
    assert layout_problems(chromium, paths["report.html"], tmp_path) == {"tables": [], "labels": []}
    report, samples = synthetic.build_cyclictest()
    ct = write_reports(report, samples, tmp_path / "ct")
    assert layout_problems(chromium, ct["report.html"], tmp_path) == {"tables": [], "labels": []}


def test_page_renders_visibly(chromium: str, rendered, tmp_path: Path) -> None:
    _, _, paths = rendered
    png = tmp_path / "report.png"
    proc = _run(chromium, tmp_path, f"--screenshot={png}", "--window-size=1280,2000",
                paths["report.html"].as_uri())
    assert png.exists(), proc.stderr[-2000:]
    image = np.asarray(Image.open(png).convert("RGB"))
    assert image.shape[:2] == (2000, 1280)
    gray = image.mean(axis=2)
    # Not blank: many distinct colours (text, table shading, the warning box) and ink
    # spread over the page, not just a header.
    assert len(np.unique(image.reshape(-1, 3), axis=0)) > 50
    assert gray.std() > 10
    ink_rows = (gray < 128).any(axis=1)
    assert ink_rows[:400].any() and ink_rows[1000:].any()


def test_dom_has_figures_and_numbers(chromium: str, rendered, tmp_path: Path) -> None:
    report, samples, paths = rendered
    proc = _run(chromium, tmp_path, "--dump-dom", paths["report.html"].as_uri())
    dom = proc.stdout
    assert "<svg" in dom, proc.stderr[-2000:]
    n_figures = sum(k.startswith("figures/") for k in paths)
    assert dom.count("<svg") == n_figures
    assert dom.count("<path") > 10 * n_figures  # the figures' content was parsed as SVG
    assert report["campaign"]["name"] in dom
    for run_id, s in samples.items():
        assert f"{s.sw.samples().mean() / 1000:.3f}" in dom, run_id
        assert f"{s.sw.samples().max() / 1000:.3f}" in dom, run_id
    for item in report["comparisons"]["t_rw"]:
        assert f"{item['estimate_ns'] / 1000:.3f}" in dom
