"""What Alertmanager and a CD system POST, built by hand; and the truth a scenario's author draws."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any
from urllib.parse import quote

from correlate.events import Alert, labelset_fingerprint
from correlate.io import alerts_from_body

DAY = datetime(2026, 5, 2, tzinfo=UTC)
PROMETHEUS = "http://prometheus-k8s-0:9090"


def at(hhmm: str, seconds: int = 0) -> datetime:
    hours, minutes = (int(p) for p in hhmm.split(":"))
    return DAY + timedelta(hours=hours, minutes=minutes, seconds=seconds)


def rfc3339(moment: datetime) -> str:
    """Go's time.Time JSON: nanoseconds, trailing zeros trimmed, 'Z'."""
    text = moment.strftime("%Y-%m-%dT%H:%M:%S.%f").rstrip("0").rstrip(".")
    return text + "Z"


@dataclass(frozen=True)
class Scenario:
    name: str
    about: str
    alerts: tuple[Alert, ...]  # every delivered occurrence, resolved notifications included
    truth: Mapping[str, Any]  # truth.json's shape: {"incidents": [{root, alerts}], "noise": [...]}
    incidents: tuple[tuple[str, frozenset[str]], ...]  # (root tag, member tags) for assertions
    noise: frozenset[str]
    tags: Mapping[str, tuple[str, datetime]]  # tag -> (fingerprint, startsAt)


@dataclass
class Story:
    """A fleet's alerts in delivery order, each named by a tag for the truth."""

    name: str
    about: str
    deliveries: list[Alert] = field(default_factory=list)
    tags: dict[str, tuple[str, datetime]] = field(default_factory=dict)
    incidents: list[tuple[str, frozenset[str]]] = field(default_factory=list)
    noise_tags: set[str] = field(default_factory=set)

    def fire(
        self,
        tag: str,
        alertname: str,
        when: str,
        *,
        labels: Mapping[str, str],
        expr: str = "",
        annotations: Mapping[str, str] | None = None,
        resolved: str | None = None,
        seconds: int = 17,
        generator_url: str | None = None,
    ) -> str:
        """One alert as Alertmanager's webhook sends it; `resolved` adds the resolved notification."""
        full = {"alertname": alertname, **labels}
        starts = at(when, seconds)
        url = (
            generator_url
            if generator_url is not None
            else (f"{PROMETHEUS}/graph?g0.expr={quote(expr, safe='')}&g0.tab=1" if expr else "")
        )
        raw = {
            "status": "firing",
            "labels": full,
            "annotations": dict(annotations or {}),
            "startsAt": rfc3339(starts),
            "endsAt": "0001-01-01T00:00:00Z",
            "generatorURL": url,
            "fingerprint": labelset_fingerprint(full),
        }
        self._deliver(
            {
                "version": "4",
                "status": "firing",
                "receiver": "team\\.llm",
                "alerts": [raw],
                "groupKey": f'{{}}:{{alertname="{alertname}"}}',
                "truncatedAlerts": 0,
            }
        )
        if resolved:
            done = {**raw, "status": "resolved", "endsAt": rfc3339(at(resolved, 3))}
            self._deliver(
                {
                    "version": "4",
                    "status": "resolved",
                    "receiver": "team\\.llm",
                    "alerts": [done],
                    "groupKey": f'{{}}:{{alertname="{alertname}"}}',
                    "truncatedAlerts": 0,
                }
            )
        self.tags[tag] = (raw["fingerprint"], starts)
        return tag

    def change(self, tag: str, summary: str, when: str, *, source: str, **details: str) -> str:
        """A PagerDuty Change Events body (what Argo CD / Flux / a CI job notifies)."""
        moment = at(when, 5)
        body = {
            "routing_key": "0" * 32,
            "payload": {
                "summary": summary,
                "source": source,
                "timestamp": moment.strftime("%Y-%m-%dT%H:%M:%S.000+0000"),
                "custom_details": dict(details),
            },
        }
        delivered = alerts_from_body(body)
        assert len(delivered) == 1, body
        self.deliveries.extend(delivered)
        self.tags[tag] = (delivered[0].fingerprint, delivered[0].starts_at)
        return tag

    def incident(self, root: str, *others: str) -> None:
        self.incidents.append((root, frozenset((root, *others))))

    def noise(self, *tags: str) -> None:
        self.noise_tags.update(tags)

    def _deliver(self, body: Mapping[str, Any]) -> None:
        delivered = alerts_from_body(body)
        assert delivered, body
        self.deliveries.extend(delivered)

    def build(self) -> Scenario:
        drawn = set().union(*(m for _, m in self.incidents)) | self.noise_tags
        assert drawn == set(self.tags), (self.name, set(self.tags) ^ drawn)

        def occ(tag: str) -> dict[str, str]:
            fingerprint, starts = self.tags[tag]
            return {"fingerprint": fingerprint, "starts_at": rfc3339(starts)}

        truth = {
            "incidents": [
                {"root": occ(root), "alerts": [occ(t) for t in sorted(members)]}
                for root, members in self.incidents
            ],
            "noise": [occ(t) for t in sorted(self.noise_tags)],
        }
        return Scenario(
            self.name,
            self.about,
            tuple(self.deliveries),
            truth,
            tuple(self.incidents),
            frozenset(self.noise_tags),
            dict(self.tags),
        )


