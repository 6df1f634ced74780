"""An adversarial sweep of every interface of the contract that takes input: the webhooks (what
`tests/ingest/test_hostile_bodies.py` does not already cover: headers, ids, methods, content
types, credentials), every REST endpoint and query parameter, action and matrix bodies, the
pages that show what senders wrote, and the management commands that read a user's files.

Each case asserts what the contract promises: a 2xx or a 4xx in the error shape, never a 500;
a refused webhook body kept for replay; every sender-controlled text escaped in every page
(HTML, attributes, links, JSON embedded in the page). Run it on PostgreSQL: many of the inputs
(NUL, lone surrogates, out-of-range numbers) are aimed at it.
"""

from __future__ import annotations

import json
import re
from io import StringIO

import pytest
from django.contrib.auth.models import User
from django.core.management import CommandError, call_command

from incidents.evidence.points import labels_key, pack_points
from incidents.models import Alert, Delivery, EvidenceSeries, Incident, LocalSeries, PendingAction
from tests.incidents.conftest import DAY, FLEET, am_alert, am_body, cascade

pytestmark = pytest.mark.django_db

# Payloads a page must show as text: each one, unescaped, would run or inject something.
SCRIPT = "<script>alert('rootline-xss')</script>"
ATTRIBUTE = "\"><img src=x onerror=alert('rootline-attr')>"
SCRIPT_END = "</script><script>alert('rootline-json')</script>"
JS_LINK = "javascript:alert('rootline-link')"
RAW_MARKERS = ("<script>alert(", "<img src=x", "</script><script>")


def assert_escaped(html: str, where: str) -> None:
    """No hostile payload reached the page as markup, and no link or attribute runs script."""
    for marker in RAW_MARKERS:
        assert marker not in html, f"{where}: {marker!r} unescaped"
    lowered = html.lower()
    for attribute in ("href", "src", "action", "formaction"):
        assert not re.search(attribute + r"\s*=\s*[\"']?\s*javascript:", lowered), (
            f"{where}: a javascript: {attribute}"
        )


def error_of(response, status: int | tuple[int, ...], fragment: str = "") -> str:
    statuses = status if isinstance(status, tuple) else (status,)
    assert response.status_code in statuses, (response.status_code, response.content[:400])
    assert response["Content-Type"].startswith("application/json"), response["Content-Type"]
    body = response.json()
    assert "error" in body and isinstance(body["error"], str) and body["error"], body
    assert fragment in body["error"], body
    return body["error"]


# Webhooks: what the body corpus of tests/ingest leaves out ---------------------------------

GOOD_BODY = am_body(am_alert("VLLMKVCacheHigh", f"{DAY}T02:00:00Z", pod="vllm-0", cluster="c1"))


@pytest.mark.parametrize(
    "header,value",
    [
        ("HTTP_X_NUL", "a\x00b"),
        ("HTTP_USER_AGENT", "curl\x00/8"),
        ("HTTP_X_SURROGATE", "a\ud800b"),
        ("HTTP_X_LATIN1", "caf\xe9 \xff"),
        ("HTTP_X_HUGE", "h" * 100_000),
        ("HTTP_X_NUL_\x00NAME", "v"),
    ],
)
@pytest.mark.parametrize("body,status", [(GOOD_BODY, 202), (b"{not json", 400)])
def test_webhook_headers_postgresql_cannot_store_do_not_lose_the_body(
    make_integration, post_hook, header, value, body, status
):
    """Headers are kept with the delivery for debugging; one PostgreSQL cannot store (NUL, a lone
    surrogate: a proxy or a test client can pass either) must not cost the body itself."""
    integration = make_integration()
    response = post_hook(integration, body, **{header: value})
    assert response.status_code == status, response.content[:400]
    delivery = Delivery.objects.get(pk=response.json()["delivery"])
    assert bytes(delivery.body) == body
    assert all("\x00" not in key + text for key, text in delivery.headers.items())


@pytest.mark.parametrize(
    "path,status",
    [
        ("/hooks/nagios/1/", 404),
        ("/hooks/alertmanager/99999999999999999999/", 401),
        ("/hooks/alertmanager/0/", 401),
        ("/hooks/alertmanager/-1/", 404),
        ("/hooks/alertmanager/abc/", 404),
        ("/hooks/%3Cscript%3E/1/", 404),
    ],
)
def test_webhook_paths_that_name_nothing(client, path, status):
    response = client.post(path, GOOD_BODY, content_type="application/json", HTTP_AUTHORIZATION="Bearer x")
    assert response.status_code == status
    if "<script>" in response.content.decode("utf-8", "replace"):  # the kind named back, in JSON only
        assert response["Content-Type"] == "application/json"


@pytest.mark.parametrize(
    "authorization",
    [
        "",
        "Bearer",
        "Bearer ",
        "Bearer  ",
        "bearer wrong",
        "Basic dXNlcjpwYXNz",
        "Token x",
        "Bearer \x00",
        "Bearer \ud800",
        "Bearer " + "t" * 100_000,
        "Bearer caf\xe9",
        "\x00",
        "Bearer a b c",
    ],
)
def test_webhook_bad_authorization_is_a_401_storing_nothing(make_integration, client, authorization):
    integration = make_integration()
    extra = {"HTTP_AUTHORIZATION": authorization} if authorization else {}
    response = client.post(integration.path, GOOD_BODY, content_type="application/json", **extra)
    error_of(response, 401, "token")
    assert not Delivery.objects.exists()


def test_webhook_token_of_another_integration_or_kind_is_a_401(make_integration, client):
    alertmanager, grafana = make_integration(), make_integration("grafana")
    for path, token in (
        (alertmanager.path, grafana.plain_token),
        (f"/hooks/grafana/{alertmanager.pk}/", alertmanager.plain_token),
    ):
        error_of(
            client.post(
                path, GOOD_BODY, content_type="application/json", HTTP_AUTHORIZATION=f"Bearer {token}"
            ),
            401,
        )


@pytest.mark.parametrize("method", ["GET", "PUT", "PATCH", "DELETE", "OPTIONS", "HEAD"])
def test_webhook_other_methods_are_405s(make_integration, client, method):
    integration = make_integration()
    response = client.generic(
        method, integration.path, GOOD_BODY, HTTP_AUTHORIZATION=f"Bearer {integration.plain_token}"
    )
    assert response.status_code == 405


