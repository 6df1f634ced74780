"""What the senders that route alerts through PagerDuty's APIs put where: one definition for the
strict webhook parser (`correlate/ingest/events.py`) and the engine's file reader (`correlate/io.py`).

Alertmanager's `pagerduty_configs` and Grafana's PagerDuty contact point send one event per alert
group. They name it by a summary such as `[FIRING:3] KVCacheHigh (prod-eu llm)` (the firing count
inside, Alertmanager's group label values, Grafana's `[FIRING:1]  (val1)`) and Grafana sets
`class` to `default` for every alert. The alerts themselves are in the default details `firing`
and `resolved`: the text of `template "__text_alert_list"`, one block per alert:

    Labels:
     - alertname = KVCacheHigh
     - pod = vllm-0
    Annotations:
     - summary = ...
    Source: http://prometheus/graph?...

(Grafana's blocks start with `Value: ...` and end with Silence/Dashboard/Panel links). The labels
every alert of the group shares are the group's own, so the event is named and scoped as the
webhook route names those alerts.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any

GROUP_TEXT_KEYS = ("firing", "resolved")
GROUP_COUNT_KEYS = ("num_firing", "num_resolved")
GRAFANA_PLACEHOLDER_CLASS = "default"

_STATUS_PREFIX = re.compile(r"^\[(?:FIRING|RESOLVED)(?::\d+)?\]\s*")
_LABEL_LINE = re.compile(r"^ - ([^=\n]+?) = (.*)$")
_SECTION_ENDS = ("Annotations:", "Source:", "Silence:", "Dashboard:", "Panel:", "Value:")


def group_alert_labels(text: str) -> list[dict[str, str]]:
    """The label sets of the alerts written in a `firing` / `resolved` detail, in order.

    A line under `Labels:` that is not ` - name = value` continues the value before it (a label
    value holding a newline); a text that is not a template's alert list gives no label sets."""
    alerts: list[dict[str, str]] = []
    current: dict[str, str] | None = None
    last_key = ""
    for line in text.split("\n"):
        if line == "Labels:":
            current, last_key = {}, ""
            alerts.append(current)
            continue
        if current is None:
            continue
        if line.startswith(_SECTION_ENDS):
            current = None
            continue
        match = _LABEL_LINE.match(line)
        if match:
            last_key = match.group(1).strip()
            current[last_key] = match.group(2)
        elif last_key:
            current[last_key] += "\n" + line
    return [labels for labels in alerts if labels]


def common_labels(label_sets: Iterable[Mapping[str, str]]) -> dict[str, str]:
    """The labels every set holds with one value (Alertmanager's CommonLabels)."""
    common: dict[str, str] | None = None
    for labels in label_sets:
        if common is None:
            common = dict(labels)
        else:
            common = {key: value for key, value in common.items() if labels.get(key) == value}
    return common or {}


def group_labels(details: Any) -> dict[str, str]:
    """The group's common labels read from the `firing` and `resolved` details (a resolve event
    carries its alerts under `resolved`), or {} when the details hold no alert list."""
    if not isinstance(details, Mapping):
        return {}
    sets: list[dict[str, str]] = []
    for key in GROUP_TEXT_KEYS:
        text = details.get(key)
        if isinstance(text, str) and "Labels:\n" in text:
            sets.extend(group_alert_labels(text))
    return common_labels(sets)


def is_group_detail(key: str, value: str, label_limit: int) -> bool:
    """A detail that describes the group rather than naming the alert: the senders' alert lists
    and counts (they change as the group does), and any text too long to be a label."""
    return key in GROUP_TEXT_KEYS or key in GROUP_COUNT_KEYS or len(value) > label_limit


def summary_name(summary: str) -> str:
    """The name inside an Alertmanager / Grafana summary, the same whether firing or resolved:
    `[FIRING:3] KVCacheHigh prod-eu (llm vllm-0)` -> `KVCacheHigh prod-eu` (the group label
    values, without the common ones in brackets, which change as the group does and which
    Alertmanager may cut at 1,024 characters); a summary without the prefix is kept whole."""
    stripped = _STATUS_PREFIX.sub("", summary, count=1)
    if stripped == summary:
        return summary.strip()
    return stripped.split(" (", 1)[0].strip() or stripped.strip() or summary.strip()


def event_alertname(*, details: Mapping[str, str], group: Mapping[str, str], klass: str, summary: str) -> str:
    """custom_details.alertname, else the group's common alertname, else `class` (never Grafana's
    placeholder `default`), else the summary's name (`summary_name`), else `event`."""
    for candidate in (details.get("alertname"), group.get("alertname")):
        if candidate:
            return candidate
    if klass and klass != GRAFANA_PLACEHOLDER_CLASS:
        return klass
    return summary_name(summary) if summary else "event"


V1_EVENT_TYPES = ("trigger", "acknowledge", "resolve")


def is_v1_event(event: Mapping[str, Any]) -> bool:
    """PagerDuty Events API v1 (`service_key`, `event_type`, `incident_key`), which Alertmanager's
    `pagerduty_configs` send when configured with a `service_key` (with `"event_action": ""` and
    `"payload": null` beside them: Go writes its unset v2 fields too)."""
    return "event_type" in event or ("service_key" in event and not event.get("event_action"))


def v1_as_v2(event: Mapping[str, Any]) -> dict[str, Any]:
    """A v1 event in v2's shape, so one reader names, keys and times both: `incident_key` is
    the dedup key, `description` the summary, `details` the custom details, `service_key` the
    routing key. v1 has no timestamp: the event is timed by its arrival."""
    payload: dict[str, Any] = {}
    if event.get("description") not in (None, ""):
        payload["summary"] = event["description"]
    if "details" in event and event["details"] is not None:
        payload["custom_details"] = event["details"]
    converted: dict[str, Any] = {"event_action": event.get("event_type"), "payload": payload}
    for v1_key, v2_key in (
        ("incident_key", "dedup_key"),
        ("service_key", "routing_key"),
        ("client", "client"),
        ("client_url", "client_url"),
        ("contexts", "links"),
    ):
        if event.get(v1_key) not in (None, ""):
            converted[v2_key] = event[v1_key]
    return converted
