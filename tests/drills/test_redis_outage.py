"""Redis (the broker and the shared cache) down for a minute: every delivery is accepted and
stored meanwhile (a rate-limited integration's too: the limit has nowhere to count, a page is
worth more), `/healthz` says the broker is what is down, and once Redis is back everything stored
meanwhile is enqueued and processed without waiting for beat's sweep (its default period here)."""

from __future__ import annotations

import time

import pytest
import redis
import requests

from tests.drills.conftest import TOKEN, tails
from tests.support.drill_traffic import Sender, cascade_alerts, grouped_bodies
from tests.support.drills import QUEUES, wait_for

pytestmark = [pytest.mark.services]

OUTAGE_SECONDS = 60


def broker_state(private_redis) -> dict[str, int]:
    """What waits in the broker: each queue's length, messages held unacknowledged, flags set."""
    client = redis.Redis(port=private_redis.port, socket_timeout=2)
    try:
        state = {queue: client.llen(queue) for queue in QUEUES.values()}
        state["unacked"] = client.hlen("unacked")
        state["flags"] = sum(1 for _ in client.scan_iter("*rootline:*", count=1000))
        return state
    except redis.RedisError as error:
        return {f"unreadable: {error}": 0}


def test_redis_down_a_minute_accepts_everything_and_drains_it_when_back(
    make_stack, private_redis, ledger_of, run_id
):
    # Beat's sweeps at their defaults (60 s, 120 s): what is processed within seconds of Redis
    # coming back was signalled by the web processes, not swept up.
    stack = make_stack(ROOTLINE_SWEEP_SECONDS="60", ROOTLINE_REQUEUE_AFTER_SECONDS="120")
    limited = stack.integration(token="limited-token", rate_limit=50)["url"]
    stack.web(workers=2)
    stack.workers(1)
    stack.beat()
    ledger = ledger_of(stack)
    t0 = time.time() - 60
    waves = [grouped_bodies(cascade_alerts(f"gpu-redis-{n:02d}", 4, t0, run_id)) for n in range(12)]
    expected = sum(len(cascade_alerts("x", 4, t0, run_id)) for _ in waves)

    before = Sender([stack.url(stack.hook)], TOKEN).send(waves[0])
    assert before.delivered == len(waves[0])
    wait_for(lambda: ledger.settled(len(cascade_alerts("x", 4, t0, run_id))), timeout=60, what="first wave")

    private_redis.stop()
    down_at = time.monotonic()
    clock = time.monotonic()
    health = requests.get(stack.url("/healthz"), timeout=10)
    health_seconds = time.monotonic() - clock
    assert health.status_code == 503 and health.json()["broker"].startswith("error")
    assert health.json()["database"] == "ok" and health_seconds < 5

    during = []
    for number, wave in enumerate(waves[1:]):
        url, token = (limited, "limited-token") if number % 2 else (stack.hook, TOKEN)
        during.append(Sender([stack.url(url)], token, give_up_after=0).send(wave))
        time.sleep(max(0.0, (number + 1) * OUTAGE_SECONDS / len(waves) - (time.monotonic() - down_at)))
    statuses: dict[int, int] = {}
    for sent in during:
        for status, count in sent.statuses().items():
            statuses[status] = statuses.get(status, 0) + count
    assert statuses == {202: sum(len(wave) for wave in waves[1:])}, statuses
    assert max(sent.percentile(1.0) for sent in during) < 5
    stored_meanwhile = ledger.deliveries()
    assert stored_meanwhile.get("pending", 0) == sum(len(wave) for wave in waves[1:]), stored_meanwhile
    time.sleep(max(0.0, OUTAGE_SECONDS - (time.monotonic() - down_at)))

    private_redis.start()
    back_at = time.monotonic()
    try:
        wait_for(lambda: ledger.settled(expected), timeout=150, what="everything stored meanwhile processed")
    except Exception:
        pytest.fail(
            f"{ledger.deliveries()} {ledger.uncorrelated()} uncorrelated; "
            f"broker: {broker_state(private_redis)}\n{tails(stack)}"
        )
    drained_after = time.monotonic() - back_at
    # The last bodies were stored just before Redis came back: beat's sweep (120 s old, every 60 s)
    # could not take them before 120 s; the worker's own reconnection backs off up to ~30 s.
    assert drained_after < 90, f"drained {drained_after:.0f} s after Redis came back: swept, not signalled"
    assert requests.get(stack.url("/healthz"), timeout=10).status_code == 200
    occurrences = ledger.occurrences()
    assert len(occurrences) == len(set(occurrences)) == expected
    assert ledger.duplicate_roots() == []
    assert sorted(len(ids) for ids in ledger.incidents_by_key().values()) == [1] * len(waves)
