"""Test settings: the real settings with faster password hashing and an in-memory default database."""

import os

os.environ.setdefault("ROOTLINE_SECRET_KEY", "test-only-not-secret")

from rootline.settings import *  # noqa: E402,F401,F403
from rootline.settings import DATA_DIR, DATABASE_URL, DATABASES  # noqa: E402

PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
ALLOWED_HOSTS = ["*"]
if not DATABASE_URL:
    # A file, not :memory:: live-server tests then give the server thread its own connection
    # instead of sharing the test thread's, which SQLite cannot use from two threads at once.
    DATABASES["default"]["TEST"] = {"NAME": str(DATA_DIR / "test-rootline.sqlite3")}

# Eager tasks (only where no broker is configured) must fail loudly in tests.
CELERY_TASK_EAGER_PROPAGATES = True
