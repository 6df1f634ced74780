"""The engine state a process keeps per key between runs: runs on it give exactly what a run over
the database window gives, and it is never used once something else may have changed the key."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
from django.core.management import call_command
from django.db import transaction

from correlate import simulator
from incidents import services
from incidents.models import Alert, CorrelationLock, Decision, Incident
from incidents.services.correlation import correlation_run
from incidents.services.correlation.state import KEPT
from incidents.tasks import process_delivery

pytestmark = pytest.mark.django_db
RUN_LOGGER = "incidents.services.correlation.run"


@pytest.fixture(scope="module")
def fleet(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("fleet")
    simulator.simulate("fleet-day", "2026-03-14T06:00:00Z", 11, str(folder))
    return folder


@pytest.fixture(autouse=True)
def no_state_from_other_tests():
    KEPT.clear()
    yield
    KEPT.clear()


@pytest.fixture
def runs(caplog):
    """The path each correlation run took, in order ("kept state" or "window")."""
    caplog.set_level(logging.INFO, logger=RUN_LOGGER)

    def paths() -> list[str]:
        return [
            "kept state" if "from the kept state" in r.getMessage() else "window"
            for r in caplog.records
            if r.name == RUN_LOGGER and r.getMessage().startswith("correlated ")
        ]

    return paths


def bodies(path: Path) -> list[bytes]:
    return [line.strip() for line in path.read_bytes().splitlines() if line.strip()]


def receive(hook, body: bytes) -> None:
    receipt = services.delivery_receive(integration=hook, body=body, headers={})
    process_delivery(receipt.body["delivery"])


def correlate_pending() -> None:
    for key in sorted(set(Alert.objects.filter(correlated=False).values_list("correlation_key", flat=True))):
        correlation_run(key=key, keep_state=True)


def replay(fleet: Path, make_integration, *, stop_after: int | None = None) -> None:
    """The fleet's changes, then its alert bodies in arrival order, each followed by the runs a
    worker would make."""
    alerts_hook, changes_hook = make_integration("alertmanager"), make_integration("events")
    pairs = [(changes_hook, body) for body in bodies(fleet / "changes.jsonl")]
    pairs += [(alerts_hook, body) for body in bodies(fleet / "alerts.jsonl")]
    for hook, body in pairs[:stop_after]:
        receive(hook, body)
        correlate_pending()


def snapshot() -> dict[frozenset[str], dict]:
    """Every stored incident, named by its alerts' occurrence keys, with everything a run writes."""
    by_pk = {alert.pk: alert.key for alert in Alert.objects.all()}
    found = {}
    for incident in Incident.objects.filter(merged_into=None).prefetch_related(
        "alerts", "edges", "root_candidates"
    ):
        members = frozenset(alert.key for alert in incident.alerts.all())
        if not members:
            continue
        found[members] = {
            "root": by_pk.get(incident.root_alert_id),
            "confidence": incident.root_confidence,
            "explanation": incident.root_explanation,
            "chain": [by_pk[pk] for pk in incident.chain],
            "edges": sorted(
                (by_pk[e.cause_id], by_pk[e.effect_id], e.rule, e.lag_seconds, e.relation)
                for e in incident.edges.all()
            ),
            "candidates": [
                (c.rank, by_pk[c.alert_id], c.confidence, c.explanation)
                for c in incident.root_candidates.all()
            ],
            "title": incident.title,
            "severity": incident.severity,
            "status": incident.status,
            "started_at": incident.started_at,
            "resolved_at": incident.resolved_at,
            "scope": incident.scope,
            "layers": incident.layers,
            "failure_modes": incident.failure_modes,
            "classification": sorted(
                (a.key, a.layer, a.failure_mode, a.classified_by, a.onset) for a in incident.alerts.all()
            ),
        }
    return found


