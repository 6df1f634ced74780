"""The correlation's set-based writes (`incidents/sql.py`) on PostgreSQL: ids,
references, flags, text, timestamps and numbers go as array text, NULLs included, and land as
they were set."""

from __future__ import annotations

import datetime

import pytest

from incidents.models import Alert, Incident, IncidentEdge
from incidents.sql import _array, rows_insert, rows_update
from tests.conftest import require_postgres

pytestmark = pytest.mark.django_db

T0 = datetime.datetime(2026, 11, 30, 13, 0, tzinfo=datetime.UTC)


def test_columns_of_one_kind_become_array_text_and_the_rest_stays_a_list():
    assert _array([3, 1, 2]) == "{3,1,2}"
    assert _array([None, 7, None]) == "{NULL,7,NULL}"
    assert _array([True, None, False]) == "{t,NULL,f}"
    assert _array(["a,b", None, "NULL", 'say "hi" \\ {x}']) == '{"a,b",NULL,"NULL","say \\"hi\\" \\\\ {x}"}'
    assert _array([1.5, 2, None]) == "{1.5,2.0,NULL}"
    assert _array([T0, None]) == '{"2026-11-30T13:00:00+00:00",NULL}'
    assert _array([1, True]) == [1, True]  # mixed: left to the driver
    assert _array([{"a": 1}]) == [{"a": 1}]
    assert _array([None, None]) == [None, None]


TEXTS = [
    "",
    "NULL",
    "null",
    " padded ",
    "a,b",
    "{braces}",
    'quote " inside',
    "back\\slash",
    '\\"',
    "tab\tnew\nline",
    "Überlast 過負荷 🔥",
    "x" * 5000,
]
NUMBERS = [0.0, -0.0, 1.25, -3.5e-9, 1e300, 2.0**-1074, 0.1 + 0.2, 7, float("inf"), float("-inf")]


def test_text_numbers_and_timestamps_read_back_exactly(make_integration):
    require_postgres()
    from django.db import connection

    moments = [
        T0,
        T0.astimezone(datetime.timezone(datetime.timedelta(hours=-7, minutes=-30))),
        datetime.datetime(1, 1, 1, tzinfo=datetime.UTC),
        T0.replace(microsecond=999999),
        None,
    ]
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT %s::text[], %s::float8[], %s::timestamptz[]",
            [_array(TEXTS), _array(NUMBERS), _array(moments)],
        )
        texts, numbers, stored_moments = cursor.fetchone()
    assert texts == TEXTS
    assert [repr(n) for n in numbers] == [repr(float(n)) for n in NUMBERS]
    assert stored_moments == moments
    with connection.cursor() as cursor:
        cursor.execute("SELECT %s::float8[]", [_array([float("nan"), 1.0])])
        nan, one = cursor.fetchone()[0]
    assert nan != nan and one == 1.0


def test_rows_written_by_update_and_insert_read_back_the_same(make_integration):
    require_postgres()
    hook = make_integration("alertmanager")
    rows = [
        Alert.objects.create(
            fingerprint=f"fp{n}",
            starts_at=T0 + datetime.timedelta(seconds=n),
            status="firing",
            labels={},
            integration=hook,
            received_at=T0,
            correlation_key="c",
        )
        for n in range(4)
    ]
    incident = Incident.objects.create(correlation_key="c", title="t", started_at=T0)
    for number, row in enumerate(rows):
        row.incident_id = incident.pk if number % 2 else None
        row.layer = None if number == 3 else "engine"
        row.failure_mode = 'kv "frag", {x}\\' if number == 0 else "oom"
        row.onset = None if number else T0
        row.false_positive = number == 1
        row.correlated = number != 2
    rows_update(Alert, rows, ["incident", "layer", "failure_mode", "onset", "false_positive", "correlated"])
    stored = {a.pk: a for a in Alert.objects.filter(pk__in=[r.pk for r in rows])}
    for row in rows:
        got = stored[row.pk]
        assert (
            got.incident_id,
            got.layer,
            got.failure_mode,
            got.onset,
            got.false_positive,
            got.correlated,
        ) == (row.incident_id, row.layer, row.failure_mode, row.onset, row.false_positive, row.correlated)

    rows_insert(
        IncidentEdge,
        [
            IncidentEdge(
                incident=incident,
                cause_id=rows[0].pk,
                effect_id=rows[1].pk,
                rule="r1",
                lag_seconds=0,
                relation="same_pod",
            ),
            IncidentEdge(
                incident=incident,
                cause_id=rows[2].pk,
                effect_id=rows[3].pk,
                rule="r,2",
                lag_seconds=1.25,
                relation="same_node",
            ),
        ],
    )
    edges = list(
        IncidentEdge.objects.filter(incident=incident)
        .order_by("lag_seconds")
        .values_list("cause_id", "effect_id", "rule", "lag_seconds")
    )
    assert edges == [(rows[0].pk, rows[1].pk, "r1", 0.0), (rows[2].pk, rows[3].pk, "r,2", 1.25)]
