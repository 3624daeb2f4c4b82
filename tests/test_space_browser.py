"""The Space in a real browser (Debian chromium driven by playwright) at a laptop (1440×900) and a phone (390×844)
viewport: the leaderboard, a run started from the page, Explore, Compare and About, one check per defect of
issue 15. Screenshots are written to test-artifacts/space-browser/ (gitignored) for a human to look at.
"""

from __future__ import annotations

import re
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
VIEWPORTS = {"laptop": (1440, 900), "phone": (390, 844)}
TABS = ("Leaderboard", "Evaluate", "Explore", "Compare", "Try", "About")

pytestmark = pytest.mark.skipif(
    not CHROMIUM.exists(), reason=f"{CHROMIUM} not found: install Debian's chromium (apt-get install -y chromium)"
)


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    root = tmp_path_factory.mktemp("browser")
    for model in ("baseline:length", "baseline:random"):  # the leaderboard starts with two runs on the same pairs
        seeded = cli_results(root / "results" / model.split(":")[1], model, 2, 0)
        assert seeded["model"] == model
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    env = {"PRBENCH_RESULTS_DIR": str(root / "results"), "PRBENCH_CACHE": str(root / "cache")}
    with running_space(root, **env) as url:
        yield url


@pytest.fixture(scope="module")
def browser():
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=str(CHROMIUM), args=ARGS)
        yield launched
        launched.close()


@pytest.fixture(params=list(VIEWPORTS), scope="module")
def page(request, server, browser):
    width, height = VIEWPORTS[request.param]
    tab = browser.new_page(viewport={"width": width, "height": height})
    tab.set_default_timeout(TIMEOUT_MS)
    errors: list[str] = []
    tab.on("pageerror", lambda error: errors.append(str(error)))
    tab.goto(server)
    tab.locator(_row_selector("demo-leaderboard")).first.wait_for()
    yield tab, errors, request.param
    tab.close()


def _row_selector(table_id: str) -> str:
    """Data rows of a gr.Dataframe (a virtual table: role=row, the header row has aria-rowindex 1)."""
    return f"#{table_id} [role=grid] [role=row]:not([aria-rowindex='1'])"


def _rows(tab, table_id: str) -> list[str]:
    return [" ".join(text.split()) for text in tab.locator(_row_selector(table_id)).all_inner_texts()]


def _shot(tab, name: str, viewport: str) -> None:
    tab.screenshot(path=str(ARTIFACTS / f"{name}-{viewport}.png"), full_page=True)


def _open(tab, name: str) -> None:
    tab.get_by_role("tab", name=name, exact=True).click()


def test_leaderboard(page):
    tab, errors, viewport = page
    for name in TABS:  # every tab is on screen: none hides behind an overflow menu on a phone
        assert tab.get_by_role("tab", name=name, exact=True).is_visible(), name
    rows = _rows(tab, "demo-leaderboard")
    assert len(rows) >= 2 and any("baseline:length" in row for row in rows)  # (the laptop run adds one)
    assert all("first 2 per subset" in row for row in rows) or viewport == "phone"
    assert tab.get_by_text("No benchmark runs yet").is_visible()  # an empty section says so ...
    assert not tab.locator("#leaderboard").is_visible()  # ... instead of an empty table with headers
    assert tab.get_by_text("Click a column header to sort").count() == 0
    assert tab.get_by_text("macro", exact=False).first.is_visible()  # "macro" is explained beside the tables
    # the pinned columns (rank, model, overall) are on screen at both widths
    header = tab.locator("#demo-leaderboard [role=columnheader]").all_inner_texts()
    assert [" ".join(h.split()) for h in header[:3]] == ["rank", "model", "overall"]
    overall = tab.locator("#demo-leaderboard [role=columnheader]").nth(2).bounding_box()
    assert overall["x"] + overall["width"] <= VIEWPORTS[viewport][0]
    if viewport == "laptop":  # coverage is on screen at 1440 px
        coverage = tab.locator("#demo-leaderboard [role=columnheader]", has_text="coverage").bounding_box()
        assert coverage["x"] + coverage["width"] <= 1440
    _shot(tab, "leaderboard", viewport)

    search = tab.locator("#board-search textarea, #board-search input").first
    search.fill("length")
    tab.wait_for_function(
        "(selector) => document.querySelectorAll(selector).length == 1", arg=_row_selector("demo-leaderboard")
    )
    assert "baseline:length" in _rows(tab, "demo-leaderboard")[0]
    search.fill("")
    tab.locator(_row_selector("demo-leaderboard")).nth(1).wait_for()

    tab.get_by_label("Show demo-sample runs").uncheck()  # the chart stops offering demo-sample runs
    tab.get_by_label("demo-sample runs", exact=True).wait_for(state="detached")
    assert not tab.locator("#demo-leaderboard").is_visible()
    tab.get_by_label("Show demo-sample runs").check()
    tab.get_by_label("demo-sample runs", exact=True).wait_for()

    tab.locator("#refresh-button").click()  # Refresh says what it did
    tab.get_by_text("Leaderboard refreshed").first.wait_for()
    assert errors == []


