"""PostgreSQL-specific SQL, in one place; each function does the same through Django's ORM on
other databases (the demo's SQLite).

- Set-based writes for a correlation run: one statement per kind of change, its values sent as
  arrays. A storm's run writes a few incidents, their edges and candidates, and thousands of
  alerts; Django's `bulk_update` builds a `CASE WHEN id = ... THEN ...` expression per row and
  field and `bulk_create` a placeholder per value, and compiling those took more of the
  correlation worker's CPU than the statements took PostgreSQL (`bench/correlate/end_to_end.py
  --profile`). Here each column is one array parameter: `UPDATE ... FROM unnest(...)`,
  `INSERT ... SELECT FROM unnest(...)`, `DELETE ... = ANY(...)` (`tests/incidents/test_bulk_writes.py`).
- A webhook's body stored with `INSERT ... ON CONFLICT DO NOTHING RETURNING id`, bound on the
  server, the body as binary and TOASTed with lz4 where the server has it
  (`insert_unless_conflict`, `tests/ingest/`).
- Advisory locks (`advisory_xact_lock`) and id counts with one array parameter (`count_ids`).

- Alert occurrences upserted by COPY into a session's temporary table, then one `INSERT ...
  SELECT ... ON CONFLICT DO UPDATE` per batch that rewrites a stored row only where the view
  changes it (`copy_upsert`: no per-row work in Django, which cost worker CPU for every alert;
  an unchanged re-sent view costs no write; `tests/ingest/test_resent_groups.py`).
- A correlation run's token swapped in one statement (`swap_run_token`).
- Rootline's own figures (`/metrics`) added to in one `INSERT ... ON CONFLICT DO UPDATE` per
  task run (`tally_upsert`, the same statement on SQLite).
"""

from __future__ import annotations

import itertools
import json
import math
import weakref
import zlib
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from django.db import connection, connections, models, router
from django.db.backends.utils import CursorWrapper
from django.db.models.functions import Cast

BATCH = 5000


def concrete_field(model: type[models.Model], name: str) -> models.Field[Any, Any]:
    """The field of that name (or attname) that is a column of the model's table."""
    field = model._meta.get_field(name)
    if not isinstance(field, models.Field) or field.column is None:
        raise TypeError(f"{model.__name__}.{name} is not a column")
    return field


def rows_update(model: type[models.Model], rows: Sequence[models.Model], fields: Sequence[str]) -> None:
    """Write `fields` (names or attnames) of `rows` by primary key."""
    if not rows:
        return
    if connection.vendor != "postgresql":
        model._default_manager.bulk_update(rows, list(fields), batch_size=1000)
        return
    meta = model._meta
    columns = [concrete_field(model, name) for name in fields]
    quote = connection.ops.quote_name
    names = ", ".join(quote(field.column) for field in columns)
    arrays = ", ".join(f"%s::{field.db_type(connection)}[]" for field in columns)
    assignments = ", ".join(f"{quote(field.column)} = v.{quote(field.column)}" for field in columns)
    sql = (
        f"UPDATE {quote(meta.db_table)} AS t SET {assignments} "
        f"FROM unnest(%s::bigint[], {arrays}) AS v(id, {names}) WHERE t.{quote(meta.pk.column)} = v.id"
    )
    with connection.cursor() as cursor:
        for start in range(0, len(rows), BATCH):
            batch = rows[start : start + BATCH]
            cursor.execute(
                sql, [_array([row.pk for row in batch])] + [_column(field, batch) for field in columns]
            )


def rows_insert(model: type[models.Model], rows: Sequence[models.Model]) -> None:
    """Insert `rows` (their primary keys are not read back)."""
    if not rows:
        return
    if connection.vendor != "postgresql":
        model._default_manager.bulk_create(rows, batch_size=1000)
        return
    meta = model._meta
    columns = [field for field in meta.concrete_fields if not field.primary_key]
    quote = connection.ops.quote_name
    names = ", ".join(quote(field.column) for field in columns)
    arrays = ", ".join(f"%s::{field.db_type(connection)}[]" for field in columns)
    sql = f"INSERT INTO {quote(meta.db_table)} ({names}) SELECT * FROM unnest({arrays})"
    with connection.cursor() as cursor:
        for start in range(0, len(rows), BATCH):
            cursor.execute(sql, [_column(field, rows[start : start + BATCH]) for field in columns])


