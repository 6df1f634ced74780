"""A week's review as it stood when the week closed: Prometheus keeps 15 days by default, so a
closed week's figures are kept here (`manage.py review freeze`, and a beat task each Monday) and
the trend reads them instead of asking for metrics that are gone."""

from __future__ import annotations

from django.db import models


class ReviewWeek(models.Model):
    week = models.CharField(max_length=8, unique=True, help_text="ISO week, e.g. 2026-W49")
    start = models.DateTimeField()
    end = models.DateTimeField()
    figures = models.JSONField(help_text="the review's JSON as it was frozen")
    frozen_at = models.DateTimeField()
    digest_sent_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-start"]

    def __str__(self) -> str:
        return f"review {self.week}"
