"""The Space in a real browser (Debian chromium driven by playwright): the leaderboard renders its rows,
a run started from the page shows its result and then appears on the leaderboard.

Screenshots are written to test-artifacts/space-browser/ (gitignored) for a human to look at.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from space_server import REPO, cli_results, running_space

CHROMIUM = Path("/usr/bin/chromium")
ARTIFACTS = REPO / "test-artifacts" / "space-browser"
ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
TIMEOUT_MS = 90_000

pytestmark = pytest.mark.skipif(
    not CHROMIUM.exists(), reason=f"{CHROMIUM} not found: install Debian's chromium (apt-get install -y chromium)"
)


@pytest.fixture(scope="module")
def page(tmp_path_factory):
    from playwright.sync_api import sync_playwright

    root = tmp_path_factory.mktemp("browser")
    seeded = cli_results(root / "results", "baseline:length", 2, 0)  # the leaderboard starts with one run
    assert seeded["model"] == "baseline:length"
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    env = {"PRBENCH_RESULTS_DIR": str(root / "results"), "PRBENCH_CACHE": str(root / "cache")}
    with running_space(root, **env) as url, sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=str(CHROMIUM), args=ARGS)
        tab = browser.new_page(viewport={"width": 1400, "height": 1000})
        tab.set_default_timeout(TIMEOUT_MS)
        errors: list[str] = []
        tab.on("pageerror", lambda error: errors.append(str(error)))
        tab.goto(url)
        yield tab, errors
        browser.close()


def _row_selector(table_id: str) -> str:
    """Data rows of a gr.Dataframe (a virtual table: role=row, the header row has aria-rowindex 1)."""
    return f"#{table_id} [role=grid] [role=row]:not([aria-rowindex='1'])"


def _rows(tab, table_id: str) -> list[str]:
    return [" ".join(text.split()) for text in tab.locator(_row_selector(table_id)).all_inner_texts()]


def test_leaderboard_renders_the_stored_run(page):
    tab, errors = page
    tab.locator(_row_selector("demo-leaderboard"), has_text="baseline:length").wait_for()
    rows = _rows(tab, "demo-leaderboard")
    assert len(rows) == 1 and "baseline:length" in rows[0] and "demo sample" in rows[0]
    assert _rows(tab, "leaderboard") == [] and _rows(tab, "partial-leaderboard") == []  # sample runs are never ranked
    tab.screenshot(path=str(ARTIFACTS / "leaderboard.png"), full_page=True)
    assert errors == []


def test_a_run_started_in_the_page_reaches_the_leaderboard(page):
    tab, errors = page
    tab.get_by_role("tab", name="Evaluate a model").click()
    tab.get_by_label("Model (allowlisted)").first.click()
    tab.get_by_role("option", name="baseline:random").click()
    tab.locator("#run-button").click()
    summary = tab.locator("#run-summary")
    summary.get_by_text("accuracy").wait_for()
    assert "baseline:random (baseline)" in summary.inner_text() and "24 pairs" in summary.inner_text()
    tab.get_by_text("Pairs the model got most wrong").wait_for()
    tab.screenshot(path=str(ARTIFACTS / "evaluate.png"), full_page=True)

    tab.get_by_role("tab", name="Leaderboard").click()
    tab.locator(_row_selector("demo-leaderboard"), has_text="baseline:random").wait_for()
    rows = _rows(tab, "demo-leaderboard")
    assert len(rows) == 2 and any(
        row.startswith("baseline:random baseline k=0") and " 24 " in row and "first 8 per subset" in row for row in rows
    )
    tab.screenshot(path=str(ARTIFACTS / "leaderboard-after-run.png"), full_page=True)

    tab.get_by_role("tab", name="Explore pairs").click()
    tab.get_by_text("Rubric aspects").wait_for()
    assert tab.get_by_text("Scores of stored runs on this pair").is_visible()
    tab.screenshot(path=str(ARTIFACTS / "explore.png"), full_page=True)
    assert errors == []
