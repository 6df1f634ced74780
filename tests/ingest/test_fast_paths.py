"""The ingestion fast paths give the answers of the plain code they stand in for.

Parsing: the depth check on the parsed document, the C-speed check of string maps and the
remembered times against the original per-character and per-key code. Web: the short WSGI
path of `rootline.wsgi` against Django's full handler, the per-process integration cache
(disabled integrations stop being accepted), the retry of a dropped connection. Worker: the
batched drain (COPY on PostgreSQL) against processing one delivery at a time. Runs on SQLite and,
with DATABASE_URL, on PostgreSQL.
"""

from __future__ import annotations

import io
import json
import re
import sys
import threading
from datetime import UTC, datetime

import pytest
from hypothesis import given
from hypothesis import settings as hsettings
from hypothesis import strategies as st

from correlate.ingest import common

UTC = UTC


# Parsing -------------------------------------------------------------------------------------

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(alphabet='ab"\\[]{}\n', max_size=6),
    lambda children: (
        st.lists(children, max_size=3)
        | st.dictionaries(st.text(alphabet='k"[]{\\', max_size=3), children, max_size=3)
    ),
    max_leaves=40,
)


def deep(levels: int, inner: object = 1) -> object:
    document = inner
    for level in range(levels):
        document = [document] if level % 2 else {"k": document}
    return document


def verdict(check, argument) -> str:
    try:
        check(argument)
    except common.PayloadError as exc:
        return exc.message
    return "ok"


@hsettings(max_examples=300, deadline=None)
@given(json_values)
def test_depth_of_the_parsed_document_is_the_depth_of_its_text(document):
    text = json.dumps(document)
    assert verdict(common._check_parsed_depth, json.loads(text)) == verdict(common._check_depth, text)


@pytest.mark.parametrize("levels", [1, 63, 64, 65, 200])
def test_depth_limit_is_the_same_on_both_paths(levels):
    text = json.dumps(deep(levels, '[[["not structure"]]] \\" {'))
    assert verdict(common._check_parsed_depth, json.loads(text)) == verdict(common._check_depth, text)
    assert verdict(common.decode_json, text.encode()) == verdict(common._check_depth, text)


number_values = st.recursive(
    st.none()
    | st.booleans()
    | st.text(max_size=4)
    | st.floats()
    | st.integers()
    | st.integers(min_value=2**63 - 2, max_value=2**64 + 2).flatmap(lambda n: st.sampled_from([n, -n]))
    | st.integers(min_value=10**19, max_value=10**40),
    lambda children: (
        st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=3), children, max_size=3)
    ),
    max_leaves=30,
)


def typed(document):
    """A document with every value's type beside it (1 == 1.0 == True in Python)."""
    if isinstance(document, dict):
        return {key: typed(value) for key, value in document.items()}
    if isinstance(document, list):
        return [typed(value) for value in document]
    if isinstance(document, float) and document != document:
        return ("nan", float)
    return (document, type(document))


@hsettings(max_examples=400, deadline=None)
@given(number_values)
def test_a_body_reads_exactly_as_json_loads_reads_it(document):
    """orjson reads a body first (`_orjson_document`): integers past 64 bits, which it reads as
    floats, and NaN or infinities, which it refuses, still come out as json.loads has them."""
    text = json.dumps(document)
    assert typed(common.decode_json(text.encode())) == typed(json.loads(text))


@pytest.mark.parametrize(
    "text",
    [
        '{"truncatedAlerts": 18446744073709551616}',
        "[-9223372036854775809, 1e400, NaN]",
        '{"v": 0.1000000000000000055511151231257827}',
        '"\\ud800"',
        '{"a": 1, "a": 2}',
    ],
)
def test_numbers_orjson_reads_otherwise_read_as_json_loads_reads_them(text):
    assert typed(common.decode_json(text.encode())) == typed(json.loads(text))


def test_invalid_and_too_deep_says_too_deep_first():
    body = ("[" * 70 + "1,,").encode()
    with pytest.raises(common.PayloadError, match="nested deeper than 64"):
        common.decode_json(body)


