"""What a client gets wrong gets a 4xx in the contract's shape, `{"error": "<what, where>"}`, that
names the parameter or field: query parameters, pages, bodies, ids, credentials. Never a 500."""

from __future__ import annotations

import json

import pytest

from incidents.models import Alert, Incident
from tests.incidents.conftest import DAY, am_body, cascade

pytestmark = pytest.mark.django_db


def error_of(response, status: int, fragment: str) -> str:
    assert response.status_code == status, (response.status_code, response.content[:300])
    assert response["Content-Type"].startswith("application/json")
    body = response.json()
    assert set(body) == {"error"}, body
    assert fragment in body["error"], body
    return body["error"]


@pytest.mark.parametrize(
    "query,status,fragment",
    [
        ("/api/v1/alerts/?fingerprint=ab%00c", 400, "fingerprint"),
        ("/api/v1/alerts/?label=po%00d:x", 400, "label"),
        ("/api/v1/alerts/?label=pod:x%00", 400, "label"),
        ("/api/v1/alerts/?since=garbage", 400, "since: not an RFC 3339 time"),
        ("/api/v1/incidents/?since=2026-11-29", 400, "since"),
        ("/api/v1/alerts/?until=2026-11-29T00:00:00Z", 400, "until: unknown query parameter"),
        ("/api/v1/alerts/?status=garbage", 400, "status"),
        ("/api/v1/alerts/?label=nocolon", 400, "label"),
        ("/api/v1/incidents/?incident_status=open", 400, "incident_status"),
        ("/api/v1/incidents/?status=garbage", 400, "status"),
        ("/api/v1/incidents/?page=-1", 400, "page"),
        ("/api/v1/incidents/?page=0", 400, "page"),
        ("/api/v1/incidents/?page=abc", 400, "page"),
        ("/api/v1/incidents/?page=%F0%9F%98%80", 400, "page"),
        ("/api/v1/incidents/?page=9999", 404, "last page"),
        ("/api/v1/incidents/?page_size=100000", 400, "page_size"),
        ("/api/v1/incidents/?page_size=501", 400, "500"),
        ("/api/v1/incidents/?page_size=0", 400, "page_size"),
        ("/api/v1/incidents/?page_size=-5", 400, "page_size"),
        ("/api/v1/incidents/?page_size=ten", 400, "page_size"),
        ("/api/v1/alerts/?page_size=" + "9" * 5000, 400, "page_size"),
        ("/api/v1/incidents/{id}/?expand=alerts", 400, "expand"),
        ("/api/v1/incidents/{id}/timeline/?x%00=1", 400, "NUL"),
        ("/api/v1/incidents/999999/", 404, "999999"),
        ("/api/v1/incidents/99999999999999999999/", 404, "no incident"),
        ("/api/v1/incidents/999999/timeline/", 404, "999999"),
    ],
)
def test_bad_query_parameters_and_ids_get_a_4xx_naming_them(incident, users, api, query, status, fragment):
    response = api(users("v", "viewer"), "get", query.format(id=incident.pk))
    error_of(response, status, fragment)


def test_pages_up_to_500_and_the_last_page_are_served(incident, users, api):
    viewer = users("v", "viewer")
    total = Incident.objects.visible().count()
    first = api(viewer, "get", "/api/v1/incidents/?status=all&page_size=1").json()
    assert first["count"] == total > 1 and len(first["results"]) == 1 and "page=2" in first["next"]
    assert api(viewer, "get", "/api/v1/incidents/?status=all&page_size=500").json()["count"] == total
    last = api(viewer, "get", f"/api/v1/incidents/?status=all&page_size=1&page={total}").json()
    assert last["next"] is None and len(last["results"]) == 1
    assert api(viewer, "get", "/api/v1/alerts/?page=last&page_size=2&format=json").status_code == 200


def test_bodies_credentials_and_methods_get_the_same_error_shape(incident, users, api, client):
    url = f"/api/v1/incidents/{incident.pk}/actions/"
    client.force_login(users("r", "responder"))
    error_of(client.post(url, "{not json", content_type="application/json"), 400, "JSON")
    error_of(client.get(url), 405, "GET")
    client.logout()
    error_of(client.get("/api/v1/incidents/"), 401, "credentials")
    error_of(client.get("/api/v1/incidents/", HTTP_AUTHORIZATION="Token nope"), 401, "token")
    error_of(
        client.post(url, json.dumps({"action": "acknowledge"}), content_type="application/json"),
        401,
        "credentials",
    )


