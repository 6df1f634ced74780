"""Rootline's writes: plain functions that views, tasks, admin actions and management commands
all call. `integrations` (senders and tokens), `deliveries` (what webhooks received and how it
is processed), `alerts` (occurrences)."""
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
from incidents.services.integrations import (
    ROLES,
    RootlineError,
    api_token_issue,
    integration_add,
    integration_authenticate,
    roles_ensure,
)

__all__ = [
    "ROLES", "Receipt", "RootlineError", "alerts_upsert", "api_token_issue", "deliveries_drain", "delivery_process",
    "delivery_receive", "delivery_record_refusal", "delivery_replay", "integration_add", "integration_authenticate",
    "roles_ensure", "safe_headers", "stale_delivery_ids",
]
