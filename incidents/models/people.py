"""What a person sets for themselves: the time zone their pages show times in (UTC by default)."""

from __future__ import annotations

from django.db import models


class Profile(models.Model):
    user = models.OneToOneField("auth.User", on_delete=models.CASCADE, related_name="profile")
    time_zone = models.CharField(max_length=64, default="UTC", help_text="an IANA name, e.g. Europe/Berlin")

    def __str__(self) -> str:
        return f"{self.user_id}: {self.time_zone}"