def rows_delete(model: type[models.Model], column: str, values: Sequence[int]) -> None:
    """Delete the rows whose `column` (a plain or foreign-key id column) is one of `values`. On
    PostgreSQL without Django's deletion collector: only for models nothing refers to and no
    signal handler watches (edges, root candidates)."""
    if not values:
        return
    if connection.vendor != "postgresql":
        model._default_manager.filter(**{f"{column}__in": list(values)}).delete()
        return
    quote = connection.ops.quote_name
    with connection.cursor() as cursor:
        cursor.execute(
            f"DELETE FROM {quote(model._meta.db_table)} WHERE {quote(column)} = ANY(%s::bigint[])",
            [_array(list(values))],
        )


def _column(field: models.Field, rows: Sequence[models.Model]) -> list | str:
    """One column's values as the driver takes them. Only JSON needs Django's preparation (a dict
    becomes a Jsonb); the rest (text, numbers, booleans, ids, aware datetimes) go as they are:
    calling `get_db_prep_save` for every value showed up in a storm's correlation profile."""
    name = field.attname
    if isinstance(field, models.JSONField):
        return [field.get_db_prep_save(getattr(row, name), connection) for row in rows]
    return _array([getattr(row, name) for row in rows])


def _array(values: list) -> list | str:
    """A column's values as PostgreSQL's array text, which the statement casts (`%s::bigint[]`,
    `%s::varchar(30)[]`, ...): psycopg dumps a list element by element in Python, a cost paid
    for every string and timestamp (and ids and flags) a storm's correlation run writes, while
    this is mostly `str.join` and `str.replace` in C, faster for every kind it handles. Other
    kinds (JSON, mixed types, all NULL) stay a list."""
    kinds = {type(value) for value in values}
    kinds.discard(type(None))
    if kinds == {int}:
        if None in values:
            return _array_text(values, str)
        return "{" + ",".join(map(str, values)) + "}"  # ids: no NULL to look for
    if kinds == {bool}:
        return _array_text(values, _flag_text)
    if kinds == {str}:
        return _array_text(values, _quoted_text)
    if kinds == {datetime}:
        return _array_text(values, _moment_text)
    if kinds == {float} or kinds == {int, float}:  # a lag of 0 among 1.25s: psycopg refused that list
        return _array_text(values, _float_text)
    return values


def _array_text(values: list, text_of) -> str:
    return "{" + ",".join("NULL" if value is None else text_of(value) for value in values) + "}"


def _flag_text(value: bool) -> str:
    return "t" if value else "f"


def _quoted_text(value: str) -> str:
    """An element in double quotes: anything but a backslash or a quote stands as it is there
    (commas, braces, blanks, the word NULL)."""
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _moment_text(value: datetime) -> str:
    return '"' + value.isoformat() + '"'  # aware: with its offset


def _float_text(value: float) -> str:
    if math.isfinite(value):
        return repr(float(value))  # the shortest text that reads back as the same double
    return "NaN" if math.isnan(value) else "Infinity" if value > 0 else "-Infinity"


def insert_unless_conflict(instance: models.Model, *, binary: str = "") -> bool:
    """INSERT the new `instance` unless a unique constraint already holds its values (ON
    CONFLICT DO NOTHING), in one statement; returns whether it was stored, and sets its pk.
    `binary`: a field sent as binary (`%b`) on PostgreSQL, e.g. a webhook's body."""
    model = type(instance)
    alias = router.db_for_write(model)
    db = connections[alias]
    sql, fields = insert_statement(model, alias, db, binary)
    params = [field.get_db_prep_save(field.pre_save(instance, True), db) for field in fields]
    with body_cursor(db) if db.vendor == "postgresql" else db.cursor() as cursor:
        cursor.execute(sql, params)
        row = cursor.fetchone()
    if row is None:
        return False
    instance.pk = row[0]
    instance._state.adding = False
    instance._state.db = alias
    return True


INSERT_STATEMENTS: dict[tuple, tuple[str, list]] = {}