@pytest.mark.parametrize(
    "content_type",
    [
        "text/plain",
        "application/x-www-form-urlencoded",
        "multipart/form-data; boundary=xyz",
        "multipart/form-data",
        "application/json; charset=latin-1",
        "application/json; charset=nope",
        "",
        "application/xml",
    ],
)
def test_webhook_content_type_does_not_matter_the_body_does(make_integration, post_hook, content_type):
    integration = make_integration()
    response = post_hook(integration, GOOD_BODY, CONTENT_TYPE=content_type)
    assert response.status_code == 202, response.content[:400]
    assert response.json()["accepted"] == 1


@pytest.mark.parametrize("content_length", ["-1", "-99999999999999999999", "abc", "1e3", " 12 ", "0"])
def test_webhook_odd_content_length_is_never_a_500(make_integration, post_hook, content_length):
    integration = make_integration()
    response = post_hook(integration, GOOD_BODY, CONTENT_LENGTH=content_length)
    assert response.status_code in (202, 400, 413), response.content[:400]
    if response.status_code == 400:
        delivery = Delivery.objects.get(pk=response.json()["delivery"])
        assert delivery.status == Delivery.Status.REJECTED


def test_webhook_gzip_body_is_refused_and_kept(make_integration, post_hook):
    import gzip

    integration = make_integration()
    body = gzip.compress(GOOD_BODY)
    response = post_hook(integration, body, HTTP_CONTENT_ENCODING="gzip")
    error_of(response, 400, "body")
    assert bytes(Delivery.objects.get(pk=response.json()["delivery"]).body) == body


@pytest.mark.parametrize(
    "body",
    [
        b'{"version": "4", "alerts": [{"labels": {"alertname": "A", "pod": NaN}, '
        b'"startsAt": "2026-11-29T02:00:00Z"}]}',
        b'{"version": "4", "alerts": [{"labels": {"alertname": "A"}, "startsAt": Infinity}]}',
        b'{"version": "4", "alerts": [], "alerts": {"x": 1}}',
        b'{"version": "4", "alerts": [{"labels": {"alertname": "A", "alertname": 5}, '
        b'"startsAt": "2026-11-29T02:00:00Z"}]}',
        b'{"version": "4", "alerts": [{"labels": {"alertname": "A"}, "startsAt": "0000-01-01T00:00:00Z"}]}',
        b'{"version": "4", "alerts": [{"labels": {"alertname": "A"}, "startsAt": "99999-01-01T00:00:00Z"}]}',
        b'{"version": "4", "alerts": [{"labels": {"alertname": "A"}, "startsAt": "1e20"}]}',
        b'{"version": "4", "alerts": [{"labels": {"alertname": "A"}, "startsAt": 1e20}]}',
        b'{"version": "4", "alerts": [{"labels": {"alertname": "A"}, "startsAt": "2026-11-29T24:00:00Z"}]}',
        b'{"version": "4", "alerts": [{"labels": {"alertname": "A"}, "startsAt": "2026-11-29T02:00:60Z"}]}',
        b'{"version": "4", "alerts": [[[[[]]]]]}',
        b'{"version": "4", "alerts": [null, true, 1.5, "x", []]}',
        b'{"version": ["4"], "alerts": []}',
        b'{"version": {"4": 4}, "alerts": []}',
    ],
)
def test_webhook_more_wrong_types_and_times_are_400s_that_keep_the_body(make_integration, post_hook, body):
    integration = make_integration()
    response = post_hook(integration, body)
    error_of(response, 400)
    delivery = Delivery.objects.get(pk=response.json()["delivery"])
    assert delivery.status == Delivery.Status.REJECTED and bytes(delivery.body) == body


@pytest.mark.parametrize(
    "kind,body",
    [
        (
            "events",
            json.dumps(
                {
                    "routing_key": "r",
                    "event_action": "trigger",
                    "payload": {"summary": "s", "source": "x", "timestamp": "0000-01-01T00:00:00Z"},
                }
            ),
        ),
        ("events", json.dumps({"event_action": "trigger", "payload": {"summary": "s", "timestamp": 1e20}})),
        (
            "events",
            json.dumps(
                {
                    "event_action": "trigger",
                    "payload": {"summary": "s", "custom_details": {"x": float("nan")}},
                    "links": [{"href": JS_LINK}],
                    "client_url": JS_LINK,
                }
            ),
        ),
        ("events", json.dumps({"event_action": "trigger", "payload": {"summary": ["s"]}})),
        ("events", json.dumps({"event_action": "trigger", "payload": {"summary": "s", "source": {"a": 1}}})),
        ("events", json.dumps({"event_action": "trigger", "dedup_key": 12345, "payload": {"summary": "s"}})),
        ("events", json.dumps({"event_action": "trigger", "dedup_key": ["k"], "payload": {"summary": "s"}})),
        ("events", json.dumps({"event_action": "trigger", "payload": None})),
        ("events", json.dumps([[{"event_action": "trigger"}]])),
        ("events", b"[" * 50_000 + b"]" * 50_000),
        ("events", b'{"payload": ' * 3000 + b"1" + b"}" * 3000),
        (
            "grafana",
            json.dumps(
                {
                    "version": "1",
                    "alerts": [
                        {
                            "labels": {"alertname": "G"},
                            "startsAt": "2026-11-29T02:00:00Z",
                            "values": {"B": float("inf")},
                            "dashboardURL": JS_LINK,
                        }
                    ],
                }
            ),
        ),
        ("grafana", b"[" * 50_000),
        ("alertmanager", b"{" * 50_000),
        ("alertmanager", b'{"alerts": ' * 5000 + b"[]" + b"}" * 5000),
    ],
)
def test_webhook_event_and_grafana_oddities_are_never_a_500(make_integration, post_hook, kind, body):
    integration = make_integration(kind)
    response = post_hook(integration, body)
    assert response.status_code in (202, 400), response.content[:400]
    delivery = Delivery.objects.get(pk=response.json()["delivery"])
    assert bytes(delivery.body) == (body if isinstance(body, bytes) else body.encode())


# Pages: what senders wrote is shown as text ----------------------------------------------


