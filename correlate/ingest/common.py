"""What every source parser shares: the parsed alert, the error type, strict JSON and time reading.

Parsers are pure (bytes in, dataclasses out) so they can be replayed on any stored body. Every
problem is reported with the path of the value at fault (`alerts[3].startsAt`), because the
person reading a 400 at 2 a.m. needs to know where to look, not only that something is wrong.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta, timezone
from enum import Enum
from types import ModuleType
from typing import Any, Final

from correlate.events import is_zero_time

orjson: ModuleType | None
try:
    import orjson
except ImportError:  # pragma: no cover - optional speed-up (a dependency; json.loads reads alike)
    orjson = None

MAX_LABEL_VALUE = 16 * 1024
MAX_LABEL_NAME = 1024
MAX_ANNOTATION_VALUE = 64 * 1024
MAX_FINGERPRINT = 255
MAX_JSON_DEPTH = 64

_UNSTORABLE = re.compile("[\x00\ud800-\udfff]")

_RFC3339 = re.compile(
    r"^(\d{4})-(\d{2})-(\d{2})[Tt ](\d{2}):(\d{2}):(\d{2})(?:\.(\d{1,9}))?([Zz]|[+-]\d{2}:?\d{2})$"
)


class PayloadError(ValueError):
    """Nothing in the body is usable; the message says what is wrong and where."""

    def __init__(self, message: str, rejected: list[Rejection] | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.rejected = rejected or []


class FieldError(ValueError):
    """One value is unreadable; the alert holding it is rejected, its neighbours are kept."""

    def __init__(self, path: str, error: str) -> None:
        super().__init__(f"{path}: {error}")
        self.path = path
        self.error = error


@dataclass(frozen=True)
class Rejection:
    path: str
    error: str

    def as_dict(self) -> dict[str, str]:
        return {"path": self.path, "error": self.error}


@dataclass(frozen=True)
class ParsedAlert:
    fingerprint: str
    status: str
    starts_at: datetime
    ends_at: datetime | None
    labels: dict[str, str]
    annotations: dict[str, str]
    generator_url: str = ""
    kind: str = "alert"
    event_action: str = ""

    @property
    def alertname(self) -> str:
        return self.labels.get("alertname", "")


@dataclass
class ParseResult:
    alerts: list[ParsedAlert] = field(default_factory=list)
    rejected: list[Rejection] = field(default_factory=list)
    truncated: int = 0  # alerts the sender left out of the body (Alertmanager's `truncatedAlerts`)

    def reject(self, exc: FieldError) -> None:
        self.rejected.append(Rejection(exc.path, exc.error))

    def require_something_usable(self, what: str) -> ParseResult:
        if self.rejected and not self.alerts:
            first = self.rejected[0]
            more = len(self.rejected) - 1
            suffix = f" (and {more} more problem{'s' if more > 1 else ''})" if more else ""
            raise PayloadError(f"no {what} could be read: {first.path}: {first.error}{suffix}", self.rejected)
        return self


def arrival(received_at: datetime | None, path: str) -> datetime:
    """The time of an alert that carries none: its arrival. A body read from a file has no
    arrival (`received_at=None`: the engine's file reader), so such an alert cannot be placed in
    time and is rejected, its neighbours kept."""
    if received_at is None:
        raise FieldError(path, "no time given, and a body read from a file has no arrival time to use")
    return received_at


def decode_json(body: bytes) -> Any:
    """Strict UTF-8 and JSON, with the position of the first problem in the message."""
    if not body.strip():
        raise PayloadError("body: empty; expected a JSON object")
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise PayloadError(
            f"body: not UTF-8 (invalid byte 0x{body[exc.start]:02x} at offset {exc.start})"
        ) from None
    if text.startswith("\ufeff"):
        text = text[1:]
    document = _orjson_document(text)
    if document is not _UNREAD:
        return document
    try:
        document = json.loads(text)
    except json.JSONDecodeError as exc:
        _check_depth(text)  # too deep is said first, as before a body is read at all
        raise PayloadError(
            f"body: not valid JSON ({exc.msg} at line {exc.lineno} column {exc.colno})"
        ) from None
    except RecursionError:
        raise PayloadError(f"body: JSON nested deeper than {MAX_JSON_DEPTH} levels") from None
    except ValueError:  # Python's int limit: a number literal of more than 4300 digits
        _check_depth(text)
        raise PayloadError("body: not valid JSON (a number too long to read)") from None
    _check_parsed_depth(document)
    return document


_UNREAD = object()


def _orjson_document(text: str) -> Any:
    """The document as json.loads reads it, read by orjson (a body is decoded by the webhook and
    again by the worker, and orjson reads it faster than json.loads), or _UNREAD where orjson
    refuses the text (json.loads then reads it or words the error) and where it holds a number
    with a fraction or an exponent: orjson reads integers past 64 bits as floats, where json.loads
    keeps them exact (Alertmanager's bodies hold no float: their numbers are counts)."""
    if orjson is None:
        return _UNREAD
    try:
        document = orjson.loads(text)
    except orjson.JSONDecodeError:
        return _UNREAD
    if _check_parsed_depth(document):
        return _UNREAD
    return document


_JSON_STRING = re.compile(r'"(?:[^"\\]|\\.)*"')
_BRACKETS = re.compile(r"[\[\]{}]")


def _check_parsed_depth(document: Any) -> bool:
    """`_check_depth`'s verdict for a parsed document: in valid JSON the brackets outside strings
    are exactly its arrays and objects, so counting levels of containers gives the same depth
    for far less than scanning the text again.
    Returns whether it holds a float (see `_orjson_document`)."""
    level = [document] if type(document) in (dict, list) else []
    floats = type(document) is float
    depth = 0
    while level:
        depth += 1
        if depth > MAX_JSON_DEPTH:
            raise PayloadError(f"body: JSON nested deeper than {MAX_JSON_DEPTH} levels")
        inner: list = []
        for node in level:
            for value in (
                node.values() if type(node) is dict else node
            ):  # a plain loop: faster than a comprehension here
                kind = type(value)
                if kind is dict or kind is list:
                    inner.append(value)
                elif kind is float:
                    floats = True
        level = inner
    return floats


def _check_depth(text: str) -> None:
    """Refuse absurd nesting (any text: used where json.loads failed, to say "too deep" first).
    Strings are dropped by one regex pass first, so the Python loop only sees the structure's
    brackets (a few per alert)."""
    depth = 0
    for match in _BRACKETS.finditer(_JSON_STRING.sub("", text)):
        if match.group() in "[{":
            depth += 1
            if depth > MAX_JSON_DEPTH:
                raise PayloadError(f"body: JSON nested deeper than {MAX_JSON_DEPTH} levels")
        else:
            depth -= 1


def truncated_alerts(document: dict) -> int:
    """`truncatedAlerts`: how many alerts of the group a `max_alerts` receiver left out. They
    were never sent, so they cannot be stored; the count is kept to say so. A value that is not
    a count is read as 0 rather than costing the body."""
    value = document.get("truncatedAlerts")
    return value if type(value) is int and 0 < value < 2**31 else 0


def type_name(value: Any) -> str:
    return {dict: "object", list: "array", str: "string", bool: "boolean", type(None): "null"}.get(
        type(value), "number" if isinstance(value, (int, float)) else type(value).__name__
    )


def expect_object(value: Any, path: str) -> dict:
    if not isinstance(value, dict):
        raise FieldError(path, f"expected an object, got {type_name(value)}")
    return value


def storable(text: str) -> str:
    """`text` with each character PostgreSQL cannot store (NUL, a lone surrogate) as U+FFFD."""
    return _UNSTORABLE.sub("\ufffd", text)


def clean_text(value: Any, path: str, *, limit: int, truncate: bool = False) -> str:
    """A string a database and a page can hold: no NUL, no lone surrogate, bounded length.

    PostgreSQL refuses NUL and lone surrogates in text and jsonb. Identity (labels, keys,
    fingerprints) must be exact, so there they reject the alert; descriptive text
    (`truncate=True`: annotations, links) is kept, with each such character replaced by U+FFFD."""
    if not isinstance(value, str):
        raise FieldError(path, f"expected a string, got {type_name(value)}")
    if truncate:
        value = storable(value)
    if "\x00" in value:
        raise FieldError(path, "contains a NUL character")
    if _UNSTORABLE.search(value):
        raise FieldError(path, "contains an unpaired surrogate (not valid Unicode text)")
    if len(value) > limit:
        if not truncate:
            raise FieldError(path, f"{len(value)} characters, over the limit of {limit}")
        value = value[:limit] + f"… [truncated, {len(value)} characters in all]"
    return value


def string_map(value: Any, path: str, *, value_limit: int, truncate: bool = False) -> dict[str, str]:
    if value is None:
        return {}
    mapping = expect_object(value, path)
    clean = _clean_string_map(mapping, value_limit)
    if clean is not None:
        return clean
    result: dict[str, str] = {}
    for key, item in mapping.items():
        key_path = f"{path}.{path_key(key)}"
        clean_key = clean_text(key, key_path, limit=MAX_LABEL_NAME, truncate=truncate)
        result[clean_key] = clean_text(item, key_path, limit=value_limit, truncate=truncate)
    return result


def _clean_string_map(mapping: dict, value_limit: int) -> dict[str, str] | None:
    """The common case of `string_map` in a few C-speed passes: every key and value a string
    within its limit, none holding a character PostgreSQL refuses. Then the map is kept as it
    is; otherwise None, and `string_map` goes key by key to say which one is wrong (or to
    truncate). A match in a joined string is a match in one of its parts: the pattern is one
    character class."""
    try:
        keys = "".join(mapping)
        values = "".join(mapping.values())
    except TypeError:  # a value that is not a string
        return None
    if _UNSTORABLE.search(keys) or _UNSTORABLE.search(values):
        return None
    if mapping and (max(map(len, mapping)) > MAX_LABEL_NAME or max(map(len, mapping.values())) > value_limit):
        return None
    return dict(mapping)


def path_key(key: str) -> str:
    """A sender's key as it appears in a path: the error is stored and shown, so it must hold
    no NUL or surrogate itself; unprintable characters are written as `\\uXXXX` escapes."""
    return "".join(char if char.isprintable() else f"\\u{ord(char):04x}" for char in key[:80])


def parse_time(value: Any, path: str) -> datetime | None:
    """RFC 3339 with up to 9 fractional digits (Go's time.Time); Go's zero time means 'none'.

    Also takes `+0000` offsets without a colon, as PagerDuty's examples write them. Readings
    of valid times are remembered (a body's alerts share a few times: Go's zero `endsAt`,
    the evaluation that fired them), errors are worked out again with their path."""
    if type(value) is str:
        known = _TIMES.get(value, _UNKNOWN)
        if known is not _UNKNOWN:
            return known
    moment = _read_time(value, path)
    if type(value) is str:
        if len(_TIMES) >= _TIMES_MAX:
            _TIMES.clear()
        _TIMES[value] = moment
    return moment


class _Unknown(Enum):
    """A time `_TIMES` has no reading of (None is a reading: Go's zero time)."""

    UNKNOWN = 0


_TIMES: dict[str, datetime | None] = {}
_TIMES_MAX = 4096
_UNKNOWN: Final = _Unknown.UNKNOWN


def _read_time(value: Any, path: str) -> datetime | None:
    if not isinstance(value, str):
        raise FieldError(path, f"expected an RFC 3339 time string, got {type_name(value)}")
    match = _RFC3339.match(value.strip())
    if not match:
        raise FieldError(path, f"not an RFC 3339 time: {value[:60]!r}")
    year, month, day, hour, minute, second, fraction, offset = match.groups()
    try:
        micro = int((fraction or "0")[:6].ljust(6, "0"))
        moment = datetime(int(year), int(month), int(day), int(hour), int(minute), int(second), micro)
        if is_zero_time(moment):
            return None
        moment = moment.replace(tzinfo=_offset(offset)).astimezone(UTC)
    except (ValueError, OverflowError) as exc:
        raise FieldError(path, f"not a valid time: {value[:60]!r} ({exc})") from None
    if moment.year < 1970:
        raise FieldError(path, f"time before 1970: {value[:60]!r}")
    return moment


def _offset(text: str) -> timezone:
    if text in ("Z", "z"):
        return UTC
    sign = 1 if text[0] == "+" else -1
    digits = text[1:].replace(":", "")
    hours, minutes = int(digits[:2]), int(digits[2:])
    if hours > 23 or minutes > 59:
        raise ValueError(f"offset out of range: {text}")
    return timezone(sign * timedelta(hours=hours, minutes=minutes))


def optional_text(value: Any, *, limit: int) -> str:
    """A best-effort extra (a link, a client name): dropped rather than rejecting the alert."""
    try:
        return clean_text(value, "", limit=limit, truncate=True) if value else ""
    except FieldError:
        return ""
