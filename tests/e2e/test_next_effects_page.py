"""What usually comes next, in Debian's Chromium: the incident page's card right under the root
on a phone, the queue row's line, the timeline's "predicted" mark; screenshots at both widths."""

from __future__ import annotations

import pytest

from correlate.forecast import MIN_SIMILAR
from tests.e2e.conftest import person, sign_in
from tests.incidents.conftest import am_body
from tests.incidents.test_next_effects import incident_of, story

pytestmark = [pytest.mark.services, pytest.mark.django_db(transaction=True)]

PHONE = {"width": 390, "height": 844}


@pytest.fixture
def going(make_integration, deliver):
    """MIN_SIMILAR + 1 resolved incidents like the story, then its first step, firing now."""
    integration = make_integration()
    for days_ago in range(MIN_SIMILAR + 2, 1, -1):
        deliver(integration, am_body(*story(days_ago)))
    deliver(integration, am_body(*story(0, steps=1, resolved=False)))
    return incident_of("KVCacheFragmentationHigh", 0)


def test_the_card_says_what_comes_next_under_the_root_at_both_widths(live_server, page, going, screenshot):
    person("oncall", "responder")
    sign_in(page, live_server, "oncall")
    row = page.locator(f'tr[data-incident="{going.pk}"] .next-effect')
    assert "next: oom on pod ~12 min" in row.inner_text()
    page.goto(f"{live_server.url}/incidents/{going.pk}/")
    card = page.locator(".card-next")
    items = card.locator("ol.next-effects li").all_inner_texts()
    assert items[0].startswith("oom platform on this pod (vllm-llama-7d9f8b6c4-p0000)"), items
    assert f"followed in {MIN_SIMILAR + 1} of {MIN_SIMILAR + 1}" in items[0]
    basis = card.locator(".next-basis").inner_text()
    assert basis == f"From the {MIN_SIMILAR + 1} past incidents like this one."
    screenshot("next-effects-desktop")

    page.set_viewport_size(PHONE)
    page.reload()
    root_box = page.locator(".card-root").bounding_box()
    card_box = page.locator(".card-next").bounding_box()
    act_box = page.locator(".card-act").bounding_box()
    assert root_box["y"] < card_box["y"] < act_box["y"]  # read right after the root, before acting
    assert page.evaluate("document.documentElement.scrollWidth") <= PHONE["width"]
    screenshot("next-effects-phone")


def test_the_timeline_marks_the_effects_that_were_predicted(live_server, page, going, screenshot):
    person("oncall", "viewer")
    sign_in(page, live_server, "oncall")
    resolved = incident_of("KVCacheFragmentationHigh", 2)
    page.goto(f"{live_server.url}/incidents/{resolved.pk}/evidence/")
    marks = page.locator("table.timeline .pill.predicted").all_inner_texts()
    assert marks == ["predicted 12 min early", "predicted 20 min early"], marks
