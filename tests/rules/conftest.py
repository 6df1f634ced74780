from __future__ import annotations

import pytest

from correlate.catalog import load_catalog
from incidents.runbooks import PackAlert, pack_alerts


@pytest.fixture(scope="session")
def packaged_catalog():
    return load_catalog(use_env=False)


@pytest.fixture(scope="session")
def alerts(packaged_catalog) -> list[PackAlert]:
    return pack_alerts(catalog=packaged_catalog)
