"""Every change a person made, one row per changed field: who, when, from where (page, API, import,
admin, system), which object, the field, its old and new value. The services write it in the
transaction of the change itself; postmortem revisions, remediation history and token changes
read it."""

from __future__ import annotations

from django.db import models


class AuditRecordQuerySet(models.QuerySet):
    def for_object(self, kind: str, object_id: str) -> AuditRecordQuerySet:
        return self.filter(object_kind=kind, object_id=object_id)


class AuditRecord(models.Model):
    class Via(models.TextChoices):
        PAGE = "page"
        API = "api"
        IMPORT = "import"
        ADMIN = "admin"
        SYSTEM = "system"

    at = models.DateTimeField(db_index=True)
    by = models.ForeignKey("auth.User", on_delete=models.SET_NULL, null=True, blank=True, related_name="+")
    by_name = models.CharField(
        max_length=150, blank=True, default="", help_text="kept if the user is deleted"
    )
    via = models.CharField(max_length=10, choices=Via.choices)
    object_kind = models.CharField(max_length=30)
    object_id = models.CharField(max_length=64)
    action = models.CharField(max_length=40, help_text="what the person did, e.g. acknowledge, matrix_edit")
    field = models.CharField(max_length=120)
    old = models.JSONField(null=True, blank=True)
    new = models.JSONField(null=True, blank=True)
    detail = models.JSONField(default=dict, blank=True, help_text="the request as given (never a secret)")

    objects = AuditRecordQuerySet.as_manager()

    class Meta:
        ordering = ["at", "id"]
        indexes = [models.Index(fields=["object_kind", "object_id", "at"], name="audit_object_idx")]

    def __str__(self) -> str:
        return f"{self.by_name or 'system'} {self.action} {self.object_kind}:{self.object_id} {self.field}"

    @property
    def object_label(self) -> str:
        return f"{self.object_kind}:{self.object_id}"
