"""What a person sets for themselves (the time zone their pages show times in, UTC by default) and
the API tokens they were issued."""

from __future__ import annotations

from django.db import models


class Profile(models.Model):
    user = models.OneToOneField("auth.User", on_delete=models.CASCADE, related_name="profile")
    time_zone = models.CharField(max_length=64, default="UTC", help_text="an IANA name, e.g. Europe/Berlin")

    def __str__(self) -> str:
        return f"{self.user_id}: {self.time_zone}"


class ApiToken(models.Model):
    """An API token, kept as its SHA-256 like an integration's (`token_digest`): the token itself is
    printed once, when `manage.py api_token` mints it, and never stored. A user may hold several
    (one per script or machine); `api_token --rotate` revokes the others."""

    user = models.ForeignKey("auth.User", on_delete=models.CASCADE, related_name="api_tokens")
    digest = models.CharField(max_length=64, unique=True)
    hint = models.CharField(max_length=8, help_text="the token's first characters, to tell tokens apart")
    created_at = models.DateTimeField()
    revoked_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        indexes = [models.Index(fields=["user", "revoked_at"], name="api_token_user_idx")]

    def __str__(self) -> str:
        state = f"revoked {self.revoked_at:%Y-%m-%d}" if self.revoked_at else "active"
        return f"{self.user_id}: {self.hint}... ({state})"