def hostile_cascade() -> list[dict]:
    """The canonical cascade, its labels and annotations carrying markup, links and script."""
    rows = cascade()
    for index, row in enumerate(rows):
        row["labels"]["container"] = SCRIPT
        row["labels"]["pod"] = row["labels"].get("pod", f"pod-{index}") + ATTRIBUTE
        row["labels"]["model_name"] = SCRIPT_END
        row["annotations"] = {
            "summary": SCRIPT + ATTRIBUTE,
            "description": SCRIPT_END,
            "runbook_url": JS_LINK
            if index % 3 == 0
            else (
                "JavaScript:alert(1)" if index % 3 == 1 else "http://x/\"onmouseover=\"alert('rootline-attr')"
            ),
        }
        row["generatorURL"] = JS_LINK
    rows.append(
        am_alert(
            SCRIPT,
            f"{DAY}T02:04:00Z",
            pod=ATTRIBUTE,
            **{**FLEET, "namespace": SCRIPT_END},
            annotations={"summary": SCRIPT, "runbook": JS_LINK},
        )
    )
    rows.append(
        am_alert("A" * 300, f"{DAY}T02:04:10Z", **FLEET)
    )  # a name too long to be a runbook's file name
    rows.append(
        am_alert(
            "Evil" + ATTRIBUTE,
            f"{DAY}T02:04:30Z",
            cluster=SCRIPT,
            pod=SCRIPT_END,
            annotations={"summary": ATTRIBUTE, "runbook_url": " javascript:alert(2)"},
        )
    )
    return rows


@pytest.fixture
def hostile_incidents(make_integration, deliver, users, client) -> list[Incident]:
    integration = make_integration()
    for row in hostile_cascade():
        assert deliver(integration, am_body(row)).status_code == 202
    # A refused delivery whose error quotes the sender (shown on the triage and alerts pages).
    refused = deliver(integration, json.dumps({"version": SCRIPT, "alerts": []}).encode())
    assert refused.status_code == 400
    grafana = make_integration("grafana")
    assert (
        deliver(
            grafana,
            json.dumps(
                {
                    "version": "1",
                    "alerts": [
                        {
                            "labels": {"alertname": "GrafanaEvil", "cluster": "prod-eu", "pod": SCRIPT},
                            "startsAt": f"{DAY}T02:06:00Z",
                            "dashboardURL": JS_LINK,
                            "panelURL": "http://g/" + ATTRIBUTE,
                            "values": {SCRIPT: 1},
                        }
                    ],
                }
            ).encode(),
        ).status_code
        == 202
    )
    events = make_integration("events")
    assert (
        deliver(
            events,
            json.dumps(
                {
                    "event_action": "trigger",
                    "dedup_key": "evil",
                    "client_url": JS_LINK,
                    "payload": {
                        "summary": SCRIPT,
                        "source": ATTRIBUTE,
                        "severity": "critical",
                        "custom_details": {"cluster": "prod-eu", "alertname": SCRIPT_END},
                    },
                }
            ).encode(),
        ).status_code
        == 202
    )
    assert (
        deliver(
            events,
            json.dumps(
                {
                    "payload": {
                        "summary": "deploy " + SCRIPT,
                        "source": SCRIPT_END,
                        "timestamp": f"{DAY}T01:59:00Z",
                        "custom_details": {"cluster": "prod-eu"},
                    }
                }
            ).encode(),
        ).status_code
        == 202
    )
    incidents = list(Incident.objects.order_by("pk"))
    assert incidents
    # People's words and evidence labels are sender-controlled too.
    responder = users("<b>" + SCRIPT, "author")
    client.force_login(responder)
    for incident in incidents:
        for body in (
            {"action": "note", "text": SCRIPT + ATTRIBUTE + SCRIPT_END},
            {"action": "assign", "username": responder.username},
        ):
            assert (
                client.post(
                    f"/api/v1/incidents/{incident.pk}/actions/",
                    json.dumps(body),
                    content_type="application/json",
                ).status_code
                == 200
            )
        assert (
            client.patch(
                f"/api/v1/incidents/{incident.pk}/matrix/",
                json.dumps(
                    {
                        "layer": "engine",
                        "direct_cause": {"text": SCRIPT_END, "evidence": [{"kind": "alert", "id": SCRIPT}]},
                    }
                ),
                content_type="application/json",
            ).status_code
            == 200
        )
        start = incident.started_at.timestamp()
        EvidenceSeries.objects.create(
            incident=incident,
            signal="kv_pool_usage",
            query=SCRIPT,
            labels={"pod": SCRIPT_END, "node": SCRIPT},
            labels_key=labels_key({"pod": SCRIPT_END}),
            step_seconds=15.0,
            start=incident.started_at,
            end=incident.started_at,
            points=pack_points([(start + 15 * i, 0.5 + i / 100) for i in range(20)]),
            point_count=20,
            source="import",
            fetched_at=incident.started_at,
        )
    return incidents


def admin_user() -> User:
    return User.objects.create_superuser("root-" + str(User.objects.count()), "r@example.com", "pw")


def test_pages_show_hostile_sender_text_escaped(hostile_incidents, client):
    client.force_login(admin_user())
    pages = ["/", "/?status=all", "/?status=resolved", "/alerts/"]
    for incident in hostile_incidents:
        pages += [f"/incidents/{incident.pk}/", f"/incidents/{incident.pk}/evidence/"]
    pages += [
        "/admin/incidents/alert/",
        "/admin/incidents/delivery/",
        "/admin/incidents/pendingaction/",
        "/admin/auth/user/",
    ]
    pages += [f"/admin/incidents/alert/{pk}/change/" for pk in Alert.objects.values_list("pk", flat=True)]
    pages += [
        f"/admin/incidents/delivery/{pk}/change/" for pk in Delivery.objects.values_list("pk", flat=True)
    ]
    seen = ""
    for page in pages:
        response = client.get(page)
        assert response.status_code == 200, (page, response.status_code)
        html = response.content.decode()
        assert_escaped(html, page)
        seen += html
    # The payloads did reach the pages, as text.
    assert "&lt;script&gt;alert(&#x27;rootline-xss&#x27;)&lt;/script&gt;" in seen
    assert (
        "\\u0026lt;/script\\u0026gt;\\u0026lt;script\\u0026gt;alert" in seen
    )  # chart labels: escaped, in json_script


def test_the_api_returns_hostile_text_verbatim_as_json(hostile_incidents, client):
    client.force_login(admin_user())
    alerts = client.get("/api/v1/alerts/?page_size=500").json()["results"]
    assert any(alert["annotations"].get("summary") == SCRIPT + ATTRIBUTE for alert in alerts)
    for incident in hostile_incidents:
        for path in (
            f"/api/v1/incidents/{incident.pk}/",
            f"/api/v1/incidents/{incident.pk}/timeline/",
            f"/api/v1/incidents/{incident.pk}/matrix/",
        ):
            response = client.get(path)
            assert response.status_code == 200 and response["Content-Type"] == "application/json", path


