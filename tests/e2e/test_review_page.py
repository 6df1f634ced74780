"""The weekly review page in Debian's Chromium, on the known week (tests/review/history.py) with
its objectives imported: every chart drawn by the locally served plotly.js in the theme's
colours, no sideways scroll on a phone, no serious accessibility violation in either theme,
and the screenshots docs/screenshots/review-desktop.png and review-phone.png."""

from __future__ import annotations

import re

import pytest

from incidents import review_views
from tests.conftest import ROOT
from tests.e2e.conftest import person, sign_in
from tests.review import history
from tests.review.objective_series import import_objective_series

pytestmark = [pytest.mark.services, pytest.mark.django_db(transaction=True)]

DESKTOP = {"width": 1280, "height": 900}
PHONE = {"width": 375, "height": 812}
CHARTS = ("chart-burn", "chart-incidents", "chart-resolve", "chart-noisy")
DOCS_SCREENSHOTS = ROOT / "docs" / "screenshots"


@pytest.fixture
def reviewed(monkeypatch, tmp_path):
    monkeypatch.setattr(review_views, "now", lambda: history.NOW)  # the server thread reads it too
    seeded = history.seed()
    import_objective_series(tmp_path)
    person("reviewer", None)  # a viewer
    return seeded


def open_review(browser, live_server, viewport, scheme):
    phone = viewport["width"] < 700
    context = browser.new_context(viewport=viewport, color_scheme=scheme, has_touch=phone, is_mobile=phone)
    page = context.new_page()
    problems: list[str] = []
    page.on("pageerror", lambda error: problems.append(f"page error: {error}"))
    page.on(
        "console",
        lambda message: problems.append(message.text) if "Content Security Policy" in message.text else None,
    )
    sign_in(page, live_server, "reviewer")
    answer = page.goto(live_server.url + "/review/?week=2026-W47")
    assert answer is not None and answer.status == 200
    for chart in CHARTS:
        page.wait_for_selector(f"#{chart} svg.main-svg", timeout=15_000)
    return context, page, problems


@pytest.mark.parametrize(
    "name, viewport, scheme",
    [("desktop", DESKTOP, "light"), ("phone", PHONE, "dark")],
    ids=["desktop", "phone"],
)
def test_the_review_page_draws_its_charts_and_fits_the_screen(
    live_server, browser, reviewed, name, viewport, scheme
):
    context, page, problems = open_review(browser, live_server, viewport, scheme)
    for chart in CHARTS:
        box = page.locator(f"#{chart}").bounding_box()
        svg = page.locator(f"#{chart} svg.main-svg").first.bounding_box()
        assert box and svg and svg["width"] <= box["width"] + 1 and svg["height"] > 100, (chart, box, svg)
    assert page.locator("#chart-incidents .barlayer .trace").count() == 3  # critical, warning, info
    assert page.locator("#chart-noisy .barlayer .point").count() >= 4
    assert (
        page.locator("#chart-burn .shapelayer path").count() == 2
    )  # the week's band, the whole budget's line
    # The bars take the theme's colours from the stylesheet.
    critical = page.evaluate(
        "getComputedStyle(document.documentElement).getPropertyValue('--chart-critical')"
    )
    fill = (
        page.locator("#chart-incidents .barlayer .trace")
        .first.locator("path")
        .first.evaluate("path => getComputedStyle(path).fill")
    )
    assert _rgb(fill) == _rgb(critical.strip()), (fill, critical)
    assert "NoisyThing" in page.locator("#chart-noisy").inner_text()
    width, inner = page.evaluate("[document.documentElement.scrollWidth, window.innerWidth]")
    assert width <= inner, (name, width, inner)
    assert page.locator("header nav a", has_text="Review").count() == 1
    assert not problems, problems
    DOCS_SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(DOCS_SCREENSHOTS / f"review-{name}.png"), full_page=True)
    context.close()


@pytest.mark.parametrize("scheme", ["light", "dark"])
def test_no_serious_or_critical_accessibility_violation(live_server, browser, reviewed, scheme):
    from axe_playwright_python.sync_playwright import Axe

    for viewport in (DESKTOP, PHONE):
        context, page, _ = open_review(browser, live_server, viewport, scheme)
        found = Axe().run(page).response["violations"]
        bad = [(v["id"], v["impact"], [n["target"] for n in v["nodes"]][:3]) for v in found
               if v["impact"] in ("serious", "critical")]  # fmt: skip
        assert not bad, (scheme, viewport["width"], bad)
        context.close()


def test_a_bad_week_shows_what_is_wrong(live_server, page, reviewed):
    sign_in(page, live_server, "reviewer")
    answer = page.goto(live_server.url + "/review/?week=2026-W99")
    assert answer is not None and answer.status == 400
    assert "2026 has no week 99" in page.locator(".flash.error").inner_text()
    page.click("text=the last complete week, 2026-W48")
    page.wait_for_url(re.compile(r".*week=2026-W48$"))
    assert "2026-W48" in page.locator("h1").inner_text()


def _rgb(colour: str) -> tuple[int, ...]:
    """'rgb(196, 54, 44)' or '#c4362c' as (196, 54, 44)."""
    if colour.startswith("#"):
        return tuple(int(colour[i : i + 2], 16) for i in (1, 3, 5))
    return tuple(int(x) for x in re.findall(r"\d+", colour)[:3])