label_text = st.lists(
    st.sampled_from(["a", "é", "\x00", "\ud800", "\udfff", " ", "x" * 300, "y" * 1100]), max_size=8
).map("".join)


@hsettings(max_examples=300, deadline=None)
@given(
    st.dictionaries(
        label_text,
        label_text | st.integers() | st.none() | st.lists(st.text(max_size=2), max_size=1),
        max_size=4,
    ),
    st.booleans(),
    st.sampled_from([5, 600, 16 * 1024]),
)
def test_string_map_fast_path_matches_key_by_key(mapping, truncate, limit):
    def run(fast: bool):
        original = common._clean_string_map
        if not fast:
            common._clean_string_map = lambda mapping, value_limit: None
        try:
            return common.string_map(mapping, "alerts[0].labels", value_limit=limit, truncate=truncate)
        except common.FieldError as exc:
            return ("error", exc.path, exc.error)
        finally:
            common._clean_string_map = original

    assert run(True) == run(False)


def test_remembered_times_still_report_errors_with_their_path():
    assert common.parse_time("2026-11-29T02:00:00Z", "a") == datetime(2026, 11, 29, 2, tzinfo=UTC)
    assert common.parse_time("2026-11-29T02:00:00Z", "b") == datetime(2026, 11, 29, 2, tzinfo=UTC)
    assert common.parse_time("0001-01-01T00:00:00Z", "c") is None
    for path in ("alerts[0].startsAt", "alerts[1].startsAt"):
        with pytest.raises(common.FieldError) as caught:
            common.parse_time("2026-13-01T00:00:00Z", path)
        assert caught.value.path == path
        with pytest.raises(common.FieldError, match="time before 1970"):
            common.parse_time("1969-12-31T23:59:59Z", path)
    with pytest.raises(common.FieldError, match="expected an RFC 3339 time string, got number"):
        common.parse_time(5, "d")


# The short web path --------------------------------------------------------------------------


def environ(
    path: str, body: bytes, *, token: str | None, method: str = "POST", host: str = "127.0.0.1:8000"
) -> dict:
    env = {
        "REQUEST_METHOD": method,
        "PATH_INFO": path,
        "SCRIPT_NAME": "",
        "QUERY_STRING": "",
        "SERVER_NAME": "127.0.0.1",
        "SERVER_PORT": "8000",
        "HTTP_HOST": host,
        "CONTENT_TYPE": "application/json",
        "CONTENT_LENGTH": str(len(body)),
        "HTTP_USER_AGENT": "Alertmanager/0.25.0",
        "wsgi.input": io.BytesIO(body),
        "wsgi.url_scheme": "http",
        "wsgi.errors": sys.stderr,
        "SERVER_PROTOCOL": "HTTP/1.1",
        "wsgi.multithread": True,
        "wsgi.multiprocess": True,
        "wsgi.run_once": False,
        "wsgi.version": (1, 0),
    }
    if token is not None:
        env["HTTP_AUTHORIZATION"] = f"Bearer {token}"
    return env


def call(app, env: dict) -> tuple[str, list, bytes]:
    answer: dict = {}

    def start_response(status, headers, exc_info=None):
        answer["status"], answer["headers"] = status, headers

    result = app(env, start_response)
    try:
        content = b"".join(result)
    finally:
        getattr(result, "close", lambda: None)()
    assert dict(answer["headers"]).get("Content-Length", str(len(content))) == str(len(content))
    headers = sorted(
        (name, value if name != "Content-Length" else "n")
        for name, value in answer["headers"]
        if name != "Expires"
    )
    return answer["status"], headers, re.sub(rb'"delivery": \d+', b'"delivery": N', content)


def am_body(*labels: dict, **alert: object) -> bytes:
    alerts = [{"labels": item, "startsAt": "2026-11-29T02:00:00Z", **alert} for item in labels]
    return json.dumps({"version": "4", "alerts": alerts}).encode()