def test_runs_on_the_kept_state_write_what_window_runs_write(fleet, make_integration, runs):
    replay(fleet, make_integration)
    paths = runs()
    assert paths.count("kept state") > len(paths) // 2, paths  # the kept state did the work
    incremental = snapshot()
    assert len(incremental) >= 5
    assert not Alert.objects.filter(correlated=False).exists()

    call_command("recorrelate", "--since", "2026-03-13T00:00:00Z", stdout=open("/dev/null", "w"))
    assert snapshot() == incremental  # the window path over everything changes nothing

    KEPT.clear()
    Incident.objects.all().delete()
    Alert.objects.update(correlated=False)
    correlate_pending()
    assert snapshot() == incremental  # and from nothing it writes the same


def rerun(key: str, runs, alerts=None) -> str:
    """Mark `alerts` (by default the key's latest) as not yet correlated, run the key, and say
    which path the run took."""
    alerts = alerts or Alert.objects.filter(correlation_key=key).order_by("-starts_at")[:1]
    Alert.objects.filter(pk__in=[alert.pk for alert in alerts]).update(correlated=False)
    before = len(runs())
    correlation_run(key=key, keep_state=True)
    (path,) = runs()[before:]
    return path


def biggest_incident() -> Incident:
    return max(
        Incident.objects.filter(merged_into=None),
        key=lambda incident: (incident.alerts.count(), -incident.pk),
    )


def busiest_key() -> str:
    keys = list(Alert.objects.exclude(correlation_key="").values_list("correlation_key", flat=True))
    return max(sorted(set(keys)), key=keys.count)


def test_a_run_in_another_process_makes_the_next_run_rebuild(fleet, make_integration, runs):
    replay(fleet, make_integration, stop_after=40)
    key = busiest_key()
    rerun(key, runs)  # from the window if the replay's last run of the key was long before its latest alert
    assert rerun(key, runs) == "kept state"
    CorrelationLock.objects.filter(key=key).update(run_token="written-by-another-worker")
    assert rerun(key, runs) == "window"
    assert rerun(key, runs) == "kept state"


def test_incidents_deleted_by_hand_make_the_next_run_rebuild(fleet, make_integration, runs):
    replay(fleet, make_integration, stop_after=60)
    expected = snapshot()
    biggest = biggest_incident()
    key, members = biggest.correlation_key, list(biggest.alerts.order_by("starts_at"))
    assert len(members) >= 3
    rerun(key, runs, members)
    assert rerun(key, runs, members[-1:]) == "kept state"
    Incident.objects.all().delete()  # as the admin could: the kept rows still name the deleted incidents
    assert rerun(key, runs, members[-1:]) == "window"
    Alert.objects.update(correlated=False)
    correlate_pending()
    assert snapshot() == expected


def test_an_alert_deleted_by_hand_makes_the_next_run_of_its_incident_rebuild(fleet, make_integration, runs):
    """A run from the kept state counts the alerts stored in the incidents it writes, rather than
    looking up each by id: one deleted (the admin, a shell) must still make the run rebuild."""
    replay(fleet, make_integration, stop_after=60)
    biggest = biggest_incident()
    key, members = biggest.correlation_key, list(biggest.alerts.order_by("starts_at"))
    assert len(members) >= 3
    rerun(key, runs, members)
    assert rerun(key, runs, members[-1:]) == "kept state"
    Alert.objects.filter(pk=members[1].pk).delete()
    assert rerun(key, runs, members[-1:]) == "window"
    assert rerun(key, runs, members[-1:]) == "kept state"
    assert set(Incident.objects.get(pk=biggest.pk).alerts.values_list("pk", flat=True)) == {
        a.pk for a in members
    } - {members[1].pk}