def test_a_runbook_link_is_only_ever_http(hostile_incidents, client):
    client.force_login(admin_user())
    for incident in hostile_incidents:
        html = client.get(f"/incidents/{incident.pk}/").content.decode()
        for href in re.findall(r'href="([^"]*)"', html):
            assert href.startswith(("/", "http://", "https://", "#", "?")), href


@pytest.mark.parametrize(
    "path",
    [
        "/runbooks/%3Cscript%3E/",
        "/runbooks/..%2F..%2Fetc%2Fpasswd/",
        "/runbooks/" + "A" * 5000 + "/",
        "/runbooks/A%00B/",
        "/incidents/99999999999999999999/",
        "/incidents/99999999999999999999/evidence/",
        "/incidents/0/",
        "/?status=%3Cscript%3E",
        "/?status=%00",
        "/?q=%00",
        "/?q=%23%00",
        "/?q=%2399999999999999999999999",
        "/?cluster=%00&model=%3Cscript%3E&layer=%22%5D&failure_mode=%25&severity=%00&mine=1",
        "/?q=" + "x" * 5000,
        "/?q=%ED%A0%80",
        "/postmortems/?status=%00&overdue=%3Cscript%3E",
        "/remediations/?tab=%3Cscript%3E&status=%00&owner=%00",
        "/remediations/?owner=" + "x" * 5000,
        "/incidents/0/postmortem/",
        "/incidents/99999999999999999999/postmortem/print/",
        "/incidents/0/postmortem/diff/?a=%00&b=abc",
        "/api/v1/postmortems/?status=%00",
        "/api/v1/postmortems/?incident=abc",
        "/api/v1/remediations/?overdue=maybe",
        "/api/v1/remediations/?due_before=yesterday",
        "/api/v1/remediations/?owner=%00",
        "/api/v1/postmortems/99999999999999999999/revisions/99999999999999999999/",
        "/alerts/?x=%00",
        "/assets/plotly-%3Cscript%3E.min.js",
        "/admin/incidents/alert/?q=%00",
        "/admin/incidents/alert/?q=" + "x" * 5000,
        "/admin/incidents/alert/?status=%00",
        "/admin/incidents/alert/?integration__id__exact=99999999999999999999",
        "/admin/incidents/alert/?id__gt=abc",
        "/admin/incidents/alert/99999999999999999999/change/",
        "/admin/incidents/alert/abc/change/",
        "/admin/incidents/delivery/?q=%00",
        "/admin/incidents/pendingaction/?state=%00",
        "/admin/incidents/alert/?o=99",
        "/admin/incidents/alert/?p=-1",
        "/admin/incidents/alert/?p=99999999999999999999",
    ],
)
def test_page_urls_and_query_strings_are_never_a_500(incident, client, path):
    client.force_login(admin_user())
    response = client.get(path)
    assert response.status_code < 500, (path, response.status_code)
    assert_escaped(response.content.decode("utf-8", "replace"), path)


@pytest.mark.parametrize(
    "form",
    [
        {"action": "note", "text": "x\x00y"},
        {"action": "note", "text": "x" * 30_000},
        {"action": "<script>"},
        {"action": "merge", "into": "99999999999999999999"},
        {"action": "merge", "into": "-1"},
        {"action": "split", "alert_ids": "1"},
        {"action": "exclude_alert", "alert_id": "99999999999999999999"},
        {"action": "assign", "username": SCRIPT},
        {"action": "severity", "level": SCRIPT},
        {"action": "acknowledge", "at": "0000-01-01T00:00:00Z"},
        {"action": "acknowledge", "at": "99999-01-01T00:00:00Z"},
        {"action": "acknowledge", "bogus\x00": "1"},
        {},
    ],
)
def test_incident_page_forms_with_hostile_fields_redirect_with_a_message(incident, users, client, form):
    client.force_login(users("r", "responder"))
    response = client.post(f"/incidents/{incident.pk}/act/", form)
    assert response.status_code == 302, response.content[:300]
    page = client.get(response["Location"])
    assert page.status_code == 200
    assert_escaped(page.content.decode(), "incident page after a form")


# REST API: query parameters and ids -------------------------------------------------------

QUERIES = [
    "/api/v1/alerts/?status=%3Cscript%3E",
    "/api/v1/alerts/?status=firing&status=bogus",
    "/api/v1/alerts/?status=FIRING",
    "/api/v1/alerts/?fingerprint=" + "f" * 20_000,
    "/api/v1/alerts/?fingerprint=%ED%A0%80",
    "/api/v1/alerts/?fingerprint=%FF%FE",
    "/api/v1/alerts/?label=" + "k" * 5000 + ":v",
    "/api/v1/alerts/?label=pod:" + "v" * 50_000,
    "/api/v1/alerts/?label=:",
    "/api/v1/alerts/?label=%ED%A0%80:x",
    "/api/v1/alerts/?label=a:b:c",
    "/api/v1/alerts/?label=a%22%7D:b",
    "/api/v1/alerts/?since=0000-01-01T00:00:00Z",
    "/api/v1/alerts/?since=0001-01-01T00:00:00Z",
    "/api/v1/alerts/?since=99999-01-01T00:00:00Z",
    "/api/v1/alerts/?since=9999-12-31T23:59:59Z",
    "/api/v1/alerts/?since=9999-12-31T23:59:59-23:59",
    "/api/v1/alerts/?since=1e20",
    "/api/v1/alerts/?since=-1",
    "/api/v1/alerts/?since=1969-12-31T23:59:59Z",
    "/api/v1/alerts/?since=2026-02-30T00:00:00Z",
    "/api/v1/alerts/?since=2026-11-29T00:00:00%2B99:99",
    "/api/v1/alerts/?since=%00",
    "/api/v1/incidents/?since=99999-01-01T00:00:00Z",
    "/api/v1/incidents/?status=%ED%A0%80",
    "/api/v1/incidents/?page=1e3",
    "/api/v1/incidents/?page=1.5",
    "/api/v1/incidents/?page=%EF%BC%91",  # fullwidth 1
    "/api/v1/incidents/?page=99999999999999999999",
    "/api/v1/incidents/?page=999999999999999999",
    "/api/v1/incidents/?page_size=1.5",
    "/api/v1/incidents/?page_size=%EF%BC%95",
    "/api/v1/incidents/?page_size=",
    "/api/v1/incidents/?page=last&page_size=500",
    "/api/v1/incidents/?page=",
    "/api/v1/incidents/?page=0x10",
    "/api/v1/incidents/?format=api",
    "/api/v1/incidents/?format=xml",
    "/api/v1/incidents/?format=%3Cscript%3E",
    "/api/v1/incidents/?format=",
    "/api/v1/schema/?format=%3Cscript%3E",
    "/api/v1/schema/?lang=%3Cscript%3E",
    "/api/v1/schema/?lang=%00",
    "/api/v1/schema/?lang=" + "x" * 5000,
    "/api/v1/incidents/0/",
    "/api/v1/incidents/-1/",
    "/api/v1/incidents/1e3/",
    "/api/v1/incidents/9223372036854775808/",
    "/api/v1/incidents/9223372036854775807/",
    "/api/v1/incidents/99999999999999999999/timeline/",
    "/api/v1/incidents/99999999999999999999/matrix/",
    "/api/v1/incidents/{id}/?page=2",
    "/api/v1/incidents/{id}/timeline/?since=x",
    "/api/v1/incidents/{id}/matrix/?" + "a" * 10_000 + "=1",
    "/api/v1/alerts/?" + "&".join(f"label=k{i}:v" for i in range(300)),
]