@pytest.mark.django_db(transaction=True)
def test_short_path_answers_exactly_as_the_full_handler(wsgi, make_integration, settings):
    from incidents.models import Delivery

    settings.MAX_BODY = 4000
    integration = make_integration()
    events = make_integration("events")
    token = integration.plain_token
    n = iter(range(1000))
    cases = {
        "accepted, one rejected": lambda: environ(
            integration.path, am_body({"alertname": f"A{next(n)}"}, {}), token=token
        ),
        "nothing usable": lambda: environ(integration.path, b'{"alerts": 5}', token=token),
        "empty": lambda: environ(integration.path, b"", token=token),
        "not JSON": lambda: environ(integration.path, b"{'alerts': []}", token=token),
        "wrong token": lambda: environ(integration.path, am_body({"a": "b"}), token="wrong"),
        "no token": lambda: environ(integration.path, am_body({"a": "b"}), token=None),
        "unknown id": lambda: environ("/hooks/alertmanager/987654/", am_body({"a": "b"}), token=token),
        "other kind's path": lambda: environ(
            f"/hooks/grafana/{integration.pk}/", am_body({"a": "b"}), token=token
        ),
        "unknown kind": lambda: environ(f"/hooks/nagios/{integration.pk}/", am_body({"a": "b"}), token=token),
        "too large": lambda: environ(integration.path, b"x" * 5000, token=token),
        "events routing key": lambda: environ(
            events.path,
            json.dumps(
                {
                    "routing_key": events.plain_token,
                    "event_action": "trigger",
                    "dedup_key": f"k{next(n)}",
                    "payload": {"summary": "s", "source": "h", "severity": "error"},
                }
            ).encode(),
            token=None,
        ),
        "GET": lambda: environ(integration.path, b"", token=token, method="GET"),
        "no slash": lambda: environ(integration.path.rstrip("/"), am_body({"a": "b"}), token=token),
    }
    for name, make in cases.items():
        full, short = call(wsgi.django_application, make()), call(wsgi.application, make())
        assert short == full, name
    # Each body with nothing usable is kept once: the second handler got the same bytes, seen before.
    assert Delivery.objects.filter(status="rejected").count() == 3


@pytest.mark.django_db(transaction=True)
def test_short_path_refuses_a_host_django_refuses(wsgi, make_integration, settings):
    settings.ALLOWED_HOSTS = ["rootline.example"]
    integration = make_integration()
    status, _, content = call(
        wsgi.application,
        environ(integration.path, am_body({"a": "b"}), token=integration.plain_token, host="evil.example"),
    )
    assert status.startswith("400") and b"Bad Request" in content
    status, _, _ = call(
        wsgi.application,
        environ(
            integration.path, am_body({"a": "b"}), token=integration.plain_token, host="rootline.example"
        ),
    )
    assert status.startswith("202")


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize(
    "content_type",
    ["application/json; charset=\x00", "application/json; charset=utf\x00-8", "text/plain; charset=\x00x"],
)
def test_a_charset_with_a_nul_is_ignored_not_a_500_on_either_path(wsgi, make_integration, content_type):
    """`codecs.lookup` raises ValueError for a name holding a NUL, which Django's request did not
    expect (it catches LookupError): a 500 before any view ran, and the body lost."""
    from incidents.models import Delivery

    integration = make_integration()
    body = am_body({"alertname": "CharsetNul", "pod": "p-1"})
    for app in (wsgi.application, wsgi.django_application):  # the short webhook path and Django's own
        env = environ(integration.path, body, token=integration.plain_token)
        env["CONTENT_TYPE"] = content_type
        status, _, content = call(app, env)
        assert status.startswith("202"), (app, status, content[:300])
    assert bytes(Delivery.objects.get(integration=integration).body) == body  # kept once, as sent
    env = environ("/healthz", b"", token=None, method="GET")
    env["CONTENT_TYPE"] = content_type
    assert call(wsgi.application, env)[0].startswith("200")  # a page's request too


