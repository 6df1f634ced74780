"""The triage queue's filters and order (incidents/queue.py), its ages, the chain's signature
and its drawing across lanes."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from django.contrib.auth.models import User

from incidents import chain_drawing, selectors
from incidents.models import Incident
from incidents.queue import QueueFilters, filtered
from incidents.signatures import chain_signature, signature_words
from incidents.templatetags.pages import age

NOW = datetime(2026, 12, 2, 3, 0, tzinfo=UTC)


def incident(title: str, *, severity: str = "warning", hours_ago: float = 1, status: str = "open", **fields):
    return Incident.objects.create(
        title=title, severity=severity, status=status, started_at=NOW - timedelta(hours=hours_ago), **fields
    )


def listed(filters: QueueFilters, user=None) -> list[str]:
    return [i.title for i in filtered(Incident.objects.visible(), filters, user)]


@pytest.mark.django_db
def test_open_incidents_come_by_severity_then_newest_first_and_the_rest_newest_first():
    incident("old critical", severity="critical", hours_ago=9)
    incident("new warning", hours_ago=1)
    incident("newest info", severity="info", hours_ago=0.5)
    incident("older warning", hours_ago=3)
    incident("closed critical", severity="critical", hours_ago=0.1, status="resolved")
    assert listed(QueueFilters()) == ["old critical", "new warning", "older warning", "newest info"]
    assert listed(QueueFilters(status="all"))[:2] == ["closed critical", "newest info"]
    assert listed(QueueFilters(status="resolved")) == ["closed critical"]


@pytest.mark.django_db
def test_each_filter_narrows_and_they_combine():
    oncall = User.objects.create_user("oncall")
    incident("xid on a", scope={"cluster": "a", "model": "llama"}, layers=["hardware", "engine"],
             failure_modes=["gpu_error", "restart"], assignee=oncall, severity="critical")  # fmt: skip
    incident(
        "queue on b",
        scope={"cluster": "b", "model": "llama"},
        layers=["engine"],
        failure_modes=["queueing"],
        hours_ago=0.5,
    )
    incident("hardware-ish title on b", scope={"cluster": "b", "model": "qwen"}, layers=["serving"],
             failure_modes=["error_rate"])  # fmt: skip
    assert listed(QueueFilters(cluster="b")) == ["queue on b", "hardware-ish title on b"]
    assert listed(QueueFilters(model="llama", cluster="b")) == ["queue on b"]
    assert listed(QueueFilters(layer="hardware")) == ["xid on a"]  # the element, not a substring of a title
    assert listed(QueueFilters(layer="hard")) == []  # a list element matches whole
    assert listed(QueueFilters(failure_mode="queueing")) == ["queue on b"]
    assert listed(QueueFilters(severity="critical")) == ["xid on a"]
    assert listed(QueueFilters(mine=True), oncall) == ["xid on a"]
    assert listed(QueueFilters(mine=True), None) == []


@pytest.mark.django_db
def test_search_reads_the_title_the_root_alerts_name_and_an_incident_number():
    first = incident("KVCacheFragmentationHigh on vllm-llama")
    incident("LLMTTFTP99High on qwen")
    assert listed(QueueFilters(q="fragmentation")) == ["KVCacheFragmentationHigh on vllm-llama"]
    assert listed(QueueFilters(q=f"#{first.pk}")) == ["KVCacheFragmentationHigh on vllm-llama"]
    assert listed(QueueFilters(q="nothing like it")) == []


def test_the_url_is_read_defensively_and_written_back_without_empty_values():
    filters = QueueFilters.from_query(
        {"status": "<script>", "severity": "urgent", "cluster": " a\x00b ", "q": "x" * 500, "mine": "1"}
    )
    assert filters.status == "open" and filters.severity == "" and filters.cluster == "ab"
    assert len(filters.q) == 200 and filters.mine
    assert QueueFilters(cluster="prod eu", mine=True).query_string(status="all") == (
        "status=all&cluster=prod+eu&mine=1"
    )
    assert not QueueFilters(status="all").narrowing() and QueueFilters(layer="engine").narrowing()


@pytest.mark.parametrize(
    "seconds, words",
    [(5, "5 s"), (-3, "0 s"), (600, "10 min"), (3600, "1 h"), (3 * 3600 + 300, "3 h 5 min"),
     (50 * 3600, "2 d 2 h"), (96 * 3600, "4 d")],
)  # fmt: skip
def test_ages_read_as_an_on_call_engineer_says_them(seconds, words):
    assert age(NOW - timedelta(seconds=seconds), NOW) == words


def test_a_chain_signature_keeps_causal_order_and_collapses_repeats():
    steps = [("engine", "kv_fragmentation"), ("platform", "oom"), ("platform", "oom"), ("engine", "queueing"),
             ("platform", "oom"), ("", "")]  # fmt: skip
    signature = chain_signature(steps)
    assert signature == "engine:kv_fragmentation>platform:oom>engine:queueing>unknown:other"
    assert signature_words(signature).startswith("kv_fragmentation (engine) → oom (platform)")
    forward, backward = [("engine", "oom"), ("platform", "oom")], [("platform", "oom"), ("engine", "oom")]
    assert chain_signature(forward) != chain_signature(backward)


@pytest.mark.django_db
def test_seen_before_lists_earlier_incidents_of_the_same_signature_on_the_same_deployment_or_model():
    signature = "engine:kv_fragmentation>platform:oom"
    now = incident("now", hours_ago=1, chain_signature=signature, scope={"deployment": "vllm-llama"})
    earlier = incident("earlier", hours_ago=50, chain_signature=signature, scope={"deployment": "vllm-llama"})
    incident("other deployment", hours_ago=40, chain_signature=signature, scope={"deployment": "sglang-qwen"})
    incident("other shape", hours_ago=30, chain_signature="platform:oom", scope={"deployment": "vllm-llama"})
    incident("later", hours_ago=0.5, chain_signature=signature, scope={"deployment": "vllm-llama"})
    assert [i.pk for i in selectors.seen_before(now)] == [earlier.pk]
    from incidents.services.postmortems import postmortem_draft

    postmortem_draft(incident=earlier, user=None, via="system")
    [seen] = selectors.seen_before(now)
    assert [p.status for p in seen.postmortems.all()] == ["draft"]  # the page links it
    nowhere = incident("no place", chain_signature=signature, scope={"cluster": "a"})
    assert selectors.seen_before(nowhere) == []


def step(key, layer, root=False):
    return chain_drawing.Step(key, f"Alert{key}", layer, "oom", root)


def test_the_drawing_puts_each_step_in_its_layers_lane_in_causal_order():
    drawing = chain_drawing.draw(
        [step(1, "engine", root=True), step(2, "platform"), step(3, "serving"), step(4, "nonsense")],
        [(1, 2, "frag->oom", 120.0), (2, 3, "oom->ttft", 30.0), (1, 2, "again", 1.0), (9, 1, "gone", 1.0)],
    )
    assert drawing is not None
    assert [lane for lane, *_ in drawing.lanes] == ["engine", "serving", "platform", "unknown"]
    tops = {lane: top for lane, top, *_ in drawing.lanes}
    xs = [box.x for box in drawing.boxes]
    assert xs == sorted(xs) and len(set(xs)) == 4
    assert [box.layer for box in drawing.boxes] == ["engine", "platform", "serving", "unknown"]
    assert all(tops[box.layer] < box.y < tops[box.layer] + drawing.lane_height for box in drawing.boxes)
    assert [box.root for box in drawing.boxes] == [True, False, False, False]
    assert [arrow.label for arrow in drawing.arrows] == ["frag->oom · 2 min", "oom->ttft · 30 s"]
    assert drawing.width >= drawing.boxes[-1].x + drawing.box_width


def test_nothing_is_drawn_for_a_lone_alert():
    assert chain_drawing.draw([step(1, "engine")], []) is None


@pytest.mark.django_db
def test_correlation_writes_the_signature_of_the_chain_it_ranked(make_integration, deliver):
    from incidents.models import Alert
    from tests.incidents.conftest import am_body, cascade

    integration = make_integration()
    for alert in cascade():
        deliver(integration, am_body(alert))
    found = Alert.objects.get(alertname="LLMContainerOOMKilled").incident
    steps = Alert.objects.in_bulk(found.chain)
    assert found.chain_signature == chain_signature(
        (steps[pk].layer, steps[pk].failure_mode) for pk in found.chain
    )
    assert found.chain_signature.startswith("engine:kv_fragmentation>platform:oom")