@pytest.mark.parametrize("query", QUERIES)
def test_api_query_parameters_and_ids_are_never_a_500(incident, users, client, query):
    client.force_login(users("v", "viewer"))
    response = client.get(query.format(id=incident.pk))
    assert response.status_code < 500, (query[:120], response.status_code, response.content[:300])
    if response.status_code >= 400 or "/schema/" not in query:  # the schema is served as OpenAPI
        assert response["Content-Type"].startswith("application/json"), response["Content-Type"]
    if response.status_code >= 400:
        assert set(response.json()) == {"error"} and len(response.json()["error"]) < 400


@pytest.mark.parametrize(
    "authorization",
    [
        "Token",
        "Token ",
        "Token a b",
        "Token \x00",
        "Token abc\x00def",
        "Token \ud800",
        "Token " + "t" * 100_000,
        "Token caf\xe9",
        "Bearer abc",
        "Basic dXNlcjpwYXNz",
        "token lowercase",
        "\x00",
        "Token\ttab",
    ],
)
def test_api_bad_authorization_is_a_401(client, authorization):
    response = client.get("/api/v1/incidents/", HTTP_AUTHORIZATION=authorization)
    error_of(response, 401)


# REST API: action and matrix bodies -------------------------------------------------------

RAW_BODIES = [
    (b"", "application/json"),
    (b"null", "application/json"),
    (b"[]", "application/json"),
    (b"42", "application/json"),
    (b'"acknowledge"', "application/json"),
    (b'{"action": NaN}', "application/json"),
    (b'{"action": Infinity}', "application/json"),
    (b"\xff\xfe{}", "application/json"),
    (b'{"action": "note", "text": "\xff"}', "application/json"),
    (b"[" * 5000 + b"]" * 5000, "application/json"),
    (b'{"a":' * 5000 + b"1" + b"}" * 5000, "application/json"),
    (b"[" * 900 + b"]" * 900, "application/json"),
    (b'{"a":' * 900 + b"1" + b"}" * 900, "application/json"),
    (b"1" * 5000, "application/json"),
    (b'{"action": "note", "text": ' + b"9" * 5000 + b"}", "application/json"),
    (b'{"action": "acknowledge", "action": "resolve"}', "application/json"),
    (b"action=acknowledge", "text/plain"),
    (b"action=acknowledge&at=%00", "application/x-www-form-urlencoded"),
    (b"action=note&text=a%00b", "application/x-www-form-urlencoded"),
    (b"action=merge&into=1", "application/x-www-form-urlencoded"),
    (
        b'--xyz\r\nContent-Disposition: form-data; name="action"\r\n\r\nnote\r\n'
        b"--xyz\r\nContent-Disposition: form-data; "
        b'name="text"; filename="a.txt"\r\nContent-Type: text/plain\r\n\r\nhello\r\n--xyz--\r\n',
        "multipart/form-data; boundary=xyz",
    ),
    (b"--xyz\r\ngarbage", "multipart/form-data; boundary=xyz"),
    (b"x", "multipart/form-data"),
    (b'{"action": "acknowledge"}', "application/json; charset=utf-16"),
    (b'{"action": "acknowledge"}', "application/json; charset=nope"),
    (b'{"action": "acknowledge"}', "application/xml"),
    (b'{"action": "acknowledge"}', ""),
]


@pytest.mark.parametrize("body,content_type", RAW_BODIES)
@pytest.mark.parametrize("endpoint", ["actions", "matrix"])
def test_action_and_matrix_raw_bodies_are_never_a_500(incident, users, client, body, content_type, endpoint):
    client.force_login(users("a", "author"))
    method = "POST" if endpoint == "actions" else "PATCH"
    response = client.generic(
        method, f"/api/v1/incidents/{incident.pk}/{endpoint}/", body, content_type=content_type
    )
    assert response.status_code < 500, (response.status_code, response.content[:400])
    assert response["Content-Type"].startswith("application/json")
    if response.status_code >= 400:
        assert set(response.json()) == {"error"}