def test_the_asgi_request_ignores_a_charset_with_a_nul_too():
    import io

    from rootline.asgi import SenderSafeASGIRequest, application

    assert application.request_class is SenderSafeASGIRequest
    scope = {
        "type": "http",
        "method": "POST",
        "path": "/hooks/alertmanager/1/",
        "query_string": b"",
        "root_path": "",
        "headers": [(b"content-type", b"application/json; charset=\x00"), (b"host", b"127.0.0.1")],
    }
    request = SenderSafeASGIRequest(scope, io.BytesIO(b"{}"))
    assert request.content_type == "application/json" and "charset" not in request.content_params
    assert request.encoding is None  # Django's default (settings.DEFAULT_CHARSET) applies


@pytest.mark.django_db
def test_integration_cache_keeps_a_disabled_integration_only_for_its_ttl(
    make_integration, settings, monkeypatch
):
    from incidents.models import Integration
    from incidents.services import integrations

    settings.ROOTLINE_INTEGRATION_CACHE_SECONDS = 2
    clock = [1000.0]
    monkeypatch.setattr(integrations.time, "monotonic", lambda: clock[0])
    integration = make_integration()
    token = integration.plain_token

    def authenticate(secret: str = token):
        return integrations.integration_authenticate(
            integration_id=integration.pk, kind="alertmanager", token=secret
        )

    assert authenticate() is not None
    Integration.objects.filter(pk=integration.pk).update(is_active=False)  # another process: no signal here
    assert authenticate() is not None  # remembered
    assert authenticate("wrong") is None  # never from the cache
    clock[0] += 2.5
    assert authenticate() is None  # within ROOTLINE_INTEGRATION_CACHE_SECONDS
    Integration.objects.filter(pk=integration.pk).update(is_active=True)
    assert authenticate() is not None
    stored = Integration.objects.get(pk=integration.pk)
    stored.is_active = False
    stored.save()  # saved in this process: forgotten at once
    assert authenticate() is None


@pytest.mark.django_db
def test_integration_cache_off_and_new_token_at_once(make_integration, settings):
    from incidents.models import Integration, token_digest
    from incidents.services import integrations

    integration = make_integration()
    assert integrations.integration_authenticate(
        integration_id=integration.pk, kind="alertmanager", token=integration.plain_token
    )
    Integration.objects.filter(pk=integration.pk).update(token_digest=token_digest("rotated"))
    assert integrations.integration_authenticate(
        integration_id=integration.pk, kind="alertmanager", token="rotated"
    )
    settings.ROOTLINE_INTEGRATION_CACHE_SECONDS = 0
    integrations.INTEGRATIONS.clear()
    Integration.objects.filter(pk=integration.pk).update(is_active=False)
    assert (
        integrations.integration_authenticate(
            integration_id=integration.pk, kind="alertmanager", token="rotated"
        )
        is None
    )


@pytest.mark.django_db(transaction=True)
def test_a_dropped_connection_is_retried_once_and_stores_once(make_integration, post_hook):
    from django.db import OperationalError, connection

    from incidents.models import Delivery

    integration = make_integration()
    post_hook(integration, am_body({"alertname": "warm"}))  # the connection is now a reused one
    failures = []

    def dropped_once(execute, sql, params, many, context):
        if "incidents_delivery" in sql and sql.lstrip().upper().startswith("INSERT") and not failures:
            failures.append(sql)
            raise OperationalError("server closed the connection unexpectedly")
        return execute(sql, params, many, context)

    with connection.execute_wrapper(dropped_once):
        response = post_hook(integration, am_body({"alertname": "after"}))
    assert failures and response.status_code == 202, response.content
    assert Delivery.objects.filter(integration=integration).count() == 2


