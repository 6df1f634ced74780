"""The engine's catalog as the app loads it: packaged, extended by the team's ROOTLINE_CATALOG
file (settings.CATALOG_PATH). Correlation, evidence, timelines and rules export all read this one."""

from __future__ import annotations

from django.conf import settings

from correlate.catalog import Catalog, load_catalog


def catalog() -> Catalog:
    return load_catalog(settings.CATALOG_PATH, use_env=False)