BIG = 2**70
ACTION_BODIES = [
    {"action": ["acknowledge"]},
    {"action": {"acknowledge": 1}},
    {"action": None},
    {"action": 1},
    {"action": "ACKNOWLEDGE"},
    {"action": "acknowledge\x00"},
    {"action": "acknowledge", "at": "0000-01-01T00:00:00Z"},
    {"action": "acknowledge", "at": "99999-01-01T00:00:00Z"},
    {"action": "acknowledge", "at": 1e20},
    {"action": "acknowledge", "at": "1e20"},
    {"action": "acknowledge", "at": "\ud800"},
    {"action": "acknowledge", "at": "2026-11-29T02:00:00+99:00"},
    {"action": "acknowledge", "at": ["2026-11-29T02:00:00Z"]},
    {"action": "acknowledge", "at": "1970-01-01T00:00:00Z"},
    {"action": "acknowledge", "at": {"$gt": ""}},
    {"action": "assign", "username": None},
    {"action": "assign", "username": 5},
    {"action": "assign", "username": "u\x00"},
    {"action": "assign", "username": "\ud800"},
    {"action": "assign", "username": "x" * 100_000},
    {"action": "assign", "username": [SCRIPT]},
    {"action": "note", "text": "\ud83d"},
    {"action": "note", "text": "x" * 20_001},
    {"action": "note", "text": {"a": "\x00"}},
    {"action": "note", "text": ["a", "\x00"]},
    {"action": "note", "text": " \n\t "},
    {"action": "note", "text": 1e308},
    {"action": "severity", "level": "CRITICAL"},
    {"action": "severity", "level": ["critical"]},
    {"action": "severity", "level": {}},
    {"action": "degrade", "level": "L4"},
    {"action": "degrade", "level": None},
    {"action": "degrade", "level": "l1"},
    {"action": "merge", "into": BIG},
    {"action": "merge", "into": -BIG},
    {"action": "merge", "into": -1},
    {"action": "merge", "into": 0},
    {"action": "merge", "into": 1.0},
    {"action": "merge", "into": 1e300},
    {"action": "merge", "into": "1"},
    {"action": "merge", "into": True},
    {"action": "merge", "into": 9223372036854775807},
    {"action": "merge", "into": 9223372036854775808},
    {"action": "merge", "into": [1]},
    {"action": "split", "alert_ids": []},
    {"action": "split", "alert_ids": "1"},
    {"action": "split", "alert_ids": [BIG]},
    {"action": "split", "alert_ids": [-BIG, BIG]},
    {"action": "split", "alert_ids": [9223372036854775808]},
    {"action": "split", "alert_ids": [True]},
    {"action": "split", "alert_ids": [[1]]},
    {"action": "split", "alert_ids": [None]},
    {"action": "split", "alert_ids": list(range(10**9, 10**9 + 70_000))},
    {"action": "split", "alert_ids": {"0": 1}},
    {"action": "exclude_alert", "alert_id": BIG},
    {"action": "exclude_alert", "alert_id": -1},
    {"action": "exclude_alert"},
    {"action": "exclude_alert", "alert_id": "1"},
    {"action": "false_positive", "alert_id": 9223372036854775808},
    {"action": "false_positive", "alert_id": 1.5},
    {"action": "refresh_evidence", "x": 1},
    {"action": "resolve", "\x00": 1},
    {"action": "resolve", "\ud800": 1},
    {"action": "resolve", "k" * 10_000: 1},
    {"action": "note", "text": "ok", "at": "\x00"},
]


@pytest.mark.parametrize("body", ACTION_BODIES, ids=[f"action-{i}" for i in range(len(ACTION_BODIES))])
def test_action_bodies_get_a_4xx_naming_the_field(incident, users, client, body):
    client.force_login(users("r", "responder"))
    text = json.dumps(body)  # lone surrogates become \ud800 escapes, as a client would send them
    response = client.post(f"/api/v1/incidents/{incident.pk}/actions/", text, content_type="application/json")
    error_of(response, (400, 409))
    assert len(response.json()["error"]) < 600


MATRIX_BODIES = [
    {"layer": {"engine": 1}},
    {"layer": ["engine"]},
    {"layer": None},
    {"layer": "engine\x00"},
    {"layer": "ENGINE", "direct_cause": "x"},
    {"layer": "engine", "direct_cause": None},
    {"layer": "engine", "direct_cause": 5},
    {"layer": "engine", "direct_cause": ["x"]},
    {"layer": "engine", "direct_cause": {"text": None}},
    {"layer": "engine", "direct_cause": {"text": "x" * 5001}},
    {"layer": "engine", "direct_cause": {"text": "x", "evidence": "alert:1"}},
    {"layer": "engine", "direct_cause": {"text": "x", "evidence": [{"kind": "alert", "id": 1.5}]}},
    {"layer": "engine", "direct_cause": {"text": "x", "evidence": [{"kind": ["alert"], "id": 1}]}},
    {"layer": "engine", "direct_cause": {"text": "x", "evidence": [{"kind": "alert", "id": "x" * 201}]}},
    {"layer": "engine", "direct_cause": {"text": "x", "evidence": [{"kind": "alert", "id": 1}] * 201}},
    {"layer": "engine", "direct_cause": {"text": "x", "evidence": [{"kind": "alert", "id": {"x": "\x00"}}]}},
    {"layer": "engine", "direct_cause": {"text": "x", "edited_by": "\x00"}},
    {"layer": "engine", "direct_cause": {"text": "x\x00"}},
    {"layer": "engine", "bogus": "x"},
    {"layer": "engine"},
    [],
    [None],
    [[{"layer": "engine"}]],
    {"layer": "engine", "\x00": 1},
]


@pytest.mark.parametrize("body", MATRIX_BODIES, ids=[f"matrix-{i}" for i in range(len(MATRIX_BODIES))])
def test_matrix_bodies_get_a_400(incident, users, client, body):
    client.force_login(users("a", "author"))
    response = client.patch(
        f"/api/v1/incidents/{incident.pk}/matrix/", json.dumps(body), content_type="application/json"
    )
    error_of(response, 400)


def test_matrix_evidence_ids_of_any_size_are_stored_or_refused_never_a_500(incident, users, client):
    client.force_login(users("a", "author"))
    for value in (BIG, -BIG, 10**199, "\u202e" + SCRIPT):
        response = client.patch(
            f"/api/v1/incidents/{incident.pk}/matrix/",
            json.dumps(
                {
                    "layer": "engine",
                    "direct_cause": {"text": "t", "evidence": [{"kind": "alert", "id": value}]},
                }
            ),
            content_type="application/json",
        )
        assert response.status_code in (200, 400), (value, response.content[:300])


# Management commands that read a user's files -------------------------------------------


def run(*args) -> tuple[str, str]:
    out, err = StringIO(), StringIO()
    call_command(*args, stdout=out, stderr=err)
    return out.getvalue(), err.getvalue()


def action_line(**fields) -> dict:
    return {
        "at": f"{DAY}T02:10:00Z",
        "by": "oncall",
        "action": "acknowledge",
        "fingerprint": "no-such-alert-yet",
        **fields,
    }


IMPORT_ACTION_LINES = [
    "{broken",
    "[" * 100_000,
    '{"a":' * 5000 + "1" + "}" * 5000,
    "null",
    "42",
    '"acknowledge"',
    "[]",
    "[1, 2]",
    json.dumps(action_line(at="0000-01-01T00:00:00Z")),
    json.dumps(action_line(at="99999-01-01T00:00:00Z")),
    json.dumps(action_line(at=1e20)),
    json.dumps(action_line(at=None)),
    json.dumps(action_line(at="\ud800")),
    json.dumps(action_line(by=None)),
    json.dumps(action_line(by="\x00")),
    json.dumps(action_line(by="x" * 1000)),
    json.dumps(action_line(by=["a"])),
    json.dumps(action_line(fingerprint=None)),
    json.dumps(action_line(fingerprint=5)),
    json.dumps(action_line(fingerprints=[None])),
    json.dumps(action_line(fingerprints="abc")),
    json.dumps(action_line(fingerprint="fp\x00")),
    json.dumps(action_line(action="merge")),
    json.dumps(action_line(action=None)),
    json.dumps(action_line(action="note", text={"a": "\x00"})),
    json.dumps(action_line(starts_at={"a": "\x00"})),
    json.dumps(action_line(starts_ats=[{"a": "\ud800"}])),
    json.dumps(action_line(into_starts_at=[["\x00"]])),
    json.dumps(action_line(**{"bogus\x00": 1})),
    json.dumps(action_line(**{"\ud800": 1})),
    json.dumps(action_line(action="note", text="x" * 30_000)),
    json.dumps(action_line(action="split", fingerprints=[])),
]