def test_unauthenticated_clients_get_401_everywhere_including_the_schema(incident, client, users):
    paths = [
        "/api/v1/alerts/",
        "/api/v1/incidents/",
        f"/api/v1/incidents/{incident.pk}/",
        f"/api/v1/incidents/{incident.pk}/timeline/",
        f"/api/v1/incidents/{incident.pk}/matrix/",
        "/api/v1/schema/",
    ]
    for path in paths:
        assert client.get(path).status_code == 401, path
    client.force_login(users("v", "viewer"))
    schema = client.get("/api/v1/schema/?format=json")
    assert (
        schema.status_code == 200
        and "/api/v1/incidents/{incident_id}/actions/" in json.loads(schema.content)["paths"]
    )


def test_query_parameter_checks_come_after_authentication(client):
    assert client.get("/api/v1/alerts/?since=garbage").status_code == 401


def test_openapi_documents_every_action_field_the_error_answers_and_the_incident_shapes(users, client):
    client.force_login(users("v", "viewer"))
    schema = json.loads(client.get("/api/v1/schema/?format=json").content)
    components = schema["components"]["schemas"]
    post = schema["paths"]["/api/v1/incidents/{incident_id}/actions/"]["post"]
    body = post["requestBody"]["content"]["application/json"]["schema"]["$ref"].rsplit("/", 1)[1]
    assert {"action", "at", "username", "text", "level", "into", "alert_ids", "alert_id"} <= set(
        components[body]["properties"]
    )
    assert {"200", "202", "400", "403", "404", "409"} <= set(post["responses"])
    error = post["responses"]["409"]["content"]["application/json"]["schema"]["$ref"].rsplit("/", 1)[1]
    assert set(components[error]["properties"]) == {"error"}
    detail = components["IncidentDetail"]["properties"]
    assert {
        "root_cause",
        "chain",
        "edges",
        "root_candidates",
        "failure_modes",
        "layers",
        "scope",
        "alerts",
        "durations",
        "merged_into",
    } <= set(detail)
    assert detail["root_cause"].get("type") != "string" and detail["chain"]["type"] == "array"
    assert "$ref" in str(detail["durations"])


def test_a_body_over_the_limit_is_a_413_saying_so(incident, users, client, settings):
    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = 4096
    client.force_login(users("r", "responder"))
    response = client.post(
        f"/api/v1/incidents/{incident.pk}/actions/",
        json.dumps({"action": "note", "text": "x" * 5000}),
        content_type="application/json",
    )
    error_of(response, 413, "4096 bytes")
    assert not incident.actions.exists()


@pytest.mark.parametrize(
    "body,fragment",
    [
        ({"layer": "serving", "direct_cause": "a\ud800"}, "direct_cause: contains an unpaired surrogate"),
        (
            {
                "layer": "serving",
                "direct_cause": {"text": "x", "evidence": [{"kind": "alert", "id": "\ud800"}]},
            },
            "direct_cause.evidence[0].id",
        ),
        (
            [{"layer": "serving", "process_gap": "ok"}, {"layer": "engine\ud800", "process_gap": "x"}],
            "[1].layer",
        ),
    ],
)
def test_matrix_edits_with_text_postgresql_cannot_store_are_400s(incident, users, client, body, fragment):
    client.force_login(users("a", "author"))
    response = client.patch(
        f"/api/v1/incidents/{incident.pk}/matrix/", json.dumps(body), content_type="application/json"
    )
    error_of(response, 400, fragment)


def test_since_filters_alerts_and_incidents_by_their_start(incident, users, api):
    viewer = users("v", "viewer")
    alerts = api(viewer, "get", f"/api/v1/alerts/?since={DAY}T02:02:00Z").json()["results"]
    assert sorted(alert["starts_at"] for alert in alerts) == [
        f"{DAY}T02:02:00Z",
        f"{DAY}T02:03:00Z",
        f"{DAY}T02:03:00Z",
        f"{DAY}T02:05:00Z",
    ]
    listed = api(viewer, "get", f"/api/v1/incidents/?status=all&since={DAY}T03:42:00%2B02:00").json()[
        "results"
    ]
    assert [item["id"] for item in listed] == [
        incident.pk
    ] and incident.started_at.isoformat() > f"{DAY}T01:42"
    assert api(viewer, "get", f"/api/v1/incidents/?status=all&since={DAY}T01:00:00Z").json()["count"] == 2


