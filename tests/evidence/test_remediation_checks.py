"""Remediation checks against a real Prometheus (Debian's) backfilled with a known history: the
fragmentation stayed low for a day after the fix, then came back."""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta

import pytest
from django.contrib.auth.models import User
from django.core import mail

from incidents.models import Incident, RemediationItem
from incidents.services.remediation import (
    due_for_check,
    remediation_check,
    remediation_check_due,
    remediation_create,
    remediation_update,
)
from tests.conftest import free_port
from tests.evidence.conftest import prometheus_backfilled_with
from tests.support.drills import SlowProxy

pytestmark = [pytest.mark.services, pytest.mark.django_db]

FIX = (datetime.now(UTC) - timedelta(days=3)).replace(minute=0, second=0, microsecond=0)
BACK = FIX + timedelta(hours=36)  # the fragmentation returns
LOW = "max_over_time(llm_kv_cache_fragmentation_ratio[12h]) < 0.25"


@pytest.fixture(scope="module")
def history_prometheus(tmp_path_factory):
    folder = tmp_path_factory.mktemp("remediation")
    lines = ["# TYPE llm_kv_cache_fragmentation_ratio gauge"]
    t, end = FIX - timedelta(hours=12), datetime.now(UTC) - timedelta(hours=2)
    while t <= end:
        value = 0.1 if t < BACK else 0.4
        lines.append(
            f'llm_kv_cache_fragmentation_ratio{{namespace="llm",pod="vllm-a-1"}} {value} {int(t.timestamp())}'
        )
        t += timedelta(minutes=1)
    (folder / "history.om").write_text("\n".join(lines) + "\n# EOF\n")
    yield from prometheus_backfilled_with(folder / "history.om", folder)


def done_item(check: str, *, check_for: str = "0s", owner: User | None = None) -> RemediationItem:
    incident = Incident.objects.create(title="frag", started_at=FIX - timedelta(hours=1), severity="critical")
    author = User.objects.filter(username="lead").first() or User.objects.create_superuser(
        "lead", "l@x", "pw"
    )
    item = remediation_create(
        incident=incident,
        user=author,
        via="api",
        body={
            "title": "dynamic block allocation",
            "check": check,
            "check_for": check_for,
            "owner": owner.get_username() if owner else None,
        },
    )
    remediation_update(item=item, user=author, via="api", body={"status": "done"})
    RemediationItem.objects.filter(pk=item.pk).update(done_at=FIX)  # the fix went in at FIX
    return RemediationItem.objects.get(pk=item.pk)


def test_a_check_that_holds_verifies_and_a_later_violation_regresses(history_prometheus, settings):
    settings.PROMETHEUS_URL = history_prometheus
    owner = User.objects.create_user("oncall", email="oncall@example.com")
    item = done_item(LOW, owner=owner)
    assert not due_for_check(
        item, FIX + timedelta(hours=6)
    )  # the 12 h window still holds data from before the fix
    assert due_for_check(item, FIX + timedelta(hours=12))
    item = remediation_check(item=item, now=FIX + timedelta(hours=24))
    assert item.status == "verified" and item.last_check["ok"] is True
    assert item.last_check["query"] == LOW and item.last_check["range"] == "43200s"
    assert item.last_check["result"][0]["labels"] == {"namespace": "llm", "pod": "vllm-a-1"}
    assert mail.outbox == []
    item = remediation_check(item=item, now=BACK + timedelta(hours=6))
    assert item.status == "regressed" and item.last_check["ok"] is False
    assert item.last_check["reason"] == "condition not met (or no data)"
    assert len(mail.outbox) == 1 and mail.outbox[0].to == ["oncall@example.com"]
    assert "regressed" in mail.outbox[0].subject


def test_a_condition_never_met_leaves_the_item_done_with_the_reason(history_prometheus, settings):
    settings.PROMETHEUS_URL = history_prometheus
    item = remediation_check(item=done_item(LOW.replace("0.25", "0.05")), now=FIX + timedelta(hours=24))
    assert item.status == "done" and item.last_check["ok"] is False
    assert item.last_check["reason"] == "condition not met (or no data)"


def test_it_must_hold_for_check_for_before_it_is_verified(history_prometheus, settings):
    settings.PROMETHEUS_URL = history_prometheus
    item = done_item(LOW, check_for="6h")
    item = remediation_check(item=item, now=FIX + timedelta(hours=13))
    assert item.status == "done" and item.held_since == FIX + timedelta(hours=13)
    item = remediation_check(item=item, now=FIX + timedelta(hours=20))
    assert item.status == "verified"


def test_prometheus_down_is_could_not_check_with_no_status_change(settings):
    settings.PROMETHEUS_URL = f"http://127.0.0.1:{free_port()}"
    item = done_item(LOW)
    now = FIX + timedelta(hours=24)
    item = remediation_check(item=item, now=now)
    assert item.status == "done" and item.last_check["ok"] is None
    assert (
        item.last_check["reason"].startswith("could not check: Prometheus at")
        and "unreachable" in item.last_check["reason"]
    )
    assert item.next_check_at is not None and item.next_check_at > now and not due_for_check(item, now)
    later = remediation_check(item=item, now=now)
    assert later.next_check_at - now > item.next_check_at - now  # backing off


def test_a_slow_prometheus_costs_a_round_one_timeout_and_the_rest_wait(history_prometheus, settings):
    """Prometheus answering after 3 s against a 1 s timeout: the first item due says so and backs
    off; the round stops there instead of waiting once per item; answering again, all are checked."""
    settings.PROMETHEUS_TIMEOUT_SECONDS = 1
    proxy = SlowProxy(history_prometheus, delay=3)
    settings.PROMETHEUS_URL = proxy.url
    items = [done_item(LOW) for _ in range(3)]
    now = FIX + timedelta(hours=24)
    try:
        started = time.monotonic()
        checked = remediation_check_due(now=now)
        took = time.monotonic() - started
        assert proxy.requests == 1 and len(checked) == 1 and took < 3
        first = RemediationItem.objects.get(pk=checked[0])
        assert first.status == "done" and first.last_check["ok"] is None and first.last_check["unreachable"]
        assert first.last_check["reason"] == (
            f"could not check: Prometheus at {proxy.url} did not answer within 1 s"
            " (ROOTLINE_PROMETHEUS_TIMEOUT_MS)"
        )
        assert all(RemediationItem.objects.get(pk=i.pk).last_check is None for i in items if i.pk != first.pk)
        proxy.delay = 0
        later = remediation_check_due(now=now + timedelta(hours=1))
        assert set(later) == {i.pk for i in items}
        assert all(RemediationItem.objects.get(pk=i.pk).status == "verified" for i in items)
    finally:
        proxy.close()