@pytest.mark.parametrize(
    "line", IMPORT_ACTION_LINES, ids=[f"line-{i}" for i in range(len(IMPORT_ACTION_LINES))]
)
def test_import_actions_says_what_is_wrong_with_a_line_not_a_traceback(tmp_path, line):
    path = tmp_path / "actions.jsonl"
    path.write_text(line + "\n", encoding="utf-8", errors="surrogatepass")
    try:
        out, err = run("import_actions", str(path))
    except CommandError as exc:  # a file it cannot read at all (the surrogate line is not UTF-8)
        assert str(path) in str(exc)
        return
    totals = json.loads(out.strip().splitlines()[-1])
    assert totals["failed"] + totals["pending"] == 1, (totals, err)
    assert err.startswith("actions.jsonl:1: ") and "Traceback" not in err
    assert all("\x00" not in json.dumps(kept.line) for kept in PendingAction.objects.all())


def test_import_actions_of_a_directory_or_a_binary_file_is_a_command_error(tmp_path):
    with pytest.raises(CommandError, match="cannot read"):
        run("import_actions", str(tmp_path))
    (tmp_path / "bin").write_bytes(b"\xff\xfe\x00\x01")
    with pytest.raises(CommandError, match="cannot read"):
        run("import_actions", str(tmp_path / "bin"))


def test_import_alerts_of_a_directory_or_a_missing_integration_is_a_command_error(tmp_path, make_integration):
    integration = make_integration()
    with pytest.raises(CommandError):
        run("import_alerts", str(tmp_path), "--integration", str(integration.pk))
    with pytest.raises(CommandError, match="no integration"):
        run("import_alerts", str(tmp_path), "--integration", "99999999999999999999")
    (tmp_path / "a.jsonl").write_bytes(b"\xff\n" + b"[" * 100_000 + b"\n" + b"\x00\n" + GOOD_BODY + b"\n")
    out, err = run("import_alerts", str(tmp_path / "a.jsonl"), "--integration", str(integration.pk))
    assert json.loads(out) == {"bodies": 4, "accepted": 1, "rejected": 0, "refused": 3}
    assert "Traceback" not in err and err.count("a.jsonl:") == 3


OPENMETRICS_FILES = [
    "m 1 nan\n# EOF\n",
    "m 1 -inf\n# EOF\n",
    "m 1 inf\n# EOF\n",
    "m 1 -1e20\n# EOF\n",
    "m 1 -99999999999\n# EOF\n",
    "m 1 1e10\n# EOF\n",
    'm{pod="a\x00b"} 1 1700000000\n# EOF\n',
    'm{pod="a\\u0000b"} 1 1700000000\n# EOF\n',
    'm{pod="x"} 1\n# EOF\n',
    "m 1 1700000000\n",
    "m 1 1700000000\n# EOF\nm 2 1700000001\n",
    "\x00\n# EOF\n",
    "m x 1700000000\n# EOF\n",
    "m{" + ",".join(f'l{i}="v"' for i in range(2000)) + "} 1 1700000000\n# EOF\n",
]


@pytest.mark.parametrize("text", OPENMETRICS_FILES, ids=[f"om-{i}" for i in range(len(OPENMETRICS_FILES))])
def test_import_metrics_names_the_bad_line_not_a_traceback(tmp_path, text):
    path = tmp_path / "metrics.om"
    path.write_text(text, encoding="utf-8")
    try:
        out, _ = run("import_metrics", str(path))
    except CommandError as exc:
        assert str(path) in str(exc) and len(str(exc)) < 600
    else:
        assert json.loads(out)["samples"] >= 1
        for row in LocalSeries.objects.all():
            assert "\x00" not in json.dumps(row.labels)


def test_import_metrics_of_a_directory_or_a_binary_file_is_a_command_error(tmp_path):
    with pytest.raises(CommandError):
        run("import_metrics", str(tmp_path))
    (tmp_path / "bin.om").write_bytes(b"\xff\xfe")
    with pytest.raises(CommandError):
        run("import_metrics", str(tmp_path / "bin.om"))


@pytest.mark.parametrize(
    "args",
    [
        ("recorrelate", "--since", "garbage"),
        ("recorrelate", "--since", "0000-01-01T00:00:00Z"),
        ("recorrelate", "--since", "99999-01-01T00:00:00Z"),
        ("recorrelate", "--since", "0001-01-01T00:00:00Z"),
        ("recorrelate", "--since", "\x00"),
        ("integration", "add", "--kind", "events", "--name", "n\x00"),
        ("integration", "add", "--kind", "events", "--name", "n" * 300),
        ("integration", "add", "--kind", "events", "--name", "   "),
        ("integration", "add", "--kind", "events", "--name", "x", "--rate-limit", "nan"),
        ("integration", "add", "--kind", "events", "--name", "y", "--rate-limit", "-1"),
        ("integration", "add", "--kind", "events", "--name", "z", "--rate-limit", "inf"),
        ("integration", "add", "--kind", "events", "--name", "w", "--token", "t\x00"),
        ("api_token", "u\x00", "--create-user"),
        ("api_token", "u" * 300, "--create-user"),
        ("api_token", "", "--create-user"),
        ("simulate", "--scenario", "nope", "--start", "2026-01-01T00:00:00Z", "--out", "/tmp/x"),
        ("demo", "--scenario", "nope"),
        ("demo", "--start", "garbage"),
        ("demo", "--start", "0000-01-01T00:00:00Z"),
    ],
)
def test_commands_refuse_bad_arguments_with_a_command_error(args):
    with pytest.raises(CommandError):
        run(*args)


