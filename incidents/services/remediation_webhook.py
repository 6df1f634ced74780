"""The outbound webhook an issue tracker's automation listens on: every remediation item created
or changed, as JSON, signed with HMAC-SHA256 of the raw body in `X-Rootline-Signature:
sha256=<hex>` (ROOTLINE_REMEDIATION_WEBHOOK_SECRET), as GitHub signs its own webhooks."""

from __future__ import annotations

import hashlib
import hmac
import json

import requests
from django.conf import settings

from incidents.models import RemediationItem

TIMEOUT_SECONDS = 10


class WebhookRefused(Exception):
    """The receiver answered with an error status; the task tries again later."""


def signature(body: bytes, secret: str) -> str:
    return "sha256=" + hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()


def remediation_webhook_send(*, item_id: int, event: str) -> int | None:
    """POST `{"event", "item"}`; the receiver's status, or None when there is nothing to send."""
    from incidents.api.remediation_views import item_payload

    url = settings.REMEDIATION_WEBHOOK_URL
    item = RemediationItem.objects.filter(pk=item_id).select_related("owner", "incident").first()
    if not url or item is None:
        return None
    body = json.dumps({"event": event, "item": item_payload(item)}, sort_keys=True).encode()
    headers = {"Content-Type": "application/json", "User-Agent": "Rootline", "X-Rootline-Event": event}
    if settings.REMEDIATION_WEBHOOK_SECRET:
        headers["X-Rootline-Signature"] = signature(body, settings.REMEDIATION_WEBHOOK_SECRET)
    answer = requests.post(url, data=body, headers=headers, timeout=TIMEOUT_SECONDS)
    if answer.status_code >= 500 or answer.status_code == 429:
        raise WebhookRefused(f"{url} answered {answer.status_code}")
    return answer.status_code