def test_incident_detail_and_page_queries_do_not_grow_with_alerts(make_integration, deliver, users, client):
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    integration = make_integration()
    for row in cascade():
        deliver(integration, am_body(row))
    # The same cascade's first two alerts on another cluster: the same shape of incident (a
    # deployment's chain, so the page looks up what it has seen before), with fewer alerts.
    for row in cascade()[1:3]:
        row["labels"]["cluster"] = "prod-us"
        deliver(integration, am_body(row))
    big = Alert.objects.get(alertname="LLMContainerOOMKilled", labels__cluster="prod-eu").incident
    small = Alert.objects.get(alertname="LLMContainerOOMKilled", labels__cluster="prod-us").incident
    assert big.alerts.count() >= 3 * small.alerts.count()
    client.force_login(users("v", "viewer"))
    client.get("/accounts/profile/")  # a session's first page also reads the person's time zone
    # A process reads the resolved incidents' history once per change of them (incidents/forecast.py).
    client.get(f"/incidents/{small.pk}/")
    counts = {}
    for name, incident in (("big", big), ("small", small)):
        for path in (
            f"/api/v1/incidents/{incident.pk}/",
            f"/incidents/{incident.pk}/",
            f"/api/v1/incidents/{incident.pk}/timeline/",
        ):
            with CaptureQueriesContext(connection) as queries:
                assert client.get(path).status_code == 200
            counts[(name, path.replace(f"/{incident.pk}/", "/ID/"))] = len(queries)
    for path in ("/api/v1/incidents/ID/", "/incidents/ID/", "/api/v1/incidents/ID/timeline/"):
        assert counts[("big", path)] == counts[("small", path)], counts


@pytest.mark.parametrize(
    "query",
    [
        "/api/v1/alerts/?status=",
        "/api/v1/incidents/?status=",
        "/api/v1/alerts/?label=",
        "/api/v1/alerts/?since=",
        "/api/v1/incidents/?page=",
        "/api/v1/incidents/?page_size=",
    ],
)
def test_a_very_long_bad_parameter_is_named_not_echoed_whole(users, api, query):
    response = api(users("v", "viewer"), "get", query + "x" * 20_000)
    assert response.status_code == 400 and len(response.json()["error"]) < 300


@pytest.mark.parametrize(
    "method,path,status,fragment",
    [
        ("GET", "/api/v1/nope", 404, "GET /api/v1/nope: no such API route"),
        ("GET", "/api/v1/nope/", 404, "no such API route"),
        ("POST", "/api/v1/nope/", 404, "POST /api/v1/nope/"),
        ("GET", "/api/v1/incidents/abc/", 404, "/api/v1/incidents/abc/"),
        ("POST", "/api/v1/incidents/abc/actions/", 404, "no such API route"),
        ("GET", "/api/v1/", 404, "no such API route"),
        ("GET", "/api/v2/incidents/", 404, "no such API route"),
        ("DELETE", "/api/v1/incidents/{id}/", 405, "DELETE"),
        ("PUT", "/api/v1/alerts/", 405, "PUT"),
        ("PUT", "/api/v1/schema/", 405, "PUT"),
    ],
)
@pytest.mark.parametrize("signed_in", [True, False])
def test_unknown_api_routes_and_wrong_methods_answer_in_the_error_shape(
    incident, users, client, method, path, status, fragment, signed_in
):
    if signed_in:
        client.force_login(users("v", "viewer"))
    elif status == 405:
        status, fragment = 401, "credentials"  # an existing route: who asks comes first
    error_of(client.generic(method, path.format(id=incident.pk)), status, fragment)


def test_the_schema_answers_its_errors_in_the_error_shape_too(client):
    error_of(client.get("/api/v1/schema/"), 401, "credentials")


def test_the_schema_refuses_a_query_parameter_it_does_not_take_as_the_lists_do(users, client):
    client.force_login(users("v", "viewer"))
    error_of(
        client.get("/api/v1/schema/?verison=2"),
        400,
        "verison: unknown query parameter; this endpoint takes lang",
    )
    error_of(client.get("/api/v1/schema/?format=json&x%00=1"), 400, "NUL")
    for taken in ("", "?format=json", "?format=yaml", "?lang=en-us", "?format=json&lang=en-us"):
        assert client.get(f"/api/v1/schema/{taken}").status_code == 200, taken


def test_pages_outside_the_api_keep_their_html_404_and_a_missing_slash_still_redirects(users, client):
    client.force_login(users("v", "viewer"))
    for path in ("/nope/", "/incidents/999999/", "/incidents/abc/"):
        response = client.get(path)
        assert response.status_code == 404 and response["Content-Type"].startswith("text/html"), path
    response = client.get("/api/v1/alerts?status=firing")
    assert response.status_code == 301 and response["Location"] == "/api/v1/alerts/?status=firing"


def test_an_unknown_api_route_is_json_with_debug_on_too(users, client, settings):
    settings.DEBUG = True  # Django's technical 404 page otherwise
    client.force_login(users("v", "viewer"))
    error_of(client.get("/api/v1/incidents/abc/"), 404, "no such API route")
    assert client.get("/nope/")["Content-Type"].startswith("text/html")
