"""The Celery app: configured from Django settings (CELERY_* names), tasks found in the apps."""

import os

from celery import Celery
from celery.signals import task_postrun, task_prerun

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "rootline.settings")

app = Celery("rootline")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()


@task_prerun.connect
@task_postrun.connect
def database_connection_checked(task=None, **kwargs) -> None:
    """Around a worker's task, what Django does around a request: the connection is kept
    (CELERY_DB_REUSE_MAX) unless it broke, outlived CONN_MAX_AGE or was left inside a transaction.
    Not for eager tasks: they run inside their caller's request or transaction."""
    if task is not None and not getattr(task.request, "is_eager", False):
        from django.db import close_old_connections

        close_old_connections()
