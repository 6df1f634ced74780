"""Page-shaped reads, one function per page, each with a query-count test."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from django.conf import settings
from django.contrib.auth.models import User
from django.db import connection
from django.db.models import (
    Case,
    Count,
    IntegerField,
    Max,
    Min,
    OuterRef,
    Prefetch,
    Q,
    QuerySet,
    Subquery,
    Sum,
    Value,
    When,
)
from django.db.models.functions import Coalesce
from django.utils import timezone
from django.utils.dateparse import parse_datetime

from correlate.forecast import MIN_SIMILAR, TOP
from incidents import chain_drawing, queue
from incidents.catalog import catalog as app_catalog
from incidents.forecast import next_effects, queue_next
from incidents.models import Alert, Delivery, Incident, Postmortem, RootCandidate
from incidents.models.ingest import place_expression
from incidents.postmortems.policy import needs_postmortem
from incidents.queue import QueueFilters
from incidents.runbooks import runbook_href


def home_page(*, limit: int = 50) -> dict:
    return {
        "alerts": list(Alert.objects.select_related("integration").order_by("-starts_at", "-id")[:limit]),
        "deliveries": latest_deliveries(20),
        "firing_count": Alert.objects.firing().count(),
        "backlog": backlog(),
        "truncated": truncated_since(timezone.now() - TRUNCATED_NOTICE_WINDOW),
    }


TRUNCATED_NOTICE_WINDOW = timedelta(hours=24)


@dataclass(frozen=True)
class Truncated:
    """Bodies a sender cut (Alertmanager's `max_alerts`): the alerts left out were never sent,
    so no page shows them; the on-call must be told they exist."""

    bodies: int
    alerts: int


def truncated_since(since: datetime | None = None) -> Truncated:
    cut = Delivery.objects.filter(truncated_alerts__gt=0)
    if since is not None:
        cut = cut.filter(received_at__gte=since)
    figures = cut.aggregate(bodies=Count("id"), alerts=Coalesce(Sum("truncated_alerts"), 0))
    return Truncated(bodies=figures["bodies"], alerts=figures["alerts"])


def alerts_by_status() -> dict[str, int]:
    """Stored alerts by status, for every scrape: the firing ones counted on their partial index,
    the resolved ones as all less those (an index-only count), not grouped over every row, whose
    cost grows with every alert ever stored."""
    firing = Alert.objects.firing().count()
    resolved = (
        Alert.objects.count() - firing
    )  # two reads: alerts stored between them count as resolved until the next scrape
    return {Alert.Status.FIRING: firing, Alert.Status.RESOLVED: max(0, resolved)}


BACKLOG_COUNT_LIMIT = 100_000  # a storm's backlog is counted this far (a page or a scrape reads no further)
BACKLOG_NOTICE_SECONDS = 5  # the triage page says Rootline is behind once an alert has waited this long


@dataclass(frozen=True)
class Backlog:
    """What arrived and is not in incidents yet: deliveries not read and alerts not correlated,
    each with how long the oldest has waited (seconds, 0 when none waits). In a storm stronger
    than the machine, incidents keep growing for a while after the alerts came: the on-call must
    know that what they see is not the whole picture yet."""

    deliveries: int
    deliveries_lag: float
    alerts: int
    alerts_lag: float
    alerts_capped: bool  # more than BACKLOG_COUNT_LIMIT wait: `alerts` is that limit

    @property
    def lag(self) -> float:
        return max(self.deliveries_lag, self.alerts_lag)

    @property
    def notable(self) -> bool:
        return self.lag >= BACKLOG_NOTICE_SECONDS

    @property
    def alerts_wait(self) -> str:
        return wait_text(self.alerts_lag)

    @property
    def deliveries_wait(self) -> str:
        return wait_text(self.deliveries_lag)


def wait_text(seconds: float) -> str:
    """A wait as people read it: "39 s", "4 min 12 s", "2 h 1 min" (a stopped worker's alerts
    can wait hours)."""
    whole = int(seconds)
    if whole < 60:
        return f"{whole} s"
    if whole < 3600:
        return f"{whole // 60} min {whole % 60} s"
    return f"{whole // 3600} h {whole % 3600 // 60} min"


def backlog() -> Backlog:
    """Two reads on the indexes ingestion and correlation take their work from (pending
    deliveries by status, alerts not correlated by the partial index)."""
    now = timezone.now()
    deliveries = Delivery.objects.filter(status=Delivery.Status.PENDING).aggregate(
        n=Count("id"), oldest=Min("received_at")
    )
    # Counted over a limited subquery, which Django's aggregate() cannot express on a slice.
    sql, params = (
        Alert.objects.filter(correlated=False)
        .values("received_at")[:BACKLOG_COUNT_LIMIT]
        .query.sql_with_params()
    )
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT count(*), min(waiting.received_at) FROM ({sql}) waiting", params)
        alerts, oldest = cursor.fetchone()
    if isinstance(oldest, str):  # SQLite hands a raw aggregate back as text, in UTC without an offset
        parsed = parse_datetime(oldest)
        oldest = parsed.replace(tzinfo=UTC) if parsed else None
    return Backlog(
        deliveries=deliveries["n"],
        deliveries_lag=seconds_since(deliveries["oldest"], now),
        alerts=alerts,
        alerts_lag=seconds_since(oldest, now),
        alerts_capped=alerts >= BACKLOG_COUNT_LIMIT,
    )


def seconds_since(moment: datetime | None, now: datetime) -> float:
    return round(max(0.0, (now - moment).total_seconds()), 3) if moment else 0.0


def broker_status() -> str:
    from rootline.celery import app

    try:
        with app.connection_for_write() as conn:
            conn.ensure_connection(max_retries=1, timeout=1)
    except Exception as exc:  # noqa: BLE001 - any broker failure is reported, not raised
        return f"error: {exc.__class__.__name__}"
    return "ok" if settings.CELERY_BROKER_URL else "eager"


def incidents_list(*, status: str = "open", since: datetime | None = None) -> QuerySet[Incident]:
    """The incidents API's list (and the triage queue): newest first, counts in one query."""
    incidents = (
        Incident.objects.visible()
        .select_related("root_alert", "assignee")
        .annotate(alert_count=alert_count())
    )
    if since is not None:
        incidents = incidents.filter(started_at__gte=since)
    if status == "open":
        incidents = incidents.exclude(status=Incident.Status.RESOLVED)
    elif status == "resolved":
        incidents = incidents.filter(status=Incident.Status.RESOLVED)
    return incidents.order_by("-started_at", "-id")


def alert_count() -> Coalesce:
    """An incident's alert count, as a subquery per incident returned (the `incident_id` index)
    rather than a join of every incident's alerts grouped before the LIMIT: PostgreSQL then
    counted every alert of a storm for the triage queue's first 200 incidents (the cost grew
    with every alert ever stored)."""
    counted = (
        Alert.objects.filter(incident=OuterRef("pk"))
        .order_by()
        .values("incident")
        .annotate(n=Count("id"))
        .values("n")
    )
    return Coalesce(Subquery(counted, output_field=IntegerField()), 0)


def chain_alerts(incidents: Iterable[Incident]) -> dict[int, Alert]:
    """The alerts named by these incidents' chains, in one query."""
    ids = {alert_id for incident in incidents for alert_id in incident.chain}
    return Alert.objects.in_bulk(list(ids)) if ids else {}


def incident_detail(incident_id: int, *, members: bool = True) -> Incident | None:
    """An incident with its root candidates, and (`members`) every alert and edge it holds."""
    related: list[Prefetch[Any, Any, Any] | str] = [
        Prefetch("root_candidates", queryset=RootCandidate.objects.order_by("rank"))
    ]
    if members:
        related += [Prefetch("alerts", queryset=Alert.objects.order_by("starts_at", "id")), "edges"]
    return (
        Incident.objects.select_related("root_alert", "assignee")
        .annotate(alert_count=alert_count())
        .prefetch_related(*related)
        .filter(pk=incident_id)
        .first()
    )


def postmortem_dues(incidents: Iterable[Incident]) -> dict[int, datetime]:
    """When each incident's postmortem is due, for those the policy asks one of (resolved, at or
    above ROOTLINE_POSTMORTEM_SEVERITY) and that have none published yet; one query."""
    due = {
        i.pk: i.resolved_at + timedelta(days=settings.POSTMORTEM_DUE_DAYS)
        for i in incidents
        if i.resolved_at is not None and needs_postmortem(i)
    }
    if due:
        published = Postmortem.objects.filter(incidents__in=list(due), status=Postmortem.Status.PUBLISHED)
        for incident_id in published.values_list("incidents", flat=True):
            due.pop(incident_id, None)
    return due


CHAIN_NAMES_READ = 200  # a storm's chain holds every alert; its first names tell the story


def chain_names(incidents: Iterable[Incident]) -> dict[int, str]:
    """The alert names of these incidents' chains (their first CHAIN_NAMES_READ steps), in one
    query that reads names only: the queue shows names, and a storm's chain is thousands of rows."""
    ids = {alert_id for incident in incidents for alert_id in incident.chain[:CHAIN_NAMES_READ]}
    return dict(Alert.objects.filter(pk__in=list(ids)).values_list("pk", "alertname")) if ids else {}


def triage_page(
    *, filters: QueueFilters, user: User | None, page: int = 1, limit: int = 50
) -> dict[str, Any]:
    """The queue: incidents as `filters` narrow and order them, each with its chain's names, and
    the values its filters offer (read from the open incidents, which are few)."""
    listed = (
        Incident.objects.visible()
        .select_related("root_alert", "assignee")
        .annotate(alert_count=alert_count())
    )
    offset = (page - 1) * limit
    incidents = list(queue.filtered(listed, filters, user)[offset : offset + limit + 1])
    more = len(incidents) > limit
    incidents = incidents[:limit]
    names_of = chain_names(incidents)
    dues = postmortem_dues(incidents)
    queue_next(incidents)
    for incident in incidents:
        incident.postmortem_due = dues.get(incident.pk)  # type: ignore[attr-defined]  # for the template
        names = (names_of[alert_id] for alert_id in incident.chain[:CHAIN_NAMES_READ] if alert_id in names_of)
        incident.chain_names = list(dict.fromkeys(names))  # type: ignore[attr-defined]  # for the template
    return {
        "page": page,
        "more": more,
        "incidents": incidents,
        "filters": filters,
        "status": filters.status,
        "counts": {"open": Incident.objects.open().count()},
        "choices": queue_choices(filters),
        "backlog": backlog(),
        "limit": limit,
    }


def queue_choices(filters: QueueFilters) -> dict[str, list[str]]:
    """What the queue's filters offer: the clusters and models of open incidents (and the value
    chosen now), the layers and failure modes of the catalog."""
    catalog = app_catalog()
    scopes = Incident.objects.open().values_list("scope", flat=True)[:QUEUE_CHOICES_FROM]
    clusters = {
        str(scope.get("cluster")) for scope in scopes if isinstance(scope, dict) and scope.get("cluster")
    }
    models = {str(scope.get("model")) for scope in scopes if isinstance(scope, dict) and scope.get("model")}
    return {
        "cluster": sorted(clusters | ({filters.cluster} - {""})),
        "model": sorted(models | ({filters.model} - {""})),
        "layer": list(catalog.layers),
        "failure_mode": sorted(catalog.modes),
        "severity": list(Incident.Severity.values),
    }


QUEUE_CHOICES_FROM = 2000  # open incidents read for the filters' choices (a storm day has hundreds)


PAGE_ALERTS = 100  # an incident page lists this many of its alerts (a storm's incident holds thousands)
PAGE_EDGES = 100  # and this many of its causal links
SUMMARY_FROM = 20  # from this many alerts on, the page sums them up by name first
PAGE_ALERTS_SUMMED = 50  # and then lists this many of them


def incident_page(incident_id: int) -> dict | None:
    """What the incident page shows: for a storm's incident of thousands of alerts, its alerts by
    name, then its first PAGE_ALERTS alerts and PAGE_EDGES causal links (rendering every row is
    slow for a storm's incident, and grows with its alerts; the API lists them all)."""
    incident = incident_detail(incident_id, members=False)
    if incident is None:
        return None
    summed_up = annotated_alert_count(incident) >= SUMMARY_FROM
    # Summed up by name, a storm's alerts one by one are the detail: fewer rows keep the page quick.
    shown = PAGE_ALERTS_SUMMED if summed_up else PAGE_ALERTS
    members = list(incident.alerts.order_by("starts_at", "id")[:shown])
    edges = list(incident.edges.order_by("id")[:PAGE_EDGES])
    candidates = list(incident.root_candidates.all())
    alerts = {alert.pk: alert for alert in members}
    steps = chain_steps(incident.chain, incident.pk) if len(incident.chain) > CHAIN_IN_FULL else None
    chain_ids = [step["first"] for step in steps] if steps is not None else incident.chain
    wanted = (
        set(chain_ids)
        | {c.alert_id for c in candidates}
        | {e.cause_id for e in edges}
        | {e.effect_id for e in edges}
    )
    missing = wanted - set(alerts) - {None}
    if missing:
        alerts.update(Alert.objects.in_bulk(list(missing)))
    for alert in members:
        alert.runbook_href = runbook_href(alert.alertname, alert.annotations)
    edge_count = len(edges) if len(edges) < PAGE_EDGES else incident.edges.count()
    if steps is not None:
        for step in steps:
            step["alert"] = alerts.get(step["first"])
    chain = [alerts[alert_id] for alert_id in incident.chain if alert_id in alerts] if steps is None else []
    for alert, early in zip(chain, fired_before_a_cause(chain), strict=True):
        alert.fired_early = early  # for the template
    return {
        "incident": incident,
        "chain": chain,
        "chain_steps": [step for step in steps if step["alert"]] if steps is not None else [],
        "alerts": members,
        "alerts_not_shown": annotated_alert_count(incident) - len(members),
        "alerts_by_name": alerts_by_name(incident) if summed_up else [],
        "candidates": [(candidate, alerts.get(candidate.alert_id)) for candidate in candidates],
        "edges": [(edge, alerts.get(edge.cause_id), alerts.get(edge.effect_id)) for edge in edges],
        "edge_count": edge_count,
        "edges_not_shown": edge_count - len(edges),
        "actions": list(incident.actions.select_related("by", "alert").order_by("at", "id")),
        "merged": list(incident.merged.values_list("pk", flat=True)),
        "drawing": chain_drawing.draw(*drawn_chain(incident, chain, steps, edges, alerts)),
        "seen_before": seen_before(incident),
        "next": next_effects(incident, limit=TOP),
        "min_similar": MIN_SIMILAR,
        "postmortem": Postmortem.objects.filter(incidents=incident).only("pk", "status").first(),
        "postmortem_due": postmortem_dues([incident]).get(incident.pk),
        "evidence_missing": evidence_missing(incident),
    }


def evidence_missing(incident: Incident) -> dict | None:
    """What of its evidence could not be collected, for the line that says so on the incident page
    (Prometheus down or too slow, at 2 a.m.: the on-call must know the charts are partial):
    the signals' count, and the most recent reason."""
    gaps = list(
        incident.evidence_gaps.order_by("-last_tried", "signal").values("signal", "error", "last_tried")
    )
    if not gaps:
        return None
    return {
        "signals": [gap["signal"] for gap in gaps],
        "reason": gaps[0]["error"],
        "at": gaps[0]["last_tried"],
    }


def drawn_chain(
    incident: Incident, chain: list[Alert], steps: list[dict] | None, edges: list, alerts: dict[int, Alert]
) -> tuple[list[chain_drawing.Step], list[tuple[object, object, str, float]]]:
    """The chain's steps and links as chain_drawing takes them: one step per alert, or for a
    storm's chain told by name one per name (a link then joins the names of its two alerts)."""
    root_id = incident.root_alert_id
    if steps is None:
        drawn = [
            chain_drawing.Step(a.pk, a.alertname, a.layer or "", a.failure_mode or "", a.pk == root_id)
            for a in chain
        ]
        key_of: dict[int, object] = {a.pk: a.pk for a in chain}
    else:
        root_name = alerts[root_id].alertname if root_id in alerts else None
        drawn = []
        for step in steps:
            first = step["alert"]
            if first is None:
                continue
            drawn.append(
                chain_drawing.Step(
                    first.alertname, first.alertname, first.layer or "", first.failure_mode or "",
                    first.alertname == root_name, step["count"],
                )
            )  # fmt: skip
        key_of = {pk: alert.alertname for pk, alert in alerts.items()}
    links = [
        (key_of[edge.cause_id], key_of[edge.effect_id], edge.rule, edge.lag_seconds)
        for edge in edges
        if edge.cause_id in key_of and edge.effect_id in key_of
    ]
    return drawn, links


SEEN_BEFORE = 5  # earlier incidents of the same signature the incident page lists


def seen_before(incident: Incident) -> list[Incident]:
    """Earlier incidents with the same chain signature on the same deployment or model, newest first."""
    scope = incident.scope if isinstance(incident.scope, dict) else {}
    places = Q()
    for key in ("deployment", "model"):
        if scope.get(key):
            places |= Q(**{f"scope__{key}": scope[key]})
    if not incident.chain_signature or not places:
        return []
    return list(
        Incident.objects.visible()
        .filter(places, chain_signature=incident.chain_signature, started_at__lt=incident.started_at)
        .exclude(pk=incident.pk)
        .only("pk", "title", "started_at", "status", "severity")
        .prefetch_related(Prefetch("postmortems", queryset=Postmortem.objects.only("pk", "status")))
        .order_by("-started_at")[:SEEN_BEFORE]
    )


def assignable_users(limit: int = 200) -> list[User]:
    """Who the incident page offers to assign to: active people who may act (responders and up)."""
    may_act = Q(is_superuser=True) | Q(groups__name__in=("responder", "author", "admin"))
    return list(User.objects.filter(may_act, is_active=True).distinct().order_by("username")[:limit])


MERGE_TARGETS = 30  # the open incidents the merge form offers by name (any other by its number)


def merge_targets(incident: Incident) -> list[Incident]:
    """Open incidents to merge this one into, those on its cluster first, then the newest."""
    cluster = incident.scope.get("cluster") if isinstance(incident.scope, dict) else None
    same = Case(When(scope__cluster=cluster, then=Value(0)), default=Value(1), output_field=IntegerField())
    return list(
        Incident.objects.open()
        .exclude(pk=incident.pk)
        .only("pk", "title", "severity")
        .order_by(same if cluster else "-started_at", "-started_at")[:MERGE_TARGETS]
    )


def fired_before_a_cause(alerts: Iterable[Alert]) -> list[bool]:
    """For alerts in chain order (cause before effect): whether each fired before a step listed
    ahead of it, where the causal order and the firing order differ (a slow rule's root fires late)."""
    marks = []
    latest = None
    for alert in alerts:
        marks.append(latest is not None and alert.starts_at < latest)
        latest = alert.starts_at if latest is None else max(latest, alert.starts_at)
    return marks


CHAIN_IN_FULL = 15  # a longer chain (a storm's: every alert) is shown one step per alert name


def chain_steps(chain: list[int], incident_id: int) -> list[dict]:
    """A long chain told by alert name, in the order each name first comes in it (cause before
    effect): its first alert, how many of the chain's alerts have that name, on how many places.
    A storm's chain holds every alert of its incident; one line each buried the story ("KV
    fragmentation, then OOM, then crash loops") under hundreds of lines."""
    # The chain's alerts are the incident's: read by its key (thousands of ids as parameters
    # cost more to send than the rows), names and places computed by the database.
    wanted = set(chain)
    stored = {
        pk: (name, place)
        for pk, name, place in Alert.objects.filter(incident_id=incident_id)
        .annotate(place=place_expression())
        .values_list("pk", "alertname", "place")
        if pk in wanted
    }
    steps: dict[str, dict] = {}
    for alert_id in chain:
        if alert_id not in stored:
            continue
        name, place = stored[alert_id]
        step = steps.get(name)
        if step is None:
            step = steps[name] = {"first": alert_id, "count": 0, "places": set()}
        step["count"] += 1
        step["places"].add(place)
    return [{**step, "places": len(step["places"] - {""})} for step in steps.values()]


def alerts_by_name(incident: Incident) -> list[dict]:
    """An incident's alerts summed up per name (and layer and mode): how many, how many still
    firing, first and latest start; the names that started first first."""
    rows = (
        incident.alerts.order_by()
        .values("alertname", "layer", "failure_mode")
        .annotate(
            count=Count("id"),
            firing=Count("id", filter=Q(status=Alert.Status.FIRING)),
            first=Min("starts_at"),
            latest=Max("starts_at"),
        )
    )
    return sorted(rows, key=lambda row: (row["first"], row["alertname"]))


def annotated_alert_count(incident: Incident) -> int:
    """The `alert_count` that `incident_detail`'s query annotates (not a field of the model)."""
    count: int = incident.alert_count  # type: ignore[attr-defined]
    return count


def incidents_as_truth(*, since: datetime | None = None) -> dict[str, Any]:
    """Stored incidents in the simulator's truth.json shape, to score the app like the engine."""
    alerts = Alert.objects.all() if since is None else Alert.objects.filter(starts_at__gte=since)
    groups: dict[int, list[Alert]] = {}
    noise = []
    for alert in alerts.order_by("starts_at", "id"):
        if alert.incident_id is None:
            noise.append(occurrence_document(alert))
        else:
            groups.setdefault(alert.incident_id, []).append(alert)
    roots = dict(Incident.objects.filter(pk__in=list(groups)).values_list("pk", "root_alert"))
    incidents = []
    for incident_id, members in sorted(groups.items()):
        root = next((alert for alert in members if alert.pk == roots.get(incident_id)), None)
        incidents.append(
            {
                "id": str(incident_id),
                "root": occurrence_document(root) if root else None,
                "alerts": [occurrence_document(alert) for alert in members],
            }
        )
    return {"incidents": incidents, "noise": noise}


def occurrence_document(alert: Alert) -> dict[str, str]:
    return {"fingerprint": alert.fingerprint, "starts_at": alert.starts_at.isoformat().replace("+00:00", "Z")}


def latest_deliveries(limit: int) -> list[Delivery]:
    """The newest deliveries without their bodies (which can be megabytes each)."""
    return list(Delivery.objects.select_related("integration").defer("body").order_by("-id")[:limit])
