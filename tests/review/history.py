"""A known week of history, written as rows (what correlation, people and remediation would have
left), for the review's figures to be asserted against: 2026-W47, Monday 2026-11-16 00:00 UTC to
Monday 2026-11-23 00:00 UTC, reviewed on 2026-12-02."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from itertools import count

from django.contrib.auth.models import User

from incidents.models import (
    Alert,
    Incident,
    IncidentAction,
    Integration,
    Postmortem,
    RemediationItem,
)

WEEK = "2026-W47"
MONDAY = datetime(2026, 11, 16, tzinfo=UTC)
NOW = datetime(2026, 12, 2, 9, 0, tzinfo=UTC)
_numbers = count(1)


def at(day: int, hour: int = 0, minute: int = 0, second: int = 0) -> datetime:
    return MONDAY + timedelta(days=day, hours=hour, minutes=minute, seconds=second)


def integration() -> Integration:
    found = Integration.objects.filter(name="history").first()
    return found or Integration.objects.create(kind="alertmanager", name="history", token_digest="h" * 64)


def alert(
    incident: Incident | None,
    name: str,
    starts: datetime,
    *,
    layer="",
    mode="",
    fp=False,
    annotations=None,
    **labels,
) -> Alert:
    return Alert.objects.create(
        fingerprint=f"fp-{next(_numbers)}",
        starts_at=starts,
        status="resolved",
        alertname=name,
        labels={"alertname": name, **labels},
        annotations=annotations or {},
        integration=integration(),
        received_at=starts,
        correlation_key=labels.get("cluster", ""),
        incident=incident,
        layer=layer or None,
        failure_mode=mode or None,
        false_positive=fp,
        correlated=True,
    )


def incident(title: str, started: datetime, **fields) -> Incident:
    return Incident.objects.create(title=title, started_at=started, **fields)


def seed() -> dict[str, object]:
    """The week's story; returns the rows the tests name."""
    ana = User.objects.create_user("ana", email="ana@example.com")
    d1 = {"cluster": "prod-eu", "model": "llama-70b", "deployment": "vllm-llama", "namespace": "llm"}
    labels1 = {
        "cluster": "prod-eu",
        "namespace": "llm",
        "model_name": "llama-70b",
        "pod": "vllm-llama-6f7d8-abcde",
    }
    signature = "engine:kv_fragmentation>platform:oom"

    # An earlier incident with the same chain on the same deployment (two weeks before).
    earlier = incident(
        "frag then OOM (earlier)",
        at(-14, 3),
        severity="critical",
        scope=d1,
        chain_signature=signature,
        resolved_at=at(-14, 4),
        status="resolved",
    )
    alert(earlier, "KVCacheFragmentationHigh", at(-14, 3), layer="engine", mode="kv_fragmentation", **labels1)

    # A: Monday 10:00, red at 09:50; acknowledged 10:05, mitigated 10:30, resolved 11:50.
    a = incident(
        "frag then OOM",
        at(0, 10),
        severity="critical",
        scope=d1,
        chain_signature=signature,
        first_red_at=at(0, 9, 50),
        acknowledged_at=at(0, 10, 5),
        mitigated_at=at(0, 10, 30),
        resolved_at=at(0, 11, 50),
        status="resolved",
        assignee=ana,
    )
    frag = alert(
        a, "KVCacheFragmentationHigh", at(0, 10), layer="engine", mode="kv_fragmentation", fp=True, **labels1
    )
    alert(a, "LLMContainerOOMKilled", at(0, 10, 20), layer="platform", mode="oom", **labels1)
    a.root_alert = frag
    a.save()
    IncidentAction.objects.create(incident=a, action="false_positive", by=ana, at=at(0, 10, 2), alert=frag)

    # B: Wednesday, a warning without evidence: onset is its first alert; acknowledged 2 min
    # later, resolved in an hour.
    b = incident(
        "queue high",
        at(2, 14),
        severity="warning",
        scope={"cluster": "prod-us", "model": "qwen-7b"},
        acknowledged_at=at(2, 14, 2),
        resolved_at=at(2, 15),
        status="resolved",
        layers=["serving"],
        failure_modes=["queueing"],
    )
    alert(
        b,
        "VLLMRequestQueueHigh",
        at(2, 14),
        layer="serving",
        mode="queueing",
        cluster="prod-us",
        model_name="qwen-7b",
    )
    alert(
        b,
        "LLMTTFTP99High",
        at(2, 14, 3),
        layer="serving",
        mode="slo_ttft",
        cluster="prod-us",
        model_name="qwen-7b",
    )

    # C: the week's last second, still open; D: the next week's first second (not this week's).
    c = incident("last second", at(6, 23, 59, 59), severity="critical", scope={"cluster": "prod-eu"})
    alert(
        c,
        "LLMGpuXidError",
        at(6, 23, 59, 59),
        layer="hardware",
        mode="gpu_error",
        cluster="prod-eu",
        node="gpu-3",
    )
    d = incident("next week", at(7), severity="critical", scope={"cluster": "prod-eu"})
    alert(d, "LLMGpuXidError", at(7), layer="hardware", mode="gpu_error", cluster="prod-eu", node="gpu-4")
    # A merged-away incident is not counted.
    incident("merged away", at(1, 1), severity="critical", merged_into=a)

    # A rule that fires alone, three times; its alerts have no runbook, nor has the pack one.
    for hour in (1, 2, 3):
        lone = incident("noisy", at(3, hour), severity="info", scope={"cluster": "prod-eu"})
        alert(lone, "NoisyThing", at(3, hour), cluster="prod-eu", layer="serving", mode="other")
    # Fired with its own runbook link: not listed as without one.
    own = incident("linked", at(4, 1), severity="info", scope={"cluster": "prod-eu"})
    alert(
        own,
        "TeamLinkedRule",
        at(4, 1),
        cluster="prod-eu",
        annotations={"runbook_url": "https://wiki.example.com/runbooks/team-linked"},
    )
    # A false positive nothing followed within the window.
    alone = incident("alone", at(5, 1), severity="info", scope={"cluster": "prod-eu"})
    alert(
        alone,
        "KVCacheFragmentationHigh",
        at(5, 1),
        fp=True,
        cluster="prod-eu",
        namespace="other",
        model_name="m-other",
        layer="engine",
        mode="kv_fragmentation",
    )

    # Remediation.
    def item(title: str, **fields) -> RemediationItem:
        return RemediationItem.objects.create(incident=a, title=title, owner=ana, **fields)

    due_open = item("raise the pool", due_at=at(3), status="open")
    done_on_time = item("reap ghosts", due_at=at(5), status="done", done_at=at(4))
    done_late = item("admission", due_at=at(1), status="done", done_at=at(2))
    verified = item("defrag", due_at=at(-3), status="verified", done_at=at(-4), verified_at=at(1))
    regressed = item("pin batch", due_at=at(-10), status="regressed", done_at=at(-11), verified_at=at(-9))
    item("suggested", due_at=at(2), status="open", suggested=True)
    item("won't", due_at=at(2), status="wont_do")

    # Postmortems: G resolved the week before (due this week, a draft); H resolved then too,
    # published in time.
    g = incident(
        "needs a postmortem", at(-6, 8), severity="critical", resolved_at=at(-6, 9), status="resolved"
    )
    alert(g, "LLMGpuXidError", at(-6, 8), layer="hardware", mode="gpu_error", cluster="prod-eu", node="gpu-1")
    h = incident("has one", at(-6, 12), severity="critical", resolved_at=at(-6, 13), status="resolved")
    draft = Postmortem.objects.create(title="G", status="draft")
    draft.incidents.add(g)
    done = Postmortem.objects.create(title="H", status="published", published_at=at(0, 9))
    done.incidents.add(h)
    return {
        "a": a, "b": b, "c": c, "d": d, "earlier": earlier, "frag": frag, "g": g, "h": h, "ana": ana,
        "due_open": due_open, "done_on_time": done_on_time, "done_late": done_late, "verified": verified,
        "regressed": regressed,
    }  # fmt: skip