def insert_statement(model: type[models.Model], alias: str, db, binary: str) -> tuple[str, list]:
    """`insert_unless_conflict`'s SQL and fields, built once per model and database (a webhook's hot path)."""
    cached = INSERT_STATEMENTS.get((model, alias, db.vendor, binary))
    if cached is None:
        meta = model._meta
        fields = [field for field in meta.concrete_fields if not field.primary_key]
        quote = db.ops.quote_name
        postgresql = db.vendor == "postgresql"
        sql = "INSERT INTO {} ({}) VALUES ({}) ON CONFLICT DO NOTHING RETURNING {}".format(
            quote(meta.db_table),
            ", ".join(quote(field.column) for field in fields),
            ", ".join("%b" if postgresql and field.name == binary else "%s" for field in fields),
            quote(meta.pk.column),
        )
        cached = INSERT_STATEMENTS[(model, alias, db.vendor, binary)] = (sql, fields)
    return cached


def body_cursor(db) -> CursorWrapper:
    """A cursor for storing a body on PostgreSQL: parameters bound on the server, the body sent
    as binary (`%b`) rather than spelled into the statement as a hex literal twice its size, and
    the session's TOAST compression lz4 rather than pglz where the server has it (together they
    take a real share off the PostgreSQL and the web CPU of inserting a large body). Stored
    bodies read back the same whatever compressed them. Django's CursorWrapper keeps its error
    translation and execute wrappers."""
    from django.db.backends.postgresql.base import ServerBindingCursor  # type: ignore[attr-defined]

    db.ensure_connection()
    raw = db.connection
    if raw not in LZ4_CHECKED:
        with raw.cursor() as cursor:
            cursor.execute(
                "SELECT 1 FROM pg_settings WHERE name = 'default_toast_compression' AND 'lz4' = ANY(enumvals)"
            )
            if cursor.fetchone() is not None:
                cursor.execute("SET default_toast_compression = lz4")
        LZ4_CHECKED.add(raw)
    return CursorWrapper(ServerBindingCursor(raw), db)


LZ4_CHECKED: weakref.WeakSet = weakref.WeakSet()


def advisory_xact_lock(space: int, number: int) -> bool:
    """Take PostgreSQL's advisory lock (`space`, `number`) until the transaction ends; False on
    other databases, where the caller locks rows instead."""
    if connection.vendor != "postgresql":
        return False
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_advisory_xact_lock(%s, %s)", [space, number])
    return True


def count_ids(model: type[models.Model], column: str, ids: list[int]) -> int:
    """How many rows of `model` have `column` (an id column) among `ids`: one array parameter
    on PostgreSQL instead of a placeholder per id."""
    if connection.vendor != "postgresql":
        return model._default_manager.filter(**{f"{column}__in": ids}).count()
    quote = connection.ops.quote_name
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT count(*) FROM {quote(model._meta.db_table)} WHERE {quote(column)} = ANY(%s)", [ids]
        )
        return cursor.fetchone()[0]


_COPY_BATCHES = itertools.count()  # the rows of one statement, told apart within a transaction


