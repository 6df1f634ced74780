"""The Celery app: configured from Django settings (CELERY_* names), tasks found in the apps."""
import os

from celery import Celery

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "rootline.settings")

app = Celery("rootline")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()