def test_drain_signals_cover_every_commit():
    """Every owe() is followed by a signal sent after it (from the one background thread)."""
    from incidents.flow import DrainSignals

    owed = [0]
    covered = [0]
    sent = threading.Event()
    lock = threading.Lock()

    def send():
        with lock:
            covered[0] = owed[0]
        sent.set()

    signals = DrainSignals(interval=0.01, send=send)

    def sender():
        for _ in range(200):
            with lock:
                owed[0] += 1
            signals.owe()

    threads = [threading.Thread(target=sender) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    for _ in range(500):
        if covered[0] == 800:
            break
        sent.wait(0.05)
        sent.clear()
    assert covered[0] == 800


# The worker ----------------------------------------------------------------------------------


def stored(integration) -> list[tuple]:
    from incidents.models import Alert

    return [
        (
            alert.starts_at,
            alert.status,
            alert.ends_at,
            alert.alertname,
            alert.labels,
            alert.annotations,
            alert.generator_url,
            alert.kind,
            alert.layer,
            alert.failure_mode,
            alert.correlation_key,
            alert.correlated,
            alert.classified_by,
            alert.false_positive,
            alert.incident_id,
        )
        for alert in Alert.objects.filter(integration=integration)
    ]


@pytest.mark.django_db
def test_batched_drain_stores_what_one_by_one_processing_stores(
    make_integration, django_capture_on_commit_callbacks, settings
):
    """Views of one occurrence in delivery order (firing, resolved, late firing), a rejected
    body, an Events API delivery in its place: the same rows, batched or not (fingerprints
    differ between the two sets: they hash labels that name the set)."""
    from incidents import services
    from incidents.models import Delivery

    settings.ROOTLINE_INGEST_DRAIN = True
    settings.CELERY_TASK_ALWAYS_EAGER = False
    received = datetime(2026, 11, 29, 3, tzinfo=UTC)

    def bodies(tag: str) -> list[tuple[str, bytes]]:
        fleet = {"cluster": f"c-{tag}", "namespace": "llm"}
        firing = [{"alertname": "KVCacheHigh", "pod": f"p{i}", **fleet} for i in range(3)]
        return [
            (
                "alertmanager",
                am_body(
                    *firing, status="firing", endsAt="0001-01-01T00:00:00Z", annotations={"summary": "high"}
                ),
            ),
            ("alertmanager", am_body(firing[0], status="resolved", endsAt="2026-11-29T02:30:00Z")),
            ("alertmanager", am_body(firing[0], firing[1], status="firing", annotations={"summary": "late"})),
            ("alertmanager", b'{"alerts": "none"}'),
            (
                "events",
                json.dumps(
                    {
                        "event_action": "trigger",
                        "dedup_key": f"d-{tag}",
                        "payload": {"summary": "disk", "source": "h1", "severity": "error"},
                    }
                ).encode(),
            ),
            ("alertmanager", am_body({"alertname": "OOM", "pod": "p9", **fleet}, status="firing")),
            ("events", json.dumps({"event_action": "resolve", "dedup_key": f"d-{tag}"}).encode()),
        ]

    def receive(tag: str):
        integrations = {kind: make_integration(kind) for kind in ("alertmanager", "events")}
        with django_capture_on_commit_callbacks(execute=False):
            for kind, body in bodies(tag):
                services.delivery_receive(
                    integration=integrations[kind], body=body, headers={}, received_at=received
                )
        return integrations

    one = receive("x")
    with django_capture_on_commit_callbacks(execute=False):
        for delivery in Delivery.objects.filter(status="pending").order_by("id"):
            services.delivery_process(delivery_id=delivery.pk)
    batched = receive("x2")
    with django_capture_on_commit_callbacks(execute=False):
        assert services.deliveries_drain() == 6  # the rejected body was never pending

    def normalised(integrations) -> list[tuple]:
        rows = stored(integrations["alertmanager"]) + stored(integrations["events"])
        return sorted(
            json.dumps(row, default=str, sort_keys=True).replace("c-x2", "c-x").replace("d-x2", "d-x")
            for row in rows
        )

    assert normalised(one) == normalised(batched)
    assert len(normalised(batched)) == 5
    assert not Delivery.objects.filter(status="pending").exists()
