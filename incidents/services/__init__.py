"""Rootline's writes: plain functions that views, tasks, admin actions and management commands
all call. `integrations` (senders and their tokens), `api_tokens` (the API's), `deliveries` (what
webhooks received and how it is processed), `alerts` (occurrences), `incidents` (what people do to
incidents), `matrix` (the root-cause matrix), `tallies` (Rootline's own figures for /metrics) and
`mail` (outgoing mail, counted); `errors` (the one error type, `RootlineError`, with its codes)
and `roles`."""

from incidents.services.alerts import alerts_upsert
from incidents.services.api_tokens import api_token_issue, api_token_user
from incidents.services.deliveries import (
    Receipt,
    deliveries_drain,
    delivery_count_unstored,
    delivery_process,
    delivery_receive,
    delivery_record_refusal,
    delivery_replay,
    safe_headers,
    stale_delivery_ids,
)
from incidents.services.errors import RootlineError
from incidents.services.integrations import (
    integration_add,
    integration_authenticate,
    integration_rotate,
    roles_ensure,
)
from incidents.services.roles import ROLES

__all__ = [
    "ROLES",
    "Receipt",
    "RootlineError",
    "alerts_upsert",
    "api_token_issue",
    "api_token_user",
    "deliveries_drain",
    "delivery_count_unstored",
    "delivery_process",
    "delivery_receive",
    "delivery_record_refusal",
    "delivery_replay",
    "integration_add",
    "integration_authenticate",
    "integration_rotate",
    "roles_ensure",
    "safe_headers",
    "stale_delivery_ids",
]
