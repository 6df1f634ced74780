"""A year of history written as rows, for retention to prune (docs/retention.md): a delivery and a
lone alert every day, an incident every week (some with a postmortem, some with remediation items),
and on chosen days an alert something refers to (a decision, an action, a matrix cell, an
incident's root, chain, cascade, edges, candidates or timeline), plus the alerts no prune may
take for other reasons (firing, not correlated, ended or arrived lately, judged).

Each row it writes is filed as going or staying, from what the policy says of it, so a test can
compare what a prune left with what it should have."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from itertools import count

from django.contrib.auth.models import User

from incidents.models import (
    Alert,
    Decision,
    Delivery,
    Incident,
    IncidentAction,
    IncidentEdge,
    Integration,
    MatrixCell,
    Postmortem,
    RemediationItem,
    RootCandidate,
)

DAYS = 365
BODIES_DAYS, ALERTS_DAYS = 30, 90  # the defaults
LONE_NAMES = ("NoisyThing", "TeamLinkedRule", "KVCacheFragmentationHigh", "")  # "" is "(unnamed)"
TEAM_RUNBOOK = {"runbook_url": "https://wiki.example.com/runbooks/team-linked"}
FLEET = {"cluster": "prod-eu", "namespace": "llm", "model_name": "llama-70b", "pod": "vllm-llama-6f7d8-abcde"}
SCOPE = {"cluster": "prod-eu", "namespace": "llm", "model": "llama-70b", "deployment": "vllm-llama"}
_numbers = count(1)


@dataclass
class Year:
    now: datetime
    alerts_going: set[int] = field(default_factory=set)
    alerts_staying: set[int] = field(default_factory=set)
    bodies_going: set[int] = field(default_factory=set)
    bodies_staying: set[int] = field(default_factory=set)
    incidents: dict[int, Incident] = field(default_factory=dict)  # by age in days

    def file(self, alert: Alert, going: bool) -> Alert:
        (self.alerts_going if going else self.alerts_staying).add(alert.pk)
        return alert


def integration() -> Integration:
    found = Integration.objects.filter(name="year").first()
    return found or Integration.objects.create(kind="alertmanager", name="year", token_digest="y" * 64)


def alert(
    starts: datetime,
    name: str,
    *,
    incident: Incident | None = None,
    ends: datetime | None = None,
    status: str = "resolved",
    kind: str = "alert",
    received: datetime | None = None,
    annotations: dict | None = None,
    labels: dict | None = None,
    **fields,
) -> Alert:
    labels = {"alertname": name, **(labels or {"cluster": "prod-eu", "instance": "probe-1"})}
    return Alert.objects.create(
        fingerprint=f"year-{next(_numbers)}",
        starts_at=starts,
        ends_at=ends
        if ends is not None
        else (starts + timedelta(minutes=10) if status == "resolved" else None),
        status=status,
        kind=kind,
        alertname=name,
        labels=labels,
        annotations=annotations or {},
        integration=integration(),
        received_at=received or starts,
        correlation_key=labels.get("cluster", ""),
        incident=incident,
        correlated=fields.pop("correlated", True),
        **fields,
    )


def delivery(received: datetime, status: str, number: int) -> Delivery:
    body = json.dumps({"version": "4", "status": "resolved", "alerts": [], "n": number}).encode()
    kept = status not in ("too_large", "throttled")
    return Delivery.objects.create(
        integration=integration(),
        received_at=received,
        status=status,
        body=body if kept else b"",
        body_digest=f"{number:064d}" if kept else "",
        size=len(body) if kept else 2_000_000,
        headers={"content-type": "application/json", "user-agent": "Alertmanager/0.27.0"},
        accepted=1 if status == "processed" else 0,
        rejected=[{"path": "alerts[0]", "error": "bad"}] if status == "rejected" else [],
        error="" if status == "processed" else status,
        attempts=1,
        processed_at=received if status == "processed" else None,
    )


def delivery_status(age: int) -> str:
    for every, status in ((53, "too_large"), (41, "failed"), (37, "pending"), (10, "rejected")):
        if age % every == 0 and age:
            return status
    return "processed"


def seed(now: datetime) -> Year:
    year = Year(now)
    ana = User.objects.create_user("ana-year", email="ana@example.com")
    for age in range(DAYS):
        day = now - timedelta(days=age)
        seed_delivery(year, day, age)
        name = LONE_NAMES[age % len(LONE_NAMES)]
        lone = alert(
            day - timedelta(hours=5),
            name,
            annotations=TEAM_RUNBOOK if name == "TeamLinkedRule" else {"summary": "lone"},
        )
        year.file(lone, going=age >= ALERTS_DAYS)  # it ended 4 h 50 min into its day
        if age % 7 == 0:
            year.incidents[age] = seed_incident(year, day, age, ana)
    seed_references(year, ana)
    seed_not_yet(year)
    return year


def seed_delivery(year: Year, day: datetime, age: int) -> None:
    status = delivery_status(age)
    row = delivery(day - timedelta(hours=3), status, age + 1)
    if status in ("processed", "rejected") and age >= BODIES_DAYS:
        year.bodies_going.add(row.pk)
    else:
        year.bodies_staying.add(row.pk)


def seed_incident(year: Year, day: datetime, age: int, ana: User) -> Incident:
    """Two alerts, a cause and its effect on one deployment, with its ranking, resolved in an hour."""
    started = day - timedelta(hours=2)
    incident = Incident.objects.create(
        title=f"frag then OOM ({age} days ago)",
        started_at=started,
        last_alert_at=started + timedelta(minutes=20),
        resolved_at=started + timedelta(hours=1),
        status="resolved",
        severity="critical" if age % 14 == 0 else "warning",
        scope=SCOPE,
        correlation_key="prod-eu",
        chain_signature="engine:kv_fragmentation>platform:oom",
        layers=["engine", "platform"],
        failure_modes=["kv_fragmentation", "oom"],
    )
    cause = alert(
        started,
        "KVCacheFragmentationHigh",
        incident=incident,
        labels=FLEET,
        layer="engine",
        failure_mode="kv_fragmentation",
    )
    effect = alert(
        started + timedelta(minutes=20), "LLMContainerOOMKilled", incident=incident, labels=FLEET,
        layer="platform", failure_mode="oom",
    )  # fmt: skip
    year.file(cause, going=False)
    year.file(effect, going=False)
    incident.root_alert = cause
    incident.chain = [cause.pk, effect.pk]
    incident.cascade = [["engine", "kv_fragmentation", "vllm-llama", 0.0, cause.pk]]
    incident.save()
    IncidentEdge.objects.create(
        incident=incident, cause=cause, effect=effect, rule="frag->oom", lag_seconds=1200
    )
    RootCandidate.objects.create(incident=incident, alert=cause, rank=1, confidence=0.9, explanation="rule")
    if age % 14 == 0:
        postmortem = Postmortem.objects.create(title=f"postmortem {age}", status="draft")
        postmortem.incidents.add(incident)
    if age % 21 == 0:
        RemediationItem.objects.create(
            incident=incident, title=f"fix {age}", owner=ana, due_at=incident.resolved_at + timedelta(days=7)
        )
    return incident


def seed_references(year: Year, ana: User) -> None:
    """Old alerts in no incident that something names: all stay."""
    now = year.now

    def old(age: int, name: str = "SpecialCase", **fields) -> Alert:
        return year.file(alert(now - timedelta(days=age, hours=6), name, **fields), going=False)

    for age in (98, 140, 203):  # excluded from its incident by a person: the decision names it
        excluded = old(age)
        Decision.objects.create(
            kind="exclude",
            alert_keys=[excluded.key],
            correlation_key="prod-eu",
            by=ana,
            at=excluded.starts_at,
        )
    for age in (112, 301):  # judged a false positive, just before its day's incident: an ignored warning
        incident = year.incidents[age]
        before = incident.started_at - timedelta(minutes=30)
        judged = alert(before, "KVCacheFragmentationHigh", labels=FLEET, false_positive=True)
        year.file(judged, going=False)
        IncidentAction.objects.create(
            incident=incident, action="false_positive", by=ana, at=judged.starts_at, alert=judged
        )
    named = old(154)  # an action names it
    IncidentAction.objects.create(
        incident=year.incidents[154], action="comment", by=ana, at=named.starts_at, alert=named
    )
    cited = old(95)  # a matrix cell of another incident cites it, and a change, by id as text
    cited_change = old(96, "DeployFinished", kind="change")
    MatrixCell.objects.create(
        incident=year.incidents[161], layer="engine", column="direct_cause", text="see the alert",
        evidence=[{"kind": "alert", "id": cited.pk}, {"kind": "change", "id": str(cited_change.pk)}],
    )  # fmt: skip
    for age in (105, 210):  # a change of the cluster half an hour before an incident: on its timeline
        incident = year.incidents[age]
        year.file(
            alert(incident.started_at - timedelta(minutes=30), "DeployFinished", kind="change", labels=FLEET),
            going=False,
        )
    for age in (100, 250):  # a change far from any incident: it goes
        year.file(
            alert(now - timedelta(days=age, hours=12), "DeployFinished", kind="change", labels=FLEET),
            going=True,
        )
    stale = {age: old(age, "StaleReference") for age in (189, 196, 217, 224, 231)}
    RootCandidate.objects.create(
        incident=year.incidents[189], alert=stale[189], rank=2, confidence=0.1, explanation="x"
    )
    IncidentEdge.objects.create(
        incident=year.incidents[196], cause=stale[196], effect=stale[196], rule="self", lag_seconds=0
    )
    for age, change in ((217, "chain"), (224, "cascade"), (231, "root_alert")):
        incident = year.incidents[age]
        if change == "chain":
            incident.chain = [*incident.chain, stale[age].pk]
        elif change == "cascade":
            incident.cascade = [*incident.cascade, ["engine", "oom", "vllm-llama", 60.0, stale[age].pk]]
        else:
            incident.root_alert = stale[age]
        incident.save()


def seed_not_yet(year: Year) -> None:
    """Old alerts in no incident that the policy does not take (yet): all stay."""
    now = year.now
    for age in (120, 300):  # still firing
        year.file(alert(now - timedelta(days=age), "StuckFiring", status="firing"), going=False)
    year.file(alert(now - timedelta(days=180), "NotCorrelated", correlated=False), going=False)
    year.file(
        alert(now - timedelta(days=120), "LongFiring", ends=now - timedelta(days=10)), going=False
    )  # ended ten days ago
    year.file(
        alert(now - timedelta(days=200), "Imported", received=now - timedelta(days=1)), going=False
    )  # history imported yesterday
    year.file(
        alert(now - timedelta(days=ALERTS_DAYS, hours=-6), "NearlyOld"), going=False
    )  # ended 89 d 18 h ago
    year.file(alert(now - timedelta(days=ALERTS_DAYS, hours=6), "JustOld"), going=True)  # ended 90 d 6 h ago
