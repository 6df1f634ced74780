"""An alert's labels and annotations are read back exactly as Django's JSONField reads them, with
orjson's faster decoding used only where both give the same value (`incidents/fields.py`)."""

from __future__ import annotations

import json

import pytest
from django.db import connection

from incidents import fields
from incidents.models import Alert

pytestmark = pytest.mark.django_db

STORED = [
    {"alertname": "LLMKVFragmentationHigh", "pod": "vllm-0", "description": 'KV cache 93% "fragmented"\n'},
    {"summary": "Überlast — 過負荷 🔥", "tab": "a\tb", "escaped": "\\u00e9 is not é"},
    {},
    # Not string maps (the admin or a shell can store anything): Django's decoding decides.
    {"big": 123456789012345678901234567890, "negative": -9223372036854775809},
    {"nested": {"a": ["b", 1, 2.5, None, True]}},
    {"float": 0.1, "int": 7},
    ["a", "list"],
    "a string",
]


@pytest.mark.parametrize("value", STORED)
def test_values_come_back_as_stored(make_integration, value):
    hook = make_integration("alertmanager")
    row = Alert.objects.create(
        fingerprint="fp",
        starts_at="2026-11-30T15:00:00Z",
        status="firing",
        labels=value,
        annotations=value,
        integration=hook,
        received_at="2026-11-30T15:00:00Z",
    )
    loaded = Alert.objects.get(pk=row.pk)
    assert loaded.labels == value and loaded.annotations == value
    assert type(loaded.labels) is type(value)
    assert json.dumps(loaded.labels, sort_keys=True) == json.dumps(
        value, sort_keys=True
    )  # 10**29 stays an int


def test_a_string_map_is_decoded_by_orjson_and_anything_else_by_json(monkeypatch):
    field = Alert._meta.get_field("labels")
    decoded_by_json = []
    original = fields.models.JSONField.from_db_value

    def counted(self, value, expression, connection):
        decoded_by_json.append(value)
        return original(self, value, expression, connection)

    monkeypatch.setattr(fields.models.JSONField, "from_db_value", counted)
    assert field.from_db_value('{"pod": "vllm-0", "é": "\\ud83d\\udd25"}', None, connection) == {
        "pod": "vllm-0",
        "é": "🔥",
    }
    assert decoded_by_json == []
    assert field.from_db_value('{"n": 18446744073709551616}', None, connection) == {"n": 18446744073709551616}
    assert field.from_db_value('{"lone": "\\ud800"}', None, connection) == {
        "lone": "\ud800"
    }  # orjson refuses it
    assert field.from_db_value("not json", None, connection) == "not json"  # as JSONField answers
    assert len(decoded_by_json) == 3