def test_a_rolled_back_run_leaves_no_state_behind(fleet, make_integration, runs):
    replay(fleet, make_integration, stop_after=40)
    key = busiest_key()
    rerun(key, runs)  # from the window if the replay's last run of the key was long before its latest alert
    assert rerun(key, runs) == "kept state"
    expected = snapshot()
    latest = list(Alert.objects.filter(correlation_key=key).order_by("-starts_at")[:5])
    with pytest.raises(RuntimeError):
        with transaction.atomic():
            Incident.objects.filter(alerts__in=latest).delete()
            Alert.objects.filter(pk__in=[a.pk for a in latest]).update(correlated=False)
            correlation_run(key=key, keep_state=True)  # runs from the window, and keeps the state it built
            raise RuntimeError("the worker died before committing")
    assert rerun(key, runs) == "window"  # the state of the rolled-back run was not trusted
    assert snapshot() == expected


def test_a_human_decision_makes_the_next_run_rebuild(fleet, make_integration, runs):
    replay(fleet, make_integration, stop_after=50)
    key = busiest_key()
    rerun(key, runs)  # from the window if the replay's last run of the key was long before its latest alert
    assert rerun(key, runs) == "kept state"
    alert = Alert.objects.filter(correlation_key=key).order_by("-starts_at").first()
    Decision.objects.create(
        kind=Decision.Kind.EXCLUDE, alert_keys=[alert.key], correlation_key=key, at=alert.starts_at
    )
    assert rerun(key, runs, [alert]) == "window"
    assert Alert.objects.get(pk=alert.pk).incident_id is None


def test_runs_outside_the_worker_keep_no_state(fleet, make_integration, runs):
    replay(fleet, make_integration, stop_after=30)
    key = busiest_key()
    rerun(key, runs)
    KEPT.clear()
    Alert.objects.filter(correlation_key=key).update(correlated=False)
    correlation_run(key=key)  # as a person's action in a web process runs it
    assert len(KEPT) == 0
    assert rerun(key, runs) == "window"


def test_a_backlog_is_taken_oldest_first_in_slices_and_the_key_queued_again(
    fleet, make_integration, runs, monkeypatch, settings, django_capture_on_commit_callbacks
):
    from unittest import mock

    from incidents.services.correlation import run

    replay(fleet, make_integration, stop_after=60)
    biggest = biggest_incident()
    key, backlog = biggest.correlation_key, list(biggest.alerts.order_by("id"))
    assert len(backlog) >= 5
    KEPT.clear()
    assert rerun(key, runs, backlog) == "window"
    expected = snapshot()
    settings.CORRELATION_SLICE = 2
    settings.CELERY_TASK_ALWAYS_EAGER = False
    Alert.objects.filter(pk__in=[alert.pk for alert in backlog]).update(correlated=False)
    with mock.patch.object(run, "correlation_enqueue_now") as queued_again:
        with django_capture_on_commit_callbacks(execute=True):
            correlation_run(key=key, keep_state=True)
    queued_again.assert_called_once_with(
        [key], paced=False
    )  # behind the shard's other keys, without waiting a pace
    assert runs()[-1] == "kept state"
    assert (
        list(Alert.objects.filter(pk__in=[a.pk for a in backlog], correlated=True).order_by("id"))
        == backlog[:2]
    )  # oldest first

    settings.CELERY_TASK_ALWAYS_EAGER = True  # no broker: the run goes on until nothing waits
    correlation_run(key=key, keep_state=True)
    assert not Alert.objects.filter(correlated=False).exists()
    assert runs()[-1] == "kept state"
    assert snapshot() == expected


