"""API tokens: who may read and act through the API. Kept hashed like integration tokens (the
token is printed once, when minted); a person may hold several, and rotating revokes the others."""

from __future__ import annotations

import secrets

from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group, User
from django.db import transaction
from django.db.models.signals import post_delete, post_save
from django.utils import timezone

from incidents.models import ApiToken, AuditRecord, token_digest
from incidents.services.audit import audit_record
from incidents.services.errors import RootlineError
from incidents.services.integrations import RecentCache, roles_ensure
from incidents.sql import concrete_field


def api_token_issue(*, username: str, create_user: bool = False, rotate: bool = False) -> str:
    """Mint a new token for `username` and return it (it is stored only as its digest). With
    `rotate`, every other token of the user is revoked in the same transaction."""
    user = api_token_owner(username, create_user)
    token = secrets.token_urlsafe(32)
    with transaction.atomic():
        revoked = 0
        if rotate:
            revoked = ApiToken.objects.filter(user=user, revoked_at=None).update(revoked_at=timezone.now())
        ApiToken.objects.create(
            user=user, digest=token_digest(token), hint=token[:6], created_at=timezone.now()
        )
        audit_record(
            by=None,
            via=AuditRecord.Via.SYSTEM,
            target=("user", user.get_username()),
            action="api_token_rotate" if rotate else "api_token_issue",
            field="api_token",
            old=f"{revoked} revoked" if rotate else None,
            new="issued",
        )
    API_TOKENS.clear()
    return token


def api_token_owner(username: str, create_user: bool) -> User:
    User = get_user_model()
    limit = concrete_field(User, User.USERNAME_FIELD).max_length or 150
    if not username.strip() or len(username) > limit or not username.isprintable():
        raise RootlineError(f"username: expected at most {limit} printable characters, got {username[:60]!r}")
    user = User.objects.filter(username=username).first()
    if user is not None:
        return user
    if not create_user:
        raise RootlineError(f"no user {username!r}; pass --create-user to create a responder")
    user = User.objects.create_user(username=username)
    roles_ensure()
    user.groups.add(Group.objects.get(name="responder"))
    return user


def api_token_user(token: str) -> User | None:
    """The active user whose unrevoked token this is, else None. A token that matched is
    remembered in this process for ROOTLINE_INTEGRATION_CACHE_SECONDS, as integrations are, so an
    API client's requests need no query to authenticate; a revoked token is refused within that
    time (at once in the process that revoked it)."""
    if not token:
        return None
    digest = token_digest(token)
    remembered = API_TOKENS.get(digest)
    if remembered is not None:
        return remembered
    row = ApiToken.objects.select_related("user").filter(digest=digest, revoked_at=None).first()
    if row is None or not row.user.is_active:
        return None
    API_TOKENS.put(digest, row.user)
    return row.user


API_TOKENS: RecentCache[str, User] = RecentCache()  # by token digest
# A change saved in this process (admin, management commands, tests) applies at once here.
post_save.connect(API_TOKENS.clear, sender=ApiToken, dispatch_uid="rootline-api-token-cache-save")
post_delete.connect(API_TOKENS.clear, sender=ApiToken, dispatch_uid="rootline-api-token-cache-delete")
