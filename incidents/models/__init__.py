"""Rootline's rows, one module per room: `ingest` (integrations, deliveries, alerts), `incidents`
(incidents, their edges, candidates, actions and decisions), `evidence` (series, gaps, the
root-cause matrix), `audit` (every change a person made), `people` (what a person sets for
themselves), `postmortems` (postmortems and their revisions), `retention` (the counts kept of
pruned alerts), `tally` (Rootline's own figures for /metrics)."""

from incidents.models.audit import AuditRecord
from incidents.models.evidence import EvidenceGap, EvidenceSeries, LocalSeries, MatrixCell
from incidents.models.incidents import (
    CorrelationLock,
    Decision,
    Incident,
    IncidentAction,
    IncidentEdge,
    IncidentQuerySet,
    PendingAction,
    PendingActionQuerySet,
    RootCandidate,
)
from incidents.models.ingest import (
    Alert,
    AlertQuerySet,
    Delivery,
    Integration,
    place_named,
    storable_id,
    token_digest,
)
from incidents.models.people import ApiToken, Profile
from incidents.models.postmortems import Postmortem, PostmortemComment, PostmortemRevision
from incidents.models.remediation import RemediationItem
from incidents.models.retention import AlertRollup
from incidents.models.review import ReviewWeek
from incidents.models.tally import Tally

__all__ = [
    "Alert",
    "AlertRollup",
    "ApiToken",
    "AlertQuerySet",
    "AuditRecord",
    "CorrelationLock",
    "Decision",
    "Delivery",
    "EvidenceGap",
    "EvidenceSeries",
    "Incident",
    "IncidentAction",
    "IncidentEdge",
    "IncidentQuerySet",
    "Integration",
    "LocalSeries",
    "MatrixCell",
    "PendingAction",
    "PendingActionQuerySet",
    "Postmortem",
    "PostmortemComment",
    "PostmortemRevision",
    "Profile",
    "RemediationItem",
    "ReviewWeek",
    "RootCandidate",
    "Tally",
    "place_named",
    "storable_id",
    "token_digest",
]
