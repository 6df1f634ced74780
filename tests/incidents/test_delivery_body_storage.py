"""Raw bodies are stored compressed with lz4 where PostgreSQL can (migration 0013): a storm's
bodies cost pglz 1.05 s of the server's CPU, lz4 0.14 s, for the same size."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest
from django.db import connection

from tests.conftest import require_postgres

pytestmark = pytest.mark.django_db
AT = datetime(2026, 11, 30, 17, 0, tzinfo=UTC)


def server_has_lz4() -> bool:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT 'lz4' = ANY(enumvals) FROM pg_settings WHERE name = 'default_toast_compression'"
        )
        return bool(cursor.fetchone()[0])


def test_a_large_body_is_kept_byte_for_byte_and_compressed_with_lz4(make_integration):
    require_postgres()
    from incidents.models import Delivery

    alerts = [
        {
            "labels": {"alertname": "LLMKVFragmentationHigh", "pod": f"vllm-{n:05d}"},
            "startsAt": "2026-11-30T17:00:00Z",
        }
        for n in range(2000)
    ]
    body = json.dumps({"version": "4", "alerts": alerts}).encode() + "é\x00\xff".encode(
        "utf-8", "surrogatepass"
    )
    delivery = Delivery.objects.create(
        integration=make_integration("alertmanager"), body=body, received_at=AT
    )
    assert bytes(Delivery.objects.get(pk=delivery.pk).body) == body
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT pg_column_compression(body), pg_column_size(body), octet_length(body) "
            "FROM incidents_delivery WHERE id = %s",
            [delivery.pk],
        )
        method, stored, length = cursor.fetchone()
    assert stored < length / 4  # compressed, as bodies of many alerts alike are
    assert method == ("lz4" if server_has_lz4() else "pglz")
