"""One module per alert source, each a pure `parse(body)`; `parser_for(kind)` picks one."""
from __future__ import annotations

from collections.abc import Callable
from datetime import datetime

from incidents.ingest import alertmanager, events, grafana
from incidents.ingest.common import ParsedAlert, ParseResult, PayloadError, Rejection

Parser = Callable[[bytes, datetime], ParseResult]

PARSERS: dict[str, Parser] = {
    "alertmanager": alertmanager.parse,
    "grafana": grafana.parse,
    "events": events.parse,
}


def parser_for(kind: str) -> Parser:
    return PARSERS[kind]


__all__ = ["PARSERS", "ParseResult", "ParsedAlert", "PayloadError", "Rejection", "parser_for"]
