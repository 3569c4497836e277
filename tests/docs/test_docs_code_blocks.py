"""On the docs site, a code block shows its whole command at a laptop's width (1,400 px) in
a real headless Chromium: nothing is cut off behind a horizontal scrollbar. Column-aligned
``text`` blocks (tables printed by scripts) may scroll; they keep their columns."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow  # builds the site and starts a browser

REPO = Path(__file__).resolve().parents[2]
PAGES = ("getting-started", "real-model", "fake-llm", "sweeps", "voyager", "methods")
"""Pages whose shell blocks hold the longest commands."""
OVERFLOW = """return Array.from(document.querySelectorAll('.md-typeset pre > code'))
  .filter(c => !c.closest('.language-text') && c.scrollWidth > c.clientWidth + 1)
  .map(c => c.textContent.split('\\n').reduce((a, b) => a.length >= b.length ? a : b));"""


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("site")
    proc = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "-d", str(out)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
    )
    assert proc.returncode == 0, proc.stderr[-4000:]
    return out


@pytest.fixture(scope="module")
def browser(tmp_path_factory: pytest.TempPathFactory):
    from tests.conftest import installed

    chromium, chromedriver = installed("chromium"), installed("chromedriver")
    if chromium is None or chromedriver is None:
        pytest.skip(
            "the docs' browser test did not run: no browser installed (chromium and chromedriver "
            "on PATH; apt-get install chromium chromium-driver, see the README's Set-up)"
        )
    webdriver = pytest.importorskip(
        "selenium.webdriver", reason="selenium is in the dev extra: pip install -e .[dev]"
    )
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = chromium
    for flag in (
        "--headless=new",
        "--no-sandbox",
        "--disable-gpu",
        "--no-first-run",
        "--disable-dev-shm-usage",
        "--disable-background-networking",
        "--window-size=1400,900",
        f"--user-data-dir={tmp_path_factory.mktemp('chromium-profile')}",
    ):
        options.add_argument(flag)
    driver = webdriver.Chrome(service=Service(chromedriver), options=options)
    driver.set_page_load_timeout(60)
    yield driver
    driver.quit()


@pytest.mark.parametrize("page", PAGES)
def test_every_command_block_shows_its_whole_lines_at_1400_px(
    site: Path, browser, page: str, tmp_path: Path
) -> None:
    browser.get((site / page / "index.html").as_uri())
    assert browser.find_elements("css selector", ".md-typeset pre > code"), (
        f"{page}: no code block rendered"
    )
    cut = browser.execute_script(OVERFLOW)
    browser.save_screenshot(str(tmp_path / f"{page}.png"))
    artifacts = os.environ.get("SPEEDRUNNER_TEST_ARTIFACTS")
    if artifacts and Path(artifacts).is_dir():
        shutil.copy(tmp_path / f"{page}.png", Path(artifacts) / f"docs-{page}.png")
    assert not cut, f"{page}: code blocks cut off at 1,400 px, their longest lines:\n" + "\n".join(
        cut
    )
