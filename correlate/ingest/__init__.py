"""One module per alert source, each a pure `parse(body, received_at)`; `parser_for(kind)` picks one,
`kind_of(document)` tells which a body is. The webhook reads with them (`incidents/views.py`),
and so does the engine's file reader (`correlate/io.py`), with `received_at=None`: a body from a
file has no arrival, so an alert that carries no time of its own is rejected there."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Any

from correlate.ingest import alertmanager, events, grafana
from correlate.ingest.common import ParsedAlert, ParseResult, PayloadError, Rejection

Parser = Callable[[bytes, datetime | None], ParseResult]

PARSERS: dict[str, Parser] = {
    "alertmanager": alertmanager.parse,
    "grafana": grafana.parse,
    "events": events.parse,
}
DOCUMENT_PARSERS: dict[str, Callable[[Any, datetime | None], ParseResult]] = {
    "alertmanager": alertmanager.parse_document,
    "grafana": grafana.parse_document,
    "events": events.parse_document,
}


def parser_for(kind: str) -> Parser:
    return PARSERS[kind]


def kind_of(document: object) -> str:
    """Which source a decoded body is from, for a reader that is not told (a file of bodies):
    a list or an object with a PagerDuty field is an event, Grafana's bodies are told by their
    own fields (the Alertmanager-compatible ones read the same either way), the rest Alertmanager's."""
    if isinstance(document, list):
        return "events"
    if not isinstance(document, dict):
        return "alertmanager"
    if "alerts" not in document and any(key in document for key in ("ruleId", "ruleName", "evalMatches")):
        return "grafana"
    if "alerts" not in document and any(
        key in document for key in ("payload", "event_action", "routing_key", "service_key", "event_type")
    ):
        return "events"
    if document.get("version") == "1" or "orgId" in document:
        return "grafana"
    return "alertmanager"


__all__ = [
    "DOCUMENT_PARSERS",
    "PARSERS",
    "ParseResult",
    "ParsedAlert",
    "PayloadError",
    "Rejection",
    "kind_of",
    "parser_for",
]
