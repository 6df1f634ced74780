from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import pytest
from django.contrib.auth.models import Group, User


def am_body(*alerts: dict) -> bytes:
    return json.dumps(
        {
            "version": "4",
            "status": "firing",
            "receiver": "rootline",
            "groupKey": "{}:{}",
            "alerts": list(alerts),
        }
    ).encode()


def am_alert(
    name: str,
    starts: str,
    *,
    status: str = "firing",
    ends: str = "0001-01-01T00:00:00Z",
    annotations=None,
    **labels,
) -> dict:
    return {
        "status": status,
        "labels": {"alertname": name, **labels},
        "annotations": annotations or {"summary": name},
        "startsAt": starts,
        "endsAt": ends,
    }


FLEET = {"cluster": "prod-eu", "namespace": "llm", "model_name": "llama-3-70b"}
BAD_POD = "vllm-llama-7d9f8b6c4-x2k9p"
SIBLINGS = ("vllm-llama-7d9f8b6c4-a8m4q", "vllm-llama-7d9f8b6c4-q7w2z")
# The day the cascade happened: yesterday (UTC), not a fixed date, which would be ahead of a machine
# whose clock is earlier; people's actions dated then would be refused (an `at` more than 5 minutes
# ahead of the server's clock is a 400), and a demo started then would load none of them.
DAY = (datetime.now(UTC) - timedelta(days=1)).date().isoformat()


def cascade() -> list[dict]:
    """The canonical chain on one deployment: fragmentation on one pod, its OOM and restart,
    then queueing and a TTFT breach on the surviving siblings; plus an unrelated disk alert first."""
    return [
        am_alert(
            "NodeDiskFilling", f"{DAY}T01:40:00Z", cluster="prod-eu", node="gpu-node-9", device="/dev/sda"
        ),
        am_alert(
            "KVCacheFragmentationHigh",
            f"{DAY}T01:45:00Z",
            pod=BAD_POD,
            **FLEET,
            annotations={
                "summary": "KV fragmentation 31%",
                "description": "fragmentation above 25% for 15 minutes",
            },
        ),
        am_alert("LLMContainerOOMKilled", f"{DAY}T02:00:00Z", pod=BAD_POD, container="vllm", **FLEET),
        am_alert("KubePodCrashLooping", f"{DAY}T02:02:00Z", pod=BAD_POD, container="vllm", **FLEET),
        *[am_alert("VLLMRequestQueueHigh", f"{DAY}T02:03:00Z", pod=pod, **FLEET) for pod in SIBLINGS],
        am_alert("LLMTTFTP99High", f"{DAY}T02:05:00Z", **FLEET),
    ]


def storm_incident_of(deliver, integration, *, fragmented: int, killed: int):
    """One deployment's storm, delivered as Alertmanager groups it: KV fragmentation on `fragmented`
    pods in one body, then OOM kills on the first `killed` of them in another; the incident they
    land in (one, rooted at fragmentation)."""
    from incidents.models import Alert

    pods = [f"vllm-llama-7d9f8b6c4-{n:05d}" for n in range(fragmented)]
    deliver(
        integration,
        am_body(
            *[am_alert("KVCacheFragmentationHigh", f"{DAY}T01:45:00Z", pod=pod, **FLEET) for pod in pods]
        ),
    )
    deliver(
        integration,
        am_body(
            *[
                am_alert("LLMContainerOOMKilled", f"{DAY}T02:00:00Z", pod=pod, container="vllm", **FLEET)
                for pod in pods[:killed]
            ]
        ),
    )
    return Alert.objects.get(alertname="LLMContainerOOMKilled", labels__pod=pods[0]).incident


@pytest.fixture
def users(db):
    def make(username: str, role: str | None) -> User:
        user = User.objects.create_user(username)
        if role:
            user.groups.add(Group.objects.get_or_create(name=role)[0])
        return user

    return make


@pytest.fixture
def api(client):
    """The API as one person: GET, or any other method with a JSON body."""

    def call(user, method: str, path: str, body=None):
        client.force_login(user)
        if method == "get":
            return client.get(path)
        return getattr(client, method)(path, json.dumps(body), content_type="application/json")

    return call


@pytest.fixture
def incident(make_integration, deliver):
    """The canonical cascade delivered through the webhook: the incident its OOM kill landed in."""
    from incidents.models import Alert

    integration = make_integration()
    for alert in cascade():
        assert deliver(integration, am_body(alert)).status_code == 202
    return Alert.objects.get(alertname="LLMContainerOOMKilled").incident
