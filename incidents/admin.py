from datetime import UTC

from django.contrib import admin, messages
from rest_framework.authtoken.models import TokenProxy

from incidents import services
from incidents.models import Alert, AuditRecord, Delivery, Integration, PendingAction
from incidents.services.integrations import integration_admin_save
from incidents.services.roles import acting_user, has_role

# API tokens are minted by `manage.py api_token` and kept hashed (incidents.ApiToken); DRF's own
# token admin would make keys kept in clear, which the API no longer accepts.
if admin.site.is_registered(TokenProxy):
    admin.site.unregister(TokenProxy)


class RoleAdmin(admin.ModelAdmin):
    """Rootline's admin role sees every model here (Django's model permissions are not used)."""

    def has_module_permission(self, request) -> bool:
        return has_role(request.user, "admin")

    def has_view_permission(self, request, obj=None) -> bool:
        return has_role(request.user, "admin")


@admin.register(Integration)
class IntegrationAdmin(RoleAdmin):
    list_display = ("name", "kind", "path", "rate_limit", "is_active", "created_at")
    readonly_fields = ("token_digest", "created_at")

    def save_model(self, request, obj: Integration, form, change: bool) -> None:
        integration_admin_save(
            integration=obj, user=acting_user(request.user), changed=list(form.changed_data)
        )


@admin.register(AuditRecord)
class AuditRecordAdmin(RoleAdmin):
    """Read only: the record of a change is not itself changed."""

    list_display = ("at", "by_name", "via", "object_label", "action", "field", "old", "new")
    list_filter = ("via", "object_kind", "action")
    search_fields = ("by_name", "object_id", "field")
    date_hierarchy = "at"

    def has_add_permission(self, request) -> bool:
        return False

    def has_change_permission(self, request, obj=None) -> bool:
        return False

    def has_delete_permission(self, request, obj=None) -> bool:
        return False


@admin.register(Delivery)
class DeliveryAdmin(RoleAdmin):
    list_display = ("id", "integration", "received_at", "status", "size", "accepted", "error_excerpt")
    list_filter = ("status", "integration")
    readonly_fields = [field.name for field in Delivery._meta.fields if field.name != "body"] + ["body_text"]
    exclude = ("body",)
    actions = ["replay"]

    @admin.display(description="error")
    def error_excerpt(self, delivery: Delivery) -> str:
        return delivery.error[:120]

    @admin.display(description="body (as received)")
    def body_text(self, delivery: Delivery) -> str:
        pruned = delivery.body_pruned_at
        if pruned is not None:
            at = pruned.astimezone(UTC)
            return f"(pruned by retention on {at:%Y-%m-%d %H:%M} UTC, ROOTLINE_RETAIN_BODIES_DAYS)"
        return bytes(delivery.body[:200_000]).decode("utf-8", "replace")

    @admin.action(description="Replay the selected deliveries")
    def replay(self, request, queryset) -> None:
        for delivery in queryset:
            try:
                replayed = services.delivery_replay(delivery_id=delivery.pk)
            except services.RootlineError as exc:
                self.message_user(request, str(exc), messages.WARNING)
            else:
                self.message_user(
                    request, f"delivery {replayed.pk}: {replayed.status}, {replayed.accepted} alerts"
                )


@admin.register(Alert)
class AlertAdmin(RoleAdmin):
    list_display = (
        "alertname",
        "fingerprint",
        "status",
        "starts_at",
        "ends_at",
        "integration",
        "layer",
        "failure_mode",
    )
    list_filter = ("status", "kind", "integration")
    search_fields = ("alertname", "fingerprint")
    readonly_fields = [field.name for field in Alert._meta.fields]


class PendingStateFilter(admin.SimpleListFilter):
    title = "state"
    parameter_name = "state"

    def lookups(self, request, model_admin):
        return PendingAction.State.choices

    def queryset(self, request, queryset):
        if self.value() == PendingAction.State.WAITING:
            return queryset.waiting()
        if self.value() == PendingAction.State.FAILED:
            return queryset.filter(failed_at__isnull=False, expired_at=None)
        if self.value() == PendingAction.State.EXPIRED:
            return queryset.filter(expired_at__isnull=False)
        return queryset


@admin.register(PendingAction)
class PendingActionAdmin(RoleAdmin):
    """Imported actions waiting for their alerts, those that failed once these arrived, and those
    that expired because they never did."""

    list_display = (
        "source",
        "at",
        "action_name",
        "state",
        "waiting_for",
        "error",
        "kept_at",
        "failed_at",
        "expired_at",
    )
    list_filter = (PendingStateFilter,)
    readonly_fields = [field.name for field in PendingAction._meta.fields]

    @admin.display(description="action")
    def action_name(self, pending: PendingAction) -> str:
        return str(pending.line.get("action", ""))