def test_a_window_run_takes_a_backlog_in_slices_too(
    fleet, make_integration, runs, monkeypatch, settings, django_capture_on_commit_callbacks
):
    from unittest import mock

    from incidents.services.correlation import run

    alerts_hook = make_integration("alertmanager")
    alert_bodies = bodies(fleet / "alerts.jsonl")
    for body in alert_bodies[:40]:
        receive(alerts_hook, body)
    correlate_pending()
    for body in alert_bodies[40:70]:  # a backlog nobody has correlated yet
        receive(alerts_hook, body)
    key = busiest_key()
    backlog = list(Alert.objects.filter(correlation_key=key, correlated=False).order_by("id"))
    assert len(backlog) > 3
    KEPT.clear()
    settings.CORRELATION_SLICE = 2
    settings.CELERY_TASK_ALWAYS_EAGER = False
    with mock.patch.object(run, "correlation_enqueue_now") as queued_again:
        with django_capture_on_commit_callbacks(execute=True):
            correlation_run(key=key, keep_state=True)
    queued_again.assert_called_once_with(
        [key], paced=False
    )  # behind the shard's other keys, without waiting a pace
    assert runs()[-1] == "window"
    assert (
        list(Alert.objects.filter(pk__in=[a.pk for a in backlog], correlated=True).order_by("id"))
        == backlog[:2]
    )
    settings.CELERY_TASK_ALWAYS_EAGER = True
    correlation_run(key=key, keep_state=True)
    correlate_pending()
    assert not Alert.objects.filter(correlated=False).exists()
    sliced = snapshot()
    call_command("recorrelate", "--since", "2026-03-13T00:00:00Z", stdout=open("/dev/null", "w"))
    assert snapshot() == sliced


def test_kept_states_are_bounded_by_keys_and_by_alerts_held():
    from incidents.services.correlation.state import KeptStates, KeyState

    def state_of(size: int) -> KeyState:
        return KeyState(
            correlator=None, catalog=None, since=None, decisions=(), rows={str(n): None for n in range(size)}
        )

    kept = KeptStates(limit=3, alert_limit=100)
    for key in "abcd":
        kept.keep(key, state_of(10))
    assert len(kept) == 3 and kept.take("a") is None  # the least recently used key went first
    kept.keep("big", state_of(95))
    assert len(kept) == 1 and kept.take("big") is not None  # too many alerts held: the others went
    kept.keep("huge", state_of(500))
    assert len(kept) == 1  # a state over the bound alone is still kept


def test_an_alert_that_comes_back_with_other_labels_makes_the_next_run_rebuild(fleet, make_integration, runs):
    replay(fleet, make_integration, stop_after=50)
    key = busiest_key()
    alert = Alert.objects.filter(correlation_key=key, kind=Alert.Kind.ALERT).order_by("-starts_at").first()
    rerun(key, runs, [alert])
    assert rerun(key, runs, [alert]) == "kept state"
    assert alert.failure_mode != "gpu_error"
    Alert.objects.filter(pk=alert.pk).update(
        labels={**alert.labels, "layer": "hardware", "failure_mode": "gpu_error"}
    )
    assert rerun(key, runs, [alert]) == "window"
    alert.refresh_from_db()
    assert (alert.layer, alert.failure_mode) == ("hardware", "gpu_error")
    assert rerun(key, runs, [alert]) == "kept state"


def hold_big_rankings(monkeypatch) -> list[float]:
    """Worker runs as with a broker, on a clock that stands still unless moved, and incidents of
    three alerts already big; returns the clock."""
    from incidents.services.correlation import run, state

    clock = [1000.0]
    monkeypatch.setattr(state, "BIG_INCIDENT", 3)
    monkeypatch.setattr(state, "monotonic", lambda: clock[0])
    monkeypatch.setattr(run, "defers_ranking", lambda: True)
    return clock


def recomputed() -> dict:
    call_command("recorrelate", "--since", "2026-03-13T00:00:00Z", stdout=open("/dev/null", "w"))
    return snapshot()


