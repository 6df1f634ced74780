"""Timestamps come back from PostgreSQL through psycopg's C loader (`rootline/postgres_types.py`),
as the same values Django's own loader gives: aware, in `datetime.timezone.utc`."""

from __future__ import annotations

import datetime

import pytest
from django.db import connection

from rootline.postgres_types import TIMESTAMPTZ_OID, UtcTimestamptzLoader, has_c_loader
from tests.conftest import require_postgres

pytestmark = pytest.mark.django_db

MOMENTS = [
    datetime.datetime(2026, 11, 30, 13, 4, 2, 123456, tzinfo=datetime.UTC),
    datetime.datetime(
        2026, 3, 29, 1, 30, tzinfo=datetime.timezone(datetime.timedelta(hours=2))
    ),  # another zone, stored as UTC
    datetime.datetime(1, 1, 1, tzinfo=datetime.UTC),  # Alertmanager's "no end"
    datetime.datetime(9999, 12, 31, 23, 59, 59, 999999, tzinfo=datetime.UTC),
]


def test_timestamps_load_in_c_as_utc_values_equal_to_what_was_stored(make_integration):
    require_postgres()
    from incidents.models import Alert

    assert has_c_loader()  # psycopg[binary] is a dependency
    connection.ensure_connection()
    assert connection.connection.adapters.get_loader(TIMESTAMPTZ_OID, 0) is UtcTimestamptzLoader
    hook = make_integration("alertmanager")
    for number, moment in enumerate(MOMENTS):
        Alert.objects.create(
            fingerprint=f"fp{number}",
            starts_at=moment,
            ends_at=moment,
            status="firing",
            labels={},
            integration=hook,
            received_at=moment,
            correlation_key="c",
        )
    loaded = list(
        Alert.objects.filter(correlation_key="c")
        .order_by("id")
        .values_list("starts_at", "ends_at", "received_at")
    )
    assert [row[0] for row in loaded] == MOMENTS
    for row in loaded:
        assert row[0] == row[1] == row[2]
        assert all(value.tzinfo is datetime.UTC for value in row)
    with connection.cursor() as cursor:  # the cursor Django makes keeps the loader (no tz mismatch)
        assert cursor.cursor.adapters.get_loader(TIMESTAMPTZ_OID, 0) is UtcTimestamptzLoader
        cursor.execute("SELECT %s::timestamptz", [MOMENTS[1]])
        (value,) = cursor.fetchone()
    assert value == MOMENTS[1] and value.tzinfo is datetime.UTC
