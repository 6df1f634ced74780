"""Page-shaped reads, one function per page, each with a query-count test."""
from __future__ import annotations

from datetime import datetime

from django.conf import settings
from django.db.models import Count, Prefetch

from incidents.runbooks import runbook_href
from incidents.models import Alert, Delivery, Incident, Integration, RootCandidate


def home_page(*, limit: int = 50) -> dict:
    return {
        "alerts": list(Alert.objects.select_related("integration").order_by("-starts_at", "-id")[:limit]),
        "deliveries": latest_deliveries(20),
        "firing_count": Alert.objects.firing().count(),
    }


def metrics_text() -> str:
    lines = [
        "# HELP rootline_deliveries Webhook deliveries stored, by status.",
        "# TYPE rootline_deliveries gauge",
    ]
    for status, count in Delivery.objects.values_list("status").annotate(n=Count("id")).order_by("status"):
        lines.append(f'rootline_deliveries{{status="{status}"}} {count}')
    lines += ["# HELP rootline_alerts Alert occurrences stored, by status.", "# TYPE rootline_alerts gauge"]
    for status, count in Alert.objects.values_list("status").annotate(n=Count("id")).order_by("status"):
        lines.append(f'rootline_alerts{{status="{status}"}} {count}')
    lines += ["# HELP rootline_integrations Configured integrations.", "# TYPE rootline_integrations gauge"]
    lines.append(f"rootline_integrations {Integration.objects.count()}")
    return "\n".join(lines) + "\n"


def broker_status() -> str:
    from rootline.celery import app

    try:
        with app.connection_for_write() as conn:
            conn.ensure_connection(max_retries=1, timeout=1)
    except Exception as exc:  # noqa: BLE001 - any broker failure is reported, not raised
        return f"error: {exc.__class__.__name__}"
    return "ok" if settings.CELERY_BROKER_URL else "eager"


def incidents_list(*, status: str = "open", since: datetime | None = None):
    """The incidents API's list (and the triage queue): newest first, counts in one query."""
    incidents = Incident.objects.visible().select_related("root_alert", "assignee").annotate(alert_count=Count("alerts"))
    if since is not None:
        incidents = incidents.filter(started_at__gte=since)
    if status == "open":
        incidents = incidents.exclude(status=Incident.Status.RESOLVED)
    elif status == "resolved":
        incidents = incidents.filter(status=Incident.Status.RESOLVED)
    return incidents.order_by("-started_at", "-id")


def chain_alerts(incidents) -> dict[int, Alert]:
    """The alerts named by these incidents' chains, in one query."""
    ids = {alert_id for incident in incidents for alert_id in incident.chain}
    return Alert.objects.in_bulk(list(ids)) if ids else {}


def incident_detail(incident_id: int) -> Incident | None:
    return (
        Incident.objects.select_related("root_alert", "assignee")
        .annotate(alert_count=Count("alerts"))
        .prefetch_related(
            Prefetch("alerts", queryset=Alert.objects.order_by("starts_at", "id")),
            "edges",
            Prefetch("root_candidates", queryset=RootCandidate.objects.order_by("rank")),
        )
        .filter(pk=incident_id)
        .first()
    )


def triage_page(*, status: str = "open", limit: int = 200) -> dict:
    incidents = list(incidents_list(status=status)[:limit])
    alerts = chain_alerts(incidents)
    for incident in incidents:
        incident.chain_rows = [alerts[alert_id] for alert_id in incident.chain if alert_id in alerts]
        incident.chain_names = list(dict.fromkeys(alert.alertname for alert in incident.chain_rows))
    return {
        "incidents": incidents,
        "status": status,
        "counts": status_counts(),
        "deliveries": latest_deliveries(8),
    }


def incident_page(incident_id: int) -> dict | None:
    incident = incident_detail(incident_id)
    if incident is None:
        return None
    alerts = {alert.pk: alert for alert in incident.alerts.all()}
    candidates = list(incident.root_candidates.all())
    missing = {c.alert_id for c in candidates} - set(alerts)
    if missing:
        alerts.update(Alert.objects.in_bulk(list(missing)))
    members = list(incident.alerts.all())
    for alert in members:
        alert.runbook_href = runbook_href(alert.alertname, alert.annotations)
    return {
        "incident": incident,
        "chain": [alerts[alert_id] for alert_id in incident.chain if alert_id in alerts],
        "alerts": members,
        "candidates": [(candidate, alerts.get(candidate.alert_id)) for candidate in candidates],
        "edges": [(edge, alerts.get(edge.cause_id), alerts.get(edge.effect_id)) for edge in incident.edges.all()],
        "actions": list(incident.actions.select_related("by", "alert").order_by("at", "id")),
        "merged": list(incident.merged.values_list("pk", flat=True)),
    }


def status_counts() -> dict[str, int]:
    counts = dict(Incident.objects.visible().values_list("status").annotate(n=Count("id")).values_list("status", "n"))
    return {"open": sum(n for status, n in counts.items() if status != Incident.Status.RESOLVED),
            "resolved": counts.get(Incident.Status.RESOLVED, 0)}


def incidents_as_truth(*, since=None) -> dict:
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
        incidents.append({
            "id": str(incident_id),
            "root": occurrence_document(root) if root else None,
            "alerts": [occurrence_document(alert) for alert in members],
        })
    return {"incidents": incidents, "noise": noise}


def occurrence_document(alert: Alert) -> dict[str, str]:
    return {"fingerprint": alert.fingerprint, "starts_at": alert.starts_at.isoformat().replace("+00:00", "Z")}


def latest_deliveries(limit: int) -> list[Delivery]:
    """The newest deliveries without their bodies (which can be megabytes each)."""
    return list(Delivery.objects.select_related("integration").defer("body").order_by("-id")[:limit])
