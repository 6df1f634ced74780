"""Browser tests: Debian's Chromium driven by Playwright (no downloaded browser)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.conftest import ROOT, require_binary

SCREENSHOTS = ROOT / "var" / "screenshots"
# Playwright's sync API runs an event loop in this thread; the ORM calls the tests make to set
# up data are synchronous and safe here.
os.environ.setdefault("DJANGO_ALLOW_ASYNC_UNSAFE", "true")


@pytest.fixture(scope="session")
def browser():
    chromium = require_binary("chromium")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(
            executable_path=chromium,
            args=[
                "--no-sandbox",
                "--disable-gpu",
                "--disable-quic",
                "--no-first-run",
                "--disable-background-networking",
                "--disable-component-update",
                "--disable-sync",
            ],
        )
        yield browser
        browser.close()


@pytest.fixture
def page(browser):
    context = browser.new_context(viewport={"width": 1360, "height": 900})
    page = context.new_page()
    yield page
    context.close()


@pytest.fixture
def screenshot(page):
    def take(name: str) -> Path:
        SCREENSHOTS.mkdir(parents=True, exist_ok=True)
        path = SCREENSHOTS / f"{name}.png"
        page.screenshot(path=str(path), full_page=True)
        return path

    return take


@pytest.fixture
def screenshot_dir() -> Path:
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    return SCREENSHOTS


PASSWORD = "night shift 42"


def person(username: str, role: str | None, *, password: str = PASSWORD):
    """A user in a role's group (none: a viewer), who signs in with `password`."""
    from django.contrib.auth.models import Group, User

    user = User.objects.create_user(username, password=password)
    if role:
        user.groups.add(Group.objects.get_or_create(name=role)[0])
    return user


def sign_in(page, live_server, username: str, password: str = PASSWORD) -> None:
    page.goto(live_server.url + "/accounts/login/")
    page.fill("#id_username", username)
    page.fill("#id_password", password)
    page.click("button[type=submit]")
    page.wait_for_url(live_server.url + "/")