def test_a_big_incident_gets_its_alerts_at_once_and_its_ranking_every_few_seconds(
    fleet, make_integration, runs, monkeypatch, django_capture_on_commit_callbacks
):
    """A worker's runs write a big incident's members on every run but rank it (edges, chain, root
    candidates, title) at most every RANK_EVERY_SECONDS, and queue a run for when that is due;
    once it has run, the stored incidents are exactly what a full recompute gives."""
    from incidents.services.correlation import run, state

    clock = hold_big_rankings(monkeypatch)
    asked: list[tuple[str, float]] = []
    monkeypatch.setattr(run, "correlation_enqueue_later", lambda key, seconds: asked.append((key, seconds)))
    with django_capture_on_commit_callbacks() as callbacks:
        replay(fleet, make_integration, stop_after=60)
    for callback in callbacks:
        if getattr(callback, "func", callback).__qualname__.startswith(
            "correlation_slice"
        ):  # a run asking for a later one
            callback()
    assert not Alert.objects.filter(correlated=False).exists()
    held_keys = sorted({key for key, _ in asked})
    assert held_keys and all(seconds == state.RANK_EVERY_SECONDS for _, seconds in asked)
    assert Incident.objects.filter(ranking_held=True).exists()
    held = snapshot()

    clock[0] += state.RANK_EVERY_SECONDS  # the queued runs, when they are due
    for key in held_keys:
        correlation_run(key=key, keep_state=True)
    assert runs()[-1] == "kept state"
    assert not Incident.objects.filter(ranking_held=True).exists()
    final = snapshot()

    expected = recomputed()
    assert final == expected
    assert held.keys() == expected.keys()  # every alert was in its incident all along
    for members in held:
        assert held[members]["classification"] == expected[members]["classification"]
    stale = [members for members in held if held[members] != expected[members]]
    assert stale and all(len(members) >= state.BIG_INCIDENT for members in stale)  # only big ones waited


def test_a_held_ranking_is_not_lost_with_the_state(fleet, make_integration, runs, monkeypatch):
    """The process that held a ranking back died (or its state went stale): the next run of the
    key rebuilds from the database window, which takes the held incidents in and ranks them."""
    hold_big_rankings(monkeypatch)
    replay(fleet, make_integration, stop_after=60)
    held_keys = sorted(
        set(Incident.objects.filter(ranking_held=True).values_list("correlation_key", flat=True))
    )
    assert held_keys
    KEPT.clear()
    for key in held_keys:
        correlation_run(key=key, keep_state=True)
    assert runs()[-1] == "window"
    assert not Incident.objects.filter(ranking_held=True).exists()
    final = snapshot()
    assert final == recomputed()


def test_an_incident_grown_while_its_ranking_waits_keeps_its_times_severity_and_status(
    fleet, make_integration, monkeypatch
):
    """A held-back incident that only grew is written from what it stored and the alerts it
    gained (`grown_incident_changes`), not from all its alerts: after every run its latest
    start, severity and status are still what all its alerts give, and its alerts are where
    the engine put them."""
    from incidents.services.correlation import run, sync

    hold_big_rankings(monkeypatch)
    monkeypatch.setattr(run, "correlation_enqueue_later", lambda key, seconds: None)
    took: list[bool] = []
    grown_incident_changes = sync.grown_incident_changes

    def counted(incident, engine_incident, scope):
        changes = grown_incident_changes(incident, engine_incident, scope)
        took.append(changes is not None)
        return changes

    monkeypatch.setattr(sync, "grown_incident_changes", counted)
    alerts_hook, changes_hook = make_integration("alertmanager"), make_integration("events")
    pairs = [(changes_hook, body) for body in bodies(fleet / "changes.jsonl")]
    pairs += [(alerts_hook, body) for body in bodies(fleet / "alerts.jsonl")]
    for hook, body in pairs:
        receive(hook, body)
        correlate_pending()
        for incident in Incident.objects.filter(merged_into=None).prefetch_related("alerts"):
            alerts = list(incident.alerts.all())
            if not alerts:
                continue
            assert incident.last_alert_at == max(alert.starts_at for alert in alerts)
            assert incident.severity == sync.severity_of(alerts)
            firing = any(alert.status == Alert.Status.FIRING for alert in alerts)
            assert (incident.resolved_at is None) == firing, incident.title
    assert any(took) and not all(took)  # the incremental path was taken, and the whole one too
    assert (
        Incident.objects.filter(resolved_at__isnull=False).exists()
        and Incident.objects.filter(resolved_at=None).exists()
    )
    held = {members: values["classification"] for members, values in snapshot().items()}
    assert held == {members: values["classification"] for members, values in recomputed().items()}