def test_evaluate(page):
    tab, errors, viewport = page
    _open(tab, "Evaluate")
    summary = tab.locator("#run-summary")
    summary.get_by_text("press Run").wait_for()
    assert not tab.locator("#per-subset").is_visible()  # no table of headers "1 2 3" before the first run
    tab.get_by_label("Model (allowlisted)").first.click()
    tab.get_by_role("option", name="baseline:random").click()
    tab.locator("#pairs-input input").fill("999")
    tab.locator("#run-button").click()
    summary.get_by_text("accuracy").first.wait_for()
    text = summary.inner_text()
    assert "pairs per subset: 999 is over the most, 8; using 8" in text and "24 pairs" in text
    assert tab.locator("#margins img, #margins canvas, #margins svg").first.is_visible()
    assert tab.locator("#per-subset").is_visible()
    _shot(tab, "evaluate", viewport)

    tab.get_by_label("Lifestyle_and_Personal_Development").first.uncheck()
    tab.get_by_label("Society_and_Culture").first.uncheck()
    tab.get_by_label("Art_and_Entertainment").first.uncheck()
    tab.locator("#run-button").click()  # an error: the earlier result must not stay on screen beside it
    tab.get_by_text("choose at least one subset").first.wait_for()
    assert "accuracy" not in summary.inner_text()
    assert not tab.locator("#per-subset").is_visible()
    _shot(tab, "evaluate-error", viewport)
    for name in ("Art_and_Entertainment", "Lifestyle_and_Personal_Development", "Society_and_Culture"):
        tab.get_by_label(name).first.check()
    tab.locator("#pairs-input input").fill("8")
    assert errors == []


def test_explore(page):
    tab, errors, viewport = page
    _open(tab, "Explore")
    view = tab.locator("#model-view textarea")
    tab.wait_for_function("() => document.querySelector('#model-view textarea').value.includes('── user ──')")
    assert "Post 1 (Category:" in view.input_value()
    key = tab.locator("#answer-key")
    key.get_by_text("Rubric aspects").wait_for()
    first, second = view.bounding_box(), key.bounding_box()
    if viewport == "phone":  # one column: the answer key sits below what the model sees
        assert second["y"] >= first["y"] + first["height"] - 1
        assert first["width"] >= 280  # the full width of the phone, less the margins
    else:  # two columns side by side
        assert abs(second["y"] - first["y"]) < 200 and second["x"] > first["x"] + first["width"] - 1
    tab.get_by_label("pairwise judge").check()
    tab.wait_for_function("() => document.querySelector('#model-view textarea').value.includes('── system ──')")
    assert "[Answer A]" in view.input_value()
    assert tab.locator("#stored-scores").is_visible()
    assert "correct" in " ".join(tab.locator("#stored-scores [role=columnheader]").all_inner_texts())
    _shot(tab, "explore", viewport)
    tab.get_by_label("reward model (default template)").check()
    assert errors == []


def test_compare_and_open_a_disagreement_in_explore(page):
    tab, errors, viewport = page
    _open(tab, "Compare")
    tab.locator("#compare-button").click()
    summary = tab.locator("#compare-summary")
    summary.get_by_text("McNemar").wait_for()
    assert re.search(r"p = [0-9.e-]+", summary.inner_text())
    assert tab.locator("#compare-subsets").is_visible()
    _shot(tab, "compare", viewport)
    rows = tab.locator(_row_selector("disagreements"))
    if rows.count():
        pair = rows.first.inner_text().split()[0]
        rows.first.locator("[role=gridcell]").first.click()
        tab.get_by_role("tab", name="Explore", exact=True).and_(tab.locator("[aria-selected=true]")).wait_for()
        tab.wait_for_function(
            "(pair) => (document.querySelector('#pair-menu input') || {}).value?.startsWith(pair)", arg=pair
        )
    assert errors == []


def test_about(page):
    tab, errors, viewport = page
    _open(tab, "About")
    about = tab.locator("#about-text")
    about.get_by_text("Wilson score interval").wait_for()
    for text in ("tie is wrong", "macro", "Profile-k", "prbench evaluate", "arXiv 2604.07343"):
        assert text in about.inner_text(), text
    assert "@misc{ma2026personalizedrewardbench" in tab.locator("#citation").inner_text()
    _shot(tab, "about", viewport)
    assert errors == []