def test_simulate_with_a_bad_start_or_an_output_that_is_a_file_is_a_command_error(tmp_path):
    from correlate import simulator

    scenario = simulator.scenario_names()[0]
    for start in ("garbage", "0000-01-01T00:00:00Z", "99999-01-01T00:00:00Z"):
        with pytest.raises(CommandError):
            run("simulate", "--scenario", scenario, "--start", start, "--out", str(tmp_path / "o"))
    (tmp_path / "file").write_text("x")
    with pytest.raises(CommandError):
        run(
            "simulate",
            "--scenario",
            scenario,
            "--start",
            "2026-01-01T00:00:00Z",
            "--out",
            str(tmp_path / "file"),
        )


def test_rules_export_into_a_file_path_is_a_command_error(tmp_path):
    (tmp_path / "file").write_text("x")
    with pytest.raises(CommandError):
        run("rules", "export", "--dir", str(tmp_path / "file"))


# Times at the edges of what is accepted, through correlation, evidence and every page -----

EDGE_TIMES = ["9999-12-31T23:59:59.999999999Z", "1970-01-01T00:00:00Z", "2038-01-19T03:14:08Z"]


@pytest.mark.parametrize("starts", EDGE_TIMES)
def test_alerts_at_the_edges_of_time_are_correlated_and_shown(make_integration, deliver, client, starts):
    integration = make_integration()
    for row in cascade():
        row["startsAt"] = starts
        assert deliver(integration, am_body(row)).status_code == 202
    resolved = am_alert("LLMTTFTP99High", starts, status="resolved", ends="9999-12-31T23:59:59Z", **FLEET)
    assert deliver(integration, am_body(resolved)).status_code == 202
    client.force_login(admin_user())
    paths = [
        "/",
        "/?status=all",
        "/alerts/",
        "/api/v1/alerts/",
        "/api/v1/incidents/?status=all",
        f"/api/v1/alerts/?since={starts}",
    ]
    for incident in Incident.objects.all():
        paths += [
            f"/incidents/{incident.pk}/",
            f"/incidents/{incident.pk}/evidence/",
            f"/api/v1/incidents/{incident.pk}/",
            f"/api/v1/incidents/{incident.pk}/timeline/",
            f"/api/v1/incidents/{incident.pk}/matrix/",
        ]
    for path in paths:
        assert client.get(path).status_code == 200, path


def test_login_next_parameter_never_becomes_a_script_link(users, client):
    users("person", "viewer").set_password("pw-1234567")
    User.objects.filter(username="person").update(password=User.objects.get(username="person").password)
    page = client.get(
        "/accounts/login/?next=" + JS_LINK.replace("'", "%27") + "&x=%22%3E%3Cscript%3Ealert(1)%3C/script%3E"
    )
    assert page.status_code == 200
    assert_escaped(page.content.decode(), "login page")
    response = client.post(
        "/accounts/login/?next=javascript:alert(1)", {"username": "person", "password": "wrong"}
    )
    assert response.status_code == 200
    assert_escaped(response.content.decode(), "login page after a failed sign-in")


@pytest.mark.parametrize(
    "field,value",
    [
        ("alert_id", "\u00b2"),
        ("alert_id", "9" * 5000),
        ("into", "\u0663"),
        ("into", "\u00b2"),
        ("alert_id", "99999999999999999999"),
    ],
)
def test_incident_page_forms_with_odd_digits_redirect_with_a_message(incident, users, client, field, value):
    """`str.isdigit` holds for superscripts ("²") and for 5,000 digits, which `int` refuses."""
    client.force_login(users("r", "responder"))
    action = "merge" if field == "into" else "exclude_alert"
    response = client.post(f"/incidents/{incident.pk}/act/", {"action": action, field: value})
    assert response.status_code == 302, response.content[:300]


# The short webhook path gunicorn takes (rootline.wsgi), with requests the test client cannot make

from tests.ingest.test_fast_paths import call, environ  # noqa: E402  (wsgi: the fixture, tests/conftest.py)

LEAN_CASES = {
    "content-length -1": {"CONTENT_LENGTH": "-1"},
    "content-length abc": {"CONTENT_LENGTH": "abc"},
    "content-length empty": {"CONTENT_LENGTH": ""},
    "content-length 30 nines": {"CONTENT_LENGTH": "9" * 30},
    "no content-length": {"CONTENT_LENGTH": None},
    "nul header": {"HTTP_X_TRACE": "a\x00b"},
    "latin-1 header": {"HTTP_X_TRACE": "caf\xc3\xa9"},
    "nul in host": {"HTTP_HOST": "127.0.0.1\x00"},
    "host with script": {"HTTP_HOST": "<script>"},
    "host 5000 chars": {"HTTP_HOST": "h" * 5000},
    "no host": {"HTTP_HOST": None},
    "huge id": {"PATH_INFO": "/hooks/alertmanager/99999999999999999999/"},
    "query string": {"QUERY_STRING": "x=%00&y=" + "z" * 5000},
    "nul in token": {"HTTP_AUTHORIZATION": "Bearer a\x00"},
    "latin-1 token": {"HTTP_AUTHORIZATION": "Bearer \xff\xfe"},
}


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("case", LEAN_CASES, ids=list(LEAN_CASES))
def test_the_short_webhook_path_never_answers_500(wsgi, make_integration, case):
    integration = make_integration()
    env = environ(integration.path, GOOD_BODY, token=integration.plain_token)
    for key, value in LEAN_CASES[case].items():
        if value is None:
            env.pop(key, None)
        else:
            env[key] = value
    status, _, content = call(wsgi.application, env)
    assert not status.startswith("5"), (status, content[:300])


@pytest.mark.parametrize("key", ["items", "keys", "values", "get", "summary", "0", "__class__", "pk"])
def test_label_and_annotation_keys_named_like_methods_render(make_integration, deliver, client, key):
    """Django's templates look `labels.items` up as the key "items" first: a sender's label of
    that name must not replace the mapping's method in a page."""
    integration = make_integration()
    for row in cascade():
        row["labels"][key] = "xy"
        row["annotations"][key] = "xy"
        assert deliver(integration, am_body(row)).status_code == 202
    client.force_login(admin_user())
    paths = ["/", "/?status=all", "/alerts/"]
    for incident in Incident.objects.all():
        paths += [f"/incidents/{incident.pk}/", f"/incidents/{incident.pk}/evidence/"]
    for path in paths:
        response = client.get(path)
        assert response.status_code == 200, path
    alerts_page = client.get("/alerts/").content.decode()
    assert "pod=vllm-llama-7d9f8b6c4-x2k9p" in alerts_page  # the other labels are still listed
