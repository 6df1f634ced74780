"""PostgreSQL timestamps read by psycopg's C loader.

Django's psycopg 3 backend loads every `timestamptz` through a Python subclass of psycopg's loader
(it sets the value's tzinfo to the connection's time zone), so psycopg's C loader is never used:
the Python loader is paid per value, and an alert row holds three or four (a storm's correlation
reads 125,000 rows). With the session in UTC, as Django keeps it when USE_TZ is on and DATABASES
sets no TIME_ZONE, the C loader returns the very same values, with `datetime.timezone.utc`, faster
(`tests/incidents/test_postgres_types.py`).
"""

from __future__ import annotations

import datetime

from psycopg import abc, adapters, postgres
from psycopg.adapt import Loader
from psycopg.pq import Format

TIMESTAMPTZ_OID = postgres.types["timestamptz"].oid
# psycopg's own loader: a C class with psycopg[binary] or psycopg[c], else its Python one.
_LOADER = adapters.get_loader(TIMESTAMPTZ_OID, Format.TEXT)
if _LOADER is None:  # pragma: no cover - psycopg always registers one for timestamptz
    raise ImportError("psycopg has no timestamptz loader")
PSYCOPG_LOADER: type[abc.Loader] = _LOADER


class UtcTimestamptzLoader(Loader):
    """psycopg's C `timestamptz` loader under the name Django looks for: Django's `create_cursor`
    compares `timezone` with the connection's and registers its own loader when they differ."""

    timezone = datetime.UTC

    def __init__(self, oid: int, context=None) -> None:
        super().__init__(oid, context)
        self._loader = PSYCOPG_LOADER(oid, context)
        self.load = self._loader.load  # type: ignore[method-assign]  # the C method: no Python frame per value

    def load(self, data):  # Loader declares it; each instance's attribute above answers instead
        return self._loader.load(data)


def has_c_loader() -> bool:
    return not PSYCOPG_LOADER.__module__.startswith("psycopg.")


def use_c_timestamps(sender, connection, **kwargs) -> None:
    """`connection_created` receiver: a PostgreSQL connection in UTC loads timestamps in C."""
    if connection.vendor != "postgresql" or not has_c_loader():
        return
    if connection.timezone is not datetime.UTC or connection.timezone_name != "UTC":
        return  # Django's loader relabels values in another zone; leave it to do so
    connection.connection.adapters.register_loader(TIMESTAMPTZ_OID, UtcTimestamptzLoader)
