"""ASGI entry point, for servers that prefer it."""

import os

import django
from django.core.handlers.asgi import ASGIHandler, ASGIRequest

from rootline.sender_safe import SenderSafeContentType


class SenderSafeASGIRequest(SenderSafeContentType, ASGIRequest):
    pass


class RootlineASGIHandler(ASGIHandler):
    request_class = SenderSafeASGIRequest


os.environ.setdefault("DJANGO_SETTINGS_MODULE", "rootline.settings")
django.setup(set_prefix=False)  # as get_asgi_application() does, with the request class above
application = RootlineASGIHandler()
