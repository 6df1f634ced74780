"""A collection writing an incident's evidence never holds up a correlation run updating the
incident (the evidence worker runs at the lowest CPU priority), and two collections of one
incident still take turns."""

from __future__ import annotations

import threading
from datetime import UTC, datetime

import pytest
from django.db import OperationalError, connection, transaction

from incidents.models import Incident
from incidents.services.evidence import incident_for_evidence
from tests.conftest import require_postgres


def run_in_thread(target) -> list[BaseException]:
    errors: list[BaseException] = []

    def wrapped() -> None:
        try:
            target()
        except BaseException as exc:  # noqa: BLE001 - reported to the test
            errors.append(exc)
        finally:
            connection.close()

    thread = threading.Thread(target=wrapped)
    thread.start()
    thread.join(20)
    return errors


def set_lock_timeout() -> None:
    with connection.cursor() as cursor:
        cursor.execute("SET LOCAL lock_timeout = '1s'")


@pytest.mark.django_db(transaction=True)
def test_a_collection_leaves_the_incident_row_free_for_correlation_but_serialises_collections():
    require_postgres()
    incident = Incident.objects.create(
        correlation_key="prod-eu", started_at=datetime(2026, 11, 29, 2, tzinfo=UTC)
    )
    with transaction.atomic():
        assert incident_for_evidence(incident.pk) == incident  # this collection is writing now

        def correlation_updates_the_incident() -> None:
            with transaction.atomic():
                set_lock_timeout()
                Incident.objects.filter(pk=incident.pk).update(title="written by a correlation run")

        def another_collection() -> None:
            with transaction.atomic():
                set_lock_timeout()
                incident_for_evidence(incident.pk)

        assert run_in_thread(correlation_updates_the_incident) == []
        waited = run_in_thread(another_collection)
        assert (
            len(waited) == 1 and isinstance(waited[0], OperationalError) and "lock timeout" in str(waited[0])
        )
    assert Incident.objects.get(pk=incident.pk).title == "written by a correlation run"
    assert run_in_thread(another_collection) == []  # its turn, once the first one committed


@pytest.mark.django_db
def test_a_collection_of_an_incident_that_is_gone_finds_nothing():
    assert incident_for_evidence(987654) is None
