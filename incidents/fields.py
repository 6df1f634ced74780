"""Model fields of Rootline's own."""

from __future__ import annotations

from django.db import models

try:
    import orjson
except ImportError:  # pragma: no cover - optional speed-up
    orjson = None  # type: ignore[assignment]


class StringMapField(models.JSONField):
    """A JSON object of strings (an alert's labels or annotations), read with orjson when it is one.

    Django reads `jsonb` as text and decodes it with `json.loads`, which is the cost here: a
    storm's correlation reads 125,000 alerts' labels and annotations. orjson decodes the same
    text faster. Its answer is used only when it is an object whose values are all
    strings: decoded alike by both (PostgreSQL keeps no duplicate keys and no lone surrogates in
    `jsonb`). Anything else (numbers, where orjson reads integers past 64 bits as floats, nested
    values, what orjson refuses) is decoded by Django's `json.loads`, as a JSONField would."""

    def from_db_value(self, value, expression, connection):
        if orjson is not None and type(value) is str and self.decoder is None:
            try:
                decoded = orjson.loads(value)
            except orjson.JSONDecodeError:
                decoded = None
            if type(decoded) is dict and all(type(item) is str for item in decoded.values()):
                return decoded
        return super().from_db_value(value, expression, connection)
