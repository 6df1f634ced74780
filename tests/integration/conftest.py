"""What the live integration tests share."""

from __future__ import annotations

import pytest


@pytest.fixture
def processing(request, settings):
    """With a broker configured (CI), a real worker processes deliveries; without one, the
    live server processes them eagerly, as `make run` does."""
    if settings.CELERY_BROKER_URL:
        return request.getfixturevalue("start_workers")(1)
    return None
