"""Raw delivery bodies compressed with lz4 instead of PostgreSQL's default pglz.

lz4 compresses a storm's bodies much faster than pglz, to the same stored size
(bench/results/history.md, fourteenth session). Only where the server
can (PostgreSQL 14 or later, built with lz4, as Debian's is); elsewhere nothing changes.
"""

from django.db import migrations

TABLE, COLUMN = "incidents_delivery", "body"


def lz4_available(schema_editor) -> bool:
    connection = schema_editor.connection
    if connection.vendor != "postgresql" or connection.pg_version < 140000:
        return False
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT 'lz4' = ANY(enumvals) FROM pg_settings WHERE name = 'default_toast_compression'"
        )
        found = cursor.fetchone()
    return bool(found and found[0])


def set_compression(method: str):
    def apply(apps, schema_editor) -> None:
        if lz4_available(schema_editor):
            quote = schema_editor.quote_name
            schema_editor.execute(
                f"ALTER TABLE {quote(TABLE)} ALTER COLUMN {quote(COLUMN)} SET COMPRESSION {method}"
            )

    return apply


class Migration(migrations.Migration):
    dependencies = [
        ("incidents", "0012_alert_string_maps"),
    ]

    operations = [
        migrations.RunPython(set_compression("lz4"), set_compression("default")),
    ]
