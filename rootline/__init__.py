"""The Django project: settings, URLs, the Celery app, WSGI."""

from rootline.celery import app as celery_app

__all__ = ("celery_app",)