def copy_upsert(
    db,
    model: type[models.Model],
    view_fields: Sequence[str],
    unique: Sequence[str],
    batches: list[tuple[list[tuple], list[str]]],
    *,
    not_compared: Sequence[str] = (),
) -> None:
    """Upsert batches of rows (values in `view_fields` order; every other column its field's
    default) in order: one COPY of every row, then per batch an INSERT of the new rows and an
    UPDATE of its `update_fields` where a stored row differs in them (`not_compared` fields are
    written without being compared). Rows are inserted in `unique` order, so concurrent upserts
    of overlapping rows lock them in the same order. Within the caller's transaction."""
    quote = db.ops.quote_name
    meta = model._meta
    fields = [field for field in meta.concrete_fields if not field.primary_key]
    by_name = {field.name: field for field in fields}
    default_fields = [field for field in fields if field.name not in view_fields]
    defaults = tuple(field.get_db_prep_save(field.get_default(), db) for field in default_fields)
    columns = ", ".join(
        quote(field.column) for field in [by_name[name] for name in view_fields] + default_fields
    )
    temporary = f"rootline_upsert_{meta.db_table}_{zlib.crc32(columns.encode()):08x}"
    table = quote(meta.db_table)
    keys = ", ".join(quote(concrete_field(model, name).column) for name in unique)
    statements = []
    with db.cursor() as cursor, db.wrap_database_errors:
        cursor.execute(
            f"CREATE TEMPORARY TABLE IF NOT EXISTS {temporary} ON COMMIT DELETE ROWS AS "
            f"SELECT {columns}, 0 AS rootline_batch FROM {table} WITH NO DATA"
        )
        with cursor.cursor.copy(f"COPY {temporary} ({columns}, rootline_batch) FROM STDIN") as copy:
            for rows, update_fields in batches:
                batch = next(_COPY_BATCHES)
                statements.append((batch, update_fields))
                tail = defaults + (batch,)
                for row in rows:
                    copy.write_row(row + tail)
        for batch, update_fields in statements:
            update = [concrete_field(model, name).column for name in update_fields]
            compared = [
                column
                for column in update
                if column not in {concrete_field(model, name).column for name in not_compared}
            ]
            sets = ", ".join(f"{quote(column)} = EXCLUDED.{quote(column)}" for column in update)
            stored = ", ".join(f"{table}.{quote(column)}" for column in compared)
            sent = ", ".join(f"EXCLUDED.{quote(column)}" for column in compared)
            cursor.execute(
                f"INSERT INTO {table} ({columns}) SELECT {columns} FROM {temporary} "
                f"WHERE rootline_batch = %s ORDER BY {keys} ON CONFLICT ({keys}) "
                f"DO UPDATE SET {sets} WHERE ({stored}) IS DISTINCT FROM ({sent})",
                [batch],
            )


def swap_run_token(model: type[models.Model], key: str, token: str) -> str:
    """Store `token` as the key's run token and return the one it replaces ("" for a new key),
    in one statement on PostgreSQL."""
    table = connection.ops.quote_name(model._meta.db_table)
    with connection.cursor() as cursor:
        cursor.execute(
            f"WITH previous AS (SELECT run_token FROM {table} WHERE key = %s), "
            f"stored AS (INSERT INTO {table} (key, run_token) VALUES (%s, %s) "
            f"ON CONFLICT (key) DO UPDATE SET run_token = EXCLUDED.run_token) "
            f"SELECT run_token FROM previous",
            [key, key, token],
        )
        found = cursor.fetchone()
    return found[0] if found else ""


def filter_json_list_has(rows: models.QuerySet, field: str, value: str) -> models.QuerySet:
    """Rows whose JSON list `field` holds the string `value`: `@>` on PostgreSQL's jsonb; on
    SQLite, which has no JSON containment in Django, the value's JSON text inside the stored
    list's text (a layer or failure mode name holds no quote, so its quoted text matches only
    that element)."""
    if connection.vendor == "postgresql":
        return rows.filter(**{f"{field}__contains": [value]})
    as_text = f"{field}_text"
    return rows.alias(**{as_text: Cast(field, models.TextField())}).filter(
        **{f"{as_text}__contains": json.dumps(value)}
    )


def tally_upsert(
    model: type[models.Model], rows: Sequence[tuple[str, str, str, float]], at: datetime
) -> None:
    """Add each (name, labels, kind, value) to its stored row in one statement, the row created
    at the value if it is new: a `sum` grows by the value, a `latest` takes it. Rows go in sorted
    order, so two processes adding to the same rows lock them in the same order (no deadlock).
    The same SQL on PostgreSQL and SQLite (3.24+: `ON CONFLICT ... DO UPDATE`)."""
    if not rows:
        return
    table = connection.ops.quote_name(model._meta.db_table)
    moment = concrete_field(model, "updated_at").get_db_prep_save(at, connection)
    values = ", ".join(["(%s, %s, %s, %s, %s)"] * len(rows))
    params = [param for row in sorted(rows) for param in (*row, moment)]
    with connection.cursor() as cursor:
        cursor.execute(
            f"INSERT INTO {table} (name, labels, kind, value, updated_at) VALUES {values} "
            f"ON CONFLICT (name, labels) DO UPDATE SET "
            f"value = CASE WHEN EXCLUDED.kind = 'latest' THEN EXCLUDED.value "
            f"ELSE {table}.value + EXCLUDED.value END, updated_at = EXCLUDED.updated_at",
            params,
        )
