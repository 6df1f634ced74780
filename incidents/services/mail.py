"""Outgoing mail (remediation reminders, the weekly digest), counted for /metrics as sent or failed."""

from __future__ import annotations

from django.core.mail import send_mail

from incidents.services.tallies import EMAILS_FAILED, EMAILS_SENT, tally_add


def mail_send(*, kind: str, subject: str, message: str, recipients: list[str]) -> None:
    """Send one message (ROOTLINE_EMAIL_URL) and count it under `kind` (tallies.EMAIL_KINDS).
    A failure is counted, then raised as before: the caller decides whether to try again."""
    try:
        send_mail(
            subject=subject, message=message, from_email=None, recipient_list=recipients, fail_silently=False
        )
    except Exception:
        tally_add(EMAILS_FAILED, kind=kind)
        raise
    tally_add(EMAILS_SENT, kind=kind)
