"""The postmortem policy: which incidents need one (ROOTLINE_POSTMORTEM_SEVERITY and above) and
when it is due (ROOTLINE_POSTMORTEM_DUE_DAYS after the incident resolved). Reads only: the pages'
selectors and the services both ask it."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta

from django.conf import settings

from incidents.models import Incident, Postmortem
from incidents.services.correlation.sync import SEVERITY_ORDER

SEVERITY_RANK = {level: rank for rank, level in enumerate(SEVERITY_ORDER)}


def needs_postmortem(incident: Incident) -> bool:
    """Whether the policy asks for one: the incident is at or above ROOTLINE_POSTMORTEM_SEVERITY."""
    return SEVERITY_RANK.get(incident.severity, 0) >= SEVERITY_RANK[settings.POSTMORTEM_SEVERITY]


def due_at(postmortem: Postmortem, incidents: Sequence[Incident] | None = None) -> datetime | None:
    """The first covered incident's resolve time + ROOTLINE_POSTMORTEM_DUE_DAYS, for incidents the
    policy covers; None otherwise (or while unresolved)."""
    covered = [
        i for i in (incidents if incidents is not None else postmortem.incidents.all()) if needs_postmortem(i)
    ]
    resolved = [i.resolved_at for i in covered if i.resolved_at]
    return min(resolved) + timedelta(days=settings.POSTMORTEM_DUE_DAYS) if resolved else None