GRAFANA = "https://grafana.corp.example"


def grafana_fire(
    story: Story,
    tag: str,
    rule: str,
    when: str,
    *,
    labels: Mapping[str, str],
    folder: str,
    rule_uid: str,
    annotations: Mapping[str, str] | None = None,
    values: Mapping[str, float] | None = None,
    resolved: str | None = None,
    seconds: int = 0,
) -> str:
    """One Grafana-managed alert as Grafana's own webhook notifier sends it (grafana/alerting
    receivers/webhook/v1: "version": "1", orgId, state, title, message; per alert silenceURL,
    dashboardURL, panelURL, values, valueString). The rule's title is its `alertname`, the folder
    is `grafana_folder`, and the generatorURL is the rule's view page (no expression in it)."""
    full = {"alertname": rule, "grafana_folder": folder, "__alert_rule_uid__": rule_uid, **labels}
    starts = at(when, seconds)
    fingerprint = labelset_fingerprint(full)
    shown = dict(values or {})
    raw = {
        "status": "firing",
        "labels": full,
        "annotations": dict(annotations or {}),
        "startsAt": rfc3339(starts),
        "endsAt": "0001-01-01T00:00:00Z",
        "generatorURL": f"{GRAFANA}/alerting/grafana/{rule_uid}/view?orgId=1",
        "fingerprint": fingerprint,
        "silenceURL": f"{GRAFANA}/alerting/silence/new?alertmanager=grafana"
        f"&matcher=__alert_rule_uid__%3D{rule_uid}&orgId=1",
        "dashboardURL": "",
        "panelURL": "",
        "values": shown or None,
        "valueString": " ".join(f"[ var='{k}' labels={{}} value={v} ]" for k, v in shown.items()),
        "orgId": 1,
    }

    def body(status: str, alert: Mapping[str, Any]) -> dict[str, Any]:
        count = "FIRING:1" if status == "firing" else "RESOLVED"
        return {
            "receiver": "rootline",
            "status": status,
            "orgId": 1,
            "alerts": [alert],
            "groupLabels": {"alertname": rule, "grafana_folder": folder},
            "commonLabels": full,
            "commonAnnotations": dict(annotations or {}),
            "externalURL": f"{GRAFANA}/",
            "version": "1",
            "groupKey": '{}/{__grafana_autogenerated__="true"}/{__grafana_receiver__="rootline"}:'
            f'{{alertname="{rule}", grafana_folder="{folder}"}}',
            "truncatedAlerts": 0,
            "title": f"[{count}] {rule} ({folder})",
            "state": "alerting" if status == "firing" else "ok",
            "message": f"**{count}**\n\nValue: {raw['valueString']}",
        }

    story._deliver(body("firing", raw))
    if resolved:
        story._deliver(body("resolved", {**raw, "status": "resolved", "endsAt": rfc3339(at(resolved, 3))}))
    story.tags[tag] = (fingerprint, starts)
    return tag


def pagerduty_trigger(
    story: Story,
    tag: str,
    summary: str,
    when: str,
    *,
    source: str,
    severity: str,
    dedup_key: str,
    component: str = "",
    group: str = "",
    event_class: str = "",
    **details: str,
) -> str:
    """A PagerDuty Events API v2 *trigger* (event_action "trigger", with dedup_key and severity), as
    a synthetic checker or a home-grown script sends it: an alert, not a change."""
    moment = at(when, 41)
    payload: dict[str, Any] = {
        "summary": summary,
        "source": source,
        "severity": severity,
        "timestamp": moment.strftime("%Y-%m-%dT%H:%M:%S.000+0000"),
        "custom_details": dict(details),
    }
    for key, value in (("component", component), ("group", group), ("class", event_class)):
        if value:
            payload[key] = value
    body = {
        "routing_key": "0" * 32,
        "event_action": "trigger",
        "dedup_key": dedup_key,
        "payload": payload,
        "client": source,
        "client_url": f"https://{source}.example.com/checks/{dedup_key}",
    }
    delivered = alerts_from_body(body)
    assert len(delivered) == 1, body
    story.deliveries.extend(delivered)
    story.tags[tag] = (delivered[0].fingerprint, delivered[0].starts_at)
    return tag
