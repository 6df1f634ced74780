"""Page-shaped reads, one function per page, each with a query-count test."""
from __future__ import annotations

from django.conf import settings
from django.db.models import Count

from incidents.models import Alert, Delivery, Integration


def home_page(*, limit: int = 50) -> dict:
    return {
        "alerts": list(Alert.objects.select_related("integration").order_by("-starts_at", "-id")[:limit]),
        "deliveries": list(Delivery.objects.select_related("integration").defer("body").order_by("-id")[:20]),
        "firing_count": Alert.objects.firing().count(),
    }


def metrics_text() -> str:
    lines = [
        "# HELP rootline_deliveries Webhook deliveries stored, by status.",
        "# TYPE rootline_deliveries gauge",
    ]
    for status, count in Delivery.objects.values_list("status").annotate(n=Count("id")).order_by("status"):
        lines.append(f'rootline_deliveries{{status="{status}"}} {count}')
    lines += ["# HELP rootline_alerts Alert occurrences stored, by status.", "# TYPE rootline_alerts gauge"]
    for status, count in Alert.objects.values_list("status").annotate(n=Count("id")).order_by("status"):
        lines.append(f'rootline_alerts{{status="{status}"}} {count}')
    lines += ["# HELP rootline_integrations Configured integrations.", "# TYPE rootline_integrations gauge"]
    lines.append(f"rootline_integrations {Integration.objects.count()}")
    return "\n".join(lines) + "\n"


def broker_status() -> str:
    from rootline.celery import app

    try:
        with app.connection_for_write() as conn:
            conn.ensure_connection(max_retries=1, timeout=1)
    except Exception as exc:  # noqa: BLE001 - any broker failure is reported, not raised
        return f"error: {exc.__class__.__name__}"
    return "ok" if settings.CELERY_BROKER_URL else "eager"
