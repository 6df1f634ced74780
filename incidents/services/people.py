"""What a person sets for themselves (their time zone), with its audit record."""

from __future__ import annotations

import zoneinfo
from functools import cache

from django.contrib.auth.models import User
from django.db import transaction

from incidents.models import Profile
from incidents.services.audit import audit_record
from incidents.services.errors import invalid


@cache
def time_zone_names() -> frozenset[str]:
    return frozenset(zoneinfo.available_timezones()) | {"UTC"}


def time_zone_of(user: User) -> str:
    profile = Profile.objects.filter(user=user).only("time_zone").first()
    return profile.time_zone if profile else "UTC"


def profile_set_time_zone(*, user: User, via: str, time_zone: str) -> Profile:
    """The person's pages show times in `time_zone` from now on (exports stay in UTC)."""
    if time_zone not in time_zone_names():
        raise invalid(
            f"time_zone: expected an IANA time zone name such as Europe/Berlin, got {time_zone[:60]!r}"
        )
    with transaction.atomic():
        profile, _ = Profile.objects.select_for_update().get_or_create(user=user)
        old = profile.time_zone
        if old != time_zone:
            profile.time_zone = time_zone
            profile.save(update_fields=["time_zone"])
            audit_record(
                by=user,
                via=via,
                target=("user", user.get_username()),
                action="profile_edit",
                field="time_zone",
                old=old,
                new=time_zone,
            )
    return profile
