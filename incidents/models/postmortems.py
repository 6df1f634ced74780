"""Postmortems: one per incident (or shared by several), every revision kept.

A revision is the whole text at one moment: its sections (each the Markdown of one heading of
the team's template, with who last edited it) and the figures frozen when it was drafted (each
with its query, range and result, so they outlive Prometheus' retention). A published revision is
never changed again; `reopen` starts a new draft revision from it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from django.db import models

if TYPE_CHECKING:
    from incidents.models.incidents import Incident


class Postmortem(models.Model):
    class Status(models.TextChoices):
        DRAFT = "draft"
        IN_REVIEW = "in_review"
        PUBLISHED = "published"

    title = models.CharField(max_length=500)
    status = models.CharField(max_length=20, choices=Status.choices, default=Status.DRAFT)
    incidents: models.ManyToManyField[Incident, Any] = models.ManyToManyField(
        "Incident", related_name="postmortems"
    )
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)
    submitted_by = models.ForeignKey(
        "auth.User", on_delete=models.SET_NULL, null=True, blank=True, related_name="+"
    )
    submitted_at = models.DateTimeField(null=True, blank=True)
    approved_by = models.ForeignKey(
        "auth.User", on_delete=models.SET_NULL, null=True, blank=True, related_name="+"
    )
    approved_at = models.DateTimeField(null=True, blank=True)
    published_by = models.ForeignKey(
        "auth.User", on_delete=models.SET_NULL, null=True, blank=True, related_name="+"
    )
    published_at = models.DateTimeField(null=True, blank=True)

    def __str__(self) -> str:
        return f"postmortem {self.pk}: {self.title[:60]}"

    def latest(self) -> PostmortemRevision:
        revision = self.revisions.order_by("-number").first()
        assert revision is not None, "a postmortem is created with its first revision"
        return revision

    def latest_published(self) -> PostmortemRevision | None:
        return self.revisions.filter(published=True).order_by("-number").first()


class PostmortemRevision(models.Model):
    postmortem = models.ForeignKey(Postmortem, on_delete=models.CASCADE, related_name="revisions")
    number = models.PositiveIntegerField()
    by = models.ForeignKey(
        "auth.User",
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        related_name="+",
        help_text="who saved it; empty for the machine's draft",
    )
    at = models.DateTimeField()
    sections = models.JSONField(
        default=list,
        help_text="[{key, title, markdown, edited_by, edited_at, stale, facts}] in template order",
    )
    figures = models.JSONField(default=list, help_text="the figures frozen at drafting (CONTRACT: figures[])")
    published = models.BooleanField(default=False)
    note = models.CharField(max_length=200, blank=True, default="", help_text="drafted, edited, reopened...")

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["postmortem", "number"], name="postmortem_revision_number_unique")
        ]
        ordering = ["postmortem", "number"]

    def __str__(self) -> str:
        return f"postmortem {self.postmortem_id} revision {self.number}"

    def section(self, key: str) -> dict | None:
        return next((s for s in self.sections if s.get("key") == key), None)


class PostmortemComment(models.Model):
    """A reviewer's comment on one section, kept across revisions."""

    postmortem = models.ForeignKey(Postmortem, on_delete=models.CASCADE, related_name="comments")
    section = models.CharField(max_length=100)
    by = models.ForeignKey("auth.User", on_delete=models.SET_NULL, null=True, related_name="+")
    at = models.DateTimeField()
    text = models.TextField()

    class Meta:
        ordering = ["postmortem", "at", "id"]

    def __str__(self) -> str:
        return f"comment on postmortem {self.postmortem_id} {self.section}"
