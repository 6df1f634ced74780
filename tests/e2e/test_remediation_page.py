"""The remediation page in Debian's Chromium: accept a suggestion, give it an owner, mark it done,
check it against a real Prometheus and see it verified; the mine and overdue lists."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from django.contrib.auth.models import Group, User

from incidents.models import Incident, RemediationItem
from incidents.services.remediation import remediation_create
from tests.e2e.conftest import PASSWORD, sign_in
from tests.evidence.conftest import prometheus_backfilled_with

pytestmark = [pytest.mark.services, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def prometheus(tmp_path):
    start = datetime.now(UTC) - timedelta(days=1)
    lines = ["# TYPE llm_kv_cache_fragmentation_ratio gauge"]
    lines += [
        f'llm_kv_cache_fragmentation_ratio{{pod="a"}} 0.1 {int((start + timedelta(minutes=m)).timestamp())}'
        for m in range(0, 600)
    ]
    (tmp_path / "h.om").write_text("\n".join(lines) + "\n# EOF\n")
    yield from prometheus_backfilled_with(tmp_path / "h.om", tmp_path)


def test_accept_own_finish_and_verify_an_item(live_server, page, prometheus, settings, screenshot):
    settings.PROMETHEUS_URL = prometheus
    lead = User.objects.create_user("lead", password=PASSWORD)
    lead.groups.add(Group.objects.get_or_create(name="author")[0])
    incident = Incident.objects.create(
        title="frag", started_at=datetime.now(UTC) - timedelta(hours=3), severity="critical"
    )
    check = "count(max_over_time(llm_kv_cache_fragmentation_ratio[1d]) < 0.25) > 0"
    suggestion = remediation_create(
        incident=incident,
        user=None,
        via="system",
        suggested=True,
        body={"title": "Dynamic KV block allocation", "horizon": "1w", "check": check},
    )
    late = remediation_create(
        incident=incident,
        user=None,
        via="system",
        body={
            "title": "Roll back the threshold",
            "horizon": "date",
            "owner": "lead",
            "due_at": "2020-01-01T00:00:00Z",
        },
    )
    page.on("dialog", lambda dialog: dialog.accept())
    sign_in(page, live_server, "lead")
    page.goto(f"{live_server.url}/remediations/?tab=overdue")
    assert (
        page.locator(f"#item-{late.pk}").count() == 1
        and "overdue" in page.locator(f"#item-{late.pk}").inner_text()
    )
    page.goto(f"{live_server.url}/remediations/?tab=suggested")
    row = page.locator(f"#item-{suggestion.pk}")
    row.locator("button:has-text('Accept')").click()
    page.wait_for_selector(".flash:has-text('accept recorded')")
    page.goto(f"{live_server.url}/remediations/?tab=all")
    row = page.locator(f"#item-{suggestion.pk}")
    row.locator("select[name=owner]").select_option("lead")
    row.locator("button:has-text('Set owner')").click()
    page.wait_for_selector(".flash:has-text('owner recorded')")
    page.goto(f"{live_server.url}/remediations/?tab=mine")
    row = page.locator(f"#item-{suggestion.pk}")
    assert row.count() == 1
    row.locator("select[name=status]").select_option("done")
    row.locator("button:has-text('Set status')").click()
    page.wait_for_selector(".flash:has-text('status recorded')")
    page.locator(f"#item-{suggestion.pk} button:has-text('Check now')").click()
    page.wait_for_selector(".flash:has-text('checked')")
    row = page.locator(f"#item-{suggestion.pk}")
    assert "Verified" in row.inner_text() and "held at" in row.inner_text()
    screenshot("remediation-page")
    item = RemediationItem.objects.get(pk=suggestion.pk)
    assert item.status == "verified" and item.last_check["ok"] is True and item.owner == lead
