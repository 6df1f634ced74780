"""Rootline's writes: plain functions that views, tasks, admin actions and management commands
all call. `integrations` (senders and tokens), `deliveries` (what webhooks received and how it
is processed), `alerts` (occurrences), `incidents` (what people do to incidents), `matrix` (the
root-cause matrix); `errors` (the one error type, `RootlineError`, with its codes) and `roles`."""

from incidents.services.alerts import alerts_upsert
from incidents.services.deliveries import (
    Receipt,
    deliveries_drain,
    delivery_process,
    delivery_receive,
    delivery_record_refusal,
    delivery_replay,
    safe_headers,
    stale_delivery_ids,
)
from incidents.services.errors import RootlineError
from incidents.services.integrations import (
    api_token_issue,
    integration_add,
    integration_authenticate,
    roles_ensure,
)
from incidents.services.roles import ROLES

__all__ = [
    "ROLES",
    "Receipt",
    "RootlineError",
    "alerts_upsert",
    "api_token_issue",
    "deliveries_drain",
    "delivery_process",
    "delivery_receive",
    "delivery_record_refusal",
    "delivery_replay",
    "integration_add",
    "integration_authenticate",
    "roles_ensure",
    "safe_headers",
    "stale_delivery_ids",
]
