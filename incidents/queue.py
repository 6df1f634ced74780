"""The triage queue's filters and order, read from the page's URL (so a filtered queue is a link
to share and survives a reload).

Open incidents come by severity, then newest first: at 2 a.m. a critical incident must not sit
below a warning that happened to start later. Every value is the sender's or the user's text, so
each is cut to a length and only compared, never interpreted.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, replace
from urllib.parse import urlencode

from django.contrib.auth.models import User
from django.db.models import Case, IntegerField, Q, QuerySet, Value, When

from incidents.models import Incident
from incidents.sql import filter_json_list_has

STATUSES = ("open", "resolved", "all")
MAX_VALUE = 200  # a filter value longer than any cluster, model or alert name is cut here
SEVERITY_RANK = Case(
    When(severity=Incident.Severity.CRITICAL, then=Value(0)),
    When(severity=Incident.Severity.WARNING, then=Value(1)),
    default=Value(2),
    output_field=IntegerField(),
)


@dataclass(frozen=True)
class QueueFilters:
    status: str = "open"
    cluster: str = ""
    model: str = ""
    failure_mode: str = ""
    layer: str = ""
    severity: str = ""
    mine: bool = False
    q: str = ""

    @classmethod
    def from_query(cls, params: Mapping[str, str]) -> QueueFilters:
        def text(name: str) -> str:
            # PostgreSQL refuses a NUL in any text it compares; no name a sender sends holds one.
            return str(params.get(name, "")).replace("\x00", "").strip()[:MAX_VALUE]

        status = text("status") or "open"
        severity = text("severity")
        return cls(
            status=status if status in STATUSES else "open",
            cluster=text("cluster"),
            model=text("model"),
            failure_mode=text("failure_mode"),
            layer=text("layer"),
            severity=severity if severity in Incident.Severity.values else "",
            mine=text("mine") in ("1", "on", "true", "yes"),
            q=text("q"),
        )

    def narrowing(self) -> bool:
        """Whether anything besides the status narrows the queue."""
        return any(value for name, value in asdict(self).items() if name != "status")

    def query_string(self, **changes: object) -> str:
        """This queue's URL query, with `changes` applied; empty values are left out."""
        values = asdict(replace(self, **changes))  # type: ignore[arg-type]
        pairs = [(name, "1" if value is True else value) for name, value in values.items() if value]
        return urlencode(pairs)


def filtered(incidents: QuerySet[Incident], filters: QueueFilters, user: User | None) -> QuerySet[Incident]:
    """`incidents` narrowed by the queue's filters and put in the queue's order."""
    if filters.status == "open":
        incidents = incidents.exclude(status=Incident.Status.RESOLVED)
    elif filters.status == "resolved":
        incidents = incidents.filter(status=Incident.Status.RESOLVED)
    if filters.cluster:
        incidents = incidents.filter(scope__cluster=filters.cluster)
    if filters.model:
        incidents = incidents.filter(scope__model=filters.model)
    if filters.severity:
        incidents = incidents.filter(severity=filters.severity)
    if filters.layer:
        incidents = filter_json_list_has(incidents, "layers", filters.layer)
    if filters.failure_mode:
        incidents = filter_json_list_has(incidents, "failure_modes", filters.failure_mode)
    if filters.mine:
        incidents = incidents.filter(assignee=user) if user is not None else incidents.none()
    if filters.q:
        incidents = incidents.filter(searched(filters.q))
    if filters.status == "open":
        return incidents.order_by(SEVERITY_RANK, "-started_at", "-id")
    return incidents.order_by("-started_at", "-id")


def searched(text: str) -> Q:
    """Incidents whose title or root alert's name holds the text; `#123` or `123` is that incident too."""
    found = Q(title__icontains=text) | Q(root_alert__alertname__icontains=text)
    number = text.removeprefix("#")
    if number.isascii() and number.isdigit() and len(number) < 19:
        found |= Q(pk=int(number))
    return found
