"""The HTML report in a real headless Chromium (Debian ``chromium`` + ``chromium-driver``, via
Selenium).

It must render without console errors, expand a skill call down to its primitive actions,
and switch episodes. A screenshot is kept as a test artifact: ``report.png`` in the test's
tmp dir, and also in ``$SPEEDRUNNER_TEST_ARTIFACTS`` when that variable names a folder.
Skips only when no browser is installed (``.ci/run`` installs one).
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from speedrunner.cli import main

from .conftest import INVALID, MARKUP

pytestmark = pytest.mark.slow  # uses the session's fixture runs

FLAGS = (
    "--headless=new",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-dev-shm-usage",
    "--window-size=1280,2000",
)


@pytest.fixture
def browser(tmp_path):
    # The suite's one rule for an installed system package (tests/conftest.py: on PATH), so this
    # test runs exactly when the summary says the browser is there.
    from tests.conftest import installed

    chromium, chromedriver = installed("chromium"), installed("chromedriver")
    if chromium is None or chromedriver is None:
        pytest.skip(
            "the report's browser test did not run: no browser installed (chromium and "
            "chromedriver on PATH; apt-get install chromium chromium-driver, see the README's "
            "Set-up)"
        )
    webdriver = pytest.importorskip(
        "selenium.webdriver", reason="selenium is in the dev extra: pip install -e .[dev]"
    )
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = chromium
    for flag in FLAGS:
        options.add_argument(flag)
    options.add_argument(f"--user-data-dir={tmp_path / 'chromium-profile'}")
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    # An explicit driver path: Selenium Manager never runs, so nothing is downloaded.
    driver = webdriver.Chrome(service=Service(chromedriver), options=options)
    driver.set_page_load_timeout(60)
    yield driver
    driver.quit()


def test_the_report_renders_and_the_viewer_expands_a_skill_call_and_switches_episodes(
    fixture_runs, browser, tmp_path
):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import Select

    out = tmp_path / "report"
    assert main(["report", str(fixture_runs.root), "--out", str(out)]) == 0
    browser.get((out / "report.html").resolve().as_uri())

    assert "SCRIPTED MODEL" in browser.find_element(By.ID, "scripted-banner").text
    assert (
        "opo-seed2" in browser.find_element(By.ID, "progress-banner").text
        or "running" in browser.find_element(By.ID, "progress-banner").text
    )
    images = browser.find_elements(By.CSS_SELECTOR, "#plots img")
    assert images and all(
        browser.execute_script("return arguments[0].naturalWidth", img) > 0 for img in images
    )

    runs = Select(browser.find_element(By.ID, "run-select"))
    (demo,) = [o.text for o in runs.options if " speedrunner " in o.text]
    assert "SCRIPTED" in demo
    runs.select_by_visible_text(demo)
    episodes = Select(browser.find_element(By.ID, "episode-select"))
    episodes.select_by_visible_text(
        next(o.text for o in episodes.options if o.text.startswith("train #12 "))
    )
    view = browser.find_element(By.ID, "episode-view")
    assert view.find_element(By.CLASS_NAME, "episode-title").text.startswith("train #12 ")
    assert "SCRIPTED" in view.find_element(By.CLASS_NAME, "scripted-note").text

    call = view.find_element(By.CSS_SELECTOR, "details.skill-call")
    assert call.get_attribute("open") is None
    assert not view.find_element(
        By.CSS_SELECTOR, "details.skill-call .primitive-action"
    ).is_displayed()
    call.find_element(By.TAG_NAME, "summary").click()
    assert call.get_attribute("open") is not None
    assert call.find_element(By.TAG_NAME, "summary").text.startswith("pick_up_then_go_to(")
    nested = call.find_element(By.CSS_SELECTOR, "details.skill-call")  # go_to, called by the skill
    assert nested.find_element(By.TAG_NAME, "summary").text.startswith("go_to(")
    nested.find_element(By.TAG_NAME, "summary").click()
    actions = [a.text for a in nested.find_elements(By.CSS_SELECTOR, ":scope > ol > li > code")]
    assert actions and all(
        a in {"turn left", "turn right", "go forward", "pick up", "drop", "toggle"} for a in actions
    )

    shot = tmp_path / "report.png"
    browser.save_screenshot(str(shot))
    assert shot.read_bytes()[:4] == b"\x89PNG"
    if os.environ.get("SPEEDRUNNER_TEST_ARTIFACTS"):
        keep = Path(os.environ["SPEEDRUNNER_TEST_ARTIFACTS"])
        keep.mkdir(parents=True, exist_ok=True)
        shutil.copy(shot, keep / "report-viewer.png")

    browser.find_element(By.ID, "next-episode").click()
    assert view.find_element(By.CLASS_NAME, "episode-title").text.startswith("train #13 ")
    browser.find_element(By.ID, "prev-episode").click()
    browser.find_element(By.ID, "prev-episode").click()
    assert browser.find_element(By.CLASS_NAME, "episode-title").text.startswith("train #11 ")

    # A skill call cut off by the per-call action cap shows why, down to the nested call.
    episodes.select_by_visible_text(
        next(o.text for o in episodes.options if o.text.startswith("train #46 "))
    )
    call = browser.find_element(By.CSS_SELECTOR, "#episode-view details.skill-call")
    call.find_element(By.TAG_NAME, "summary").click()
    assert "stopped: max_actions" in call.find_element(By.TAG_NAME, "summary").text
    nested = call.find_element(By.CSS_SELECTOR, "details.skill-call")
    nested.find_element(By.TAG_NAME, "summary").click()
    assert (
        "stopped (max_actions)" in nested.find_element(By.CSS_SELECTOR, ":scope > pre.error").text
    )

    # Another run: the episode list is rebuilt, and an invalid answer shows its feedback.
    (react,) = [o.text for o in runs.options if " react " in o.text]
    runs.select_by_visible_text(react)
    assert Select(
        browser.find_element(By.ID, "episode-select")
    ).first_selected_option.text.startswith("train #0 ")
    turns = browser.find_elements(By.CSS_SELECTOR, "#episode-view .turn")
    assert len(turns) == 30
    assert (
        turns[1].find_element(By.CLASS_NAME, "feedback").text
        == "Invalid action: 'fly away' is not a valid action"
    )
    assert turns[1].find_element(By.CSS_SELECTOR, ".action code").text == "fly away"
    turns[1].find_element(By.CSS_SELECTOR, "details.raw-answer > summary").click()
    assert turns[1].find_element(By.CSS_SELECTOR, "details.raw-answer > pre").text == INVALID
    # valid answers: no verbatim copy
    assert turns[2].find_elements(By.CSS_SELECTOR, "details.raw-answer") == []
    assert MARKUP in turns[0].find_element(By.CLASS_NAME, "thought").text
    assert browser.find_elements(By.ID, "injected") == []

    problems = [e for e in browser.get_log("browser") if e["level"] in ("SEVERE", "WARNING")]
    assert problems == []


def test_the_page_is_something_a_researcher_scans(fixture_runs, browser, tmp_path):
    """Wide tables scroll in place (the page never scrolls sideways), long tables start
    collapsed with their CSV named, and the trajectory viewer is reachable from the top: the
    navigation stays on screen wherever the reader is, and the viewer is near the top."""
    from selenium.webdriver.common.by import By

    out = tmp_path / "report"
    assert main(["report", str(fixture_runs.root), "--out", str(out)]) == 0
    browser.get((out / "report.html").resolve().as_uri())
    js = browser.execute_script
    assert js("return document.documentElement.scrollWidth") <= js(
        "return document.documentElement.clientWidth"
    )
    for box in browser.find_elements(By.CSS_SELECTOR, ".table-scroll"):
        assert box.size["width"] <= browser.find_element(By.TAG_NAME, "body").size["width"]

    long_tables = browser.find_elements(By.CSS_SELECTOR, "details.long-table")
    assert long_tables, "the curves table (hundreds of rows) should start collapsed"
    for details in long_tables:
        assert (
            details.get_attribute("open") is None
            and ".csv" in details.find_element(By.TAG_NAME, "summary").text
        )
    viewer_top = js(
        "return document.getElementById('viewer').getBoundingClientRect().top + window.scrollY"
    )
    assert viewer_top < 4 * js("return window.innerHeight"), viewer_top

    js("window.scrollTo(0, document.body.scrollHeight)")
    nav = browser.find_element(By.TAG_NAME, "nav")
    assert (
        nav.is_displayed() and abs(js("return arguments[0].getBoundingClientRect().top", nav)) < 1
    )
    nav.find_element(By.LINK_TEXT, "Trajectories").click()
    assert js("return document.getElementById('viewer').getBoundingClientRect().top") < js(
        "return window.innerHeight"
    )

    summary = long_tables[0].find_element(By.TAG_NAME, "summary")
    js("arguments[0].scrollIntoView({block: 'center'})", summary)
    summary.click()
    assert long_tables[0].find_element(By.TAG_NAME, "tbody").find_elements(By.TAG_NAME, "tr")
    js("window.scrollTo(0, 0)")
    shot = tmp_path / "report-top.png"
    browser.save_screenshot(str(shot))
    assert shot.read_bytes()[:4] == b"\x89PNG"
    if os.environ.get("SPEEDRUNNER_TEST_ARTIFACTS"):
        keep = Path(os.environ["SPEEDRUNNER_TEST_ARTIFACTS"])
        keep.mkdir(parents=True, exist_ok=True)
        shutil.copy(shot, keep / "report-top.png")


def test_the_headline_is_near_the_top_and_fits_a_1400_px_window(fixture_runs, browser, tmp_path):
    """The headline table is the first thing on the page and every one of its columns (cost
    per episode and LLM calls included) is on screen at 1,400 px, without scrolling sideways."""
    from selenium.webdriver.common.by import By

    out = tmp_path / "report"
    assert main(["report", str(fixture_runs.root), "--out", str(out)]) == 0
    browser.set_window_size(1400, 900)
    browser.get((out / "report.html").resolve().as_uri())
    js = browser.execute_script
    table = browser.find_element(By.ID, "table-headline")
    width = js("return document.documentElement.clientWidth")
    assert js("return arguments[0].scrollWidth <= arguments[0].clientWidth", table)
    assert js("return document.documentElement.scrollWidth") <= width
    box = js(
        "var r = arguments[0].getBoundingClientRect(); return [r.left, r.right, r.top];", table
    )
    assert box[0] >= 0 and box[1] <= width and box[2] < js("return window.innerHeight"), box
    heads = table.find_elements(By.TAG_NAME, "th")
    assert [h.text for h in heads][-3:] == [
        "actor LLM calls / episode (with sleep)",
        "$ / episode",
        "total $",
    ]
    for cell in heads + table.find_elements(By.TAG_NAME, "td"):
        right = js("return arguments[0].getBoundingClientRect().right", cell)
        assert right <= width, (cell.text, right, width)
    assert len(table.find_elements(By.CSS_SELECTOR, "tbody tr")) == 3  # opo, react, speedrunner
