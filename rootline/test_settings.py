"""Test settings: the real settings with faster password hashing and an in-memory default database."""
import os

os.environ.setdefault("ROOTLINE_SECRET_KEY", "test-only-not-secret")

from rootline.settings import *  # noqa: E402,F401,F403
from rootline.settings import DATABASE_URL, DATABASES  # noqa: E402

PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
ALLOWED_HOSTS = ["*"]
if not DATABASE_URL:
    DATABASES["default"]["NAME"] = ":memory:"
    DATABASES["default"]["TEST"] = {"NAME": ":memory:"}

# Eager tasks (only where no broker is configured) must fail loudly in tests.
CELERY_TASK_EAGER_PROPAGATES = True
