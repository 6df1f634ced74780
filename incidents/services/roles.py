"""Who may do what: roles are Django groups ranked viewer < responder < author < admin, each
allowed what the ones before it are."""

from __future__ import annotations

from django.contrib.auth import get_user_model
from django.contrib.auth.models import AbstractBaseUser, AnonymousUser, Group, User

from incidents.services.errors import forbidden

ROLES = ("viewer", "responder", "author", "admin")
ROLE_RANK = {role: rank for rank, role in enumerate(ROLES)}


def role_of(user: User | AnonymousUser | AbstractBaseUser) -> str:
    """A superuser is an admin; a user in no group is a viewer."""
    if getattr(user, "is_superuser", False):
        return "admin"
    groups = getattr(user, "groups", None)
    names = set(groups.values_list("name", flat=True)) if user.pk and groups is not None else set()
    return max(names & set(ROLE_RANK), key=ROLE_RANK.__getitem__, default="viewer")


def has_role(user: User | AnonymousUser | AbstractBaseUser, role: str) -> bool:
    return ROLE_RANK[role_of(user)] >= ROLE_RANK[role]


def require_role(user: User | AnonymousUser | AbstractBaseUser, role: str) -> None:
    if not has_role(user, role):
        raise forbidden(f"this needs the {role} role; {user.get_username() or 'you'} is a {role_of(user)}")


def acting_user(user: User | AnonymousUser) -> User:
    """The person a request acts as: the views and the API let no anonymous request reach a
    service, so an anonymous one here is refused rather than recorded as nobody."""
    if not isinstance(user, User):
        raise forbidden("sign in first")
    return user


def user_ensure(*, username: str, role: str) -> AbstractBaseUser:
    """The user of that name, created with `role` if new (an import line acts as its person)."""
    user, created = get_user_model().objects.get_or_create(username=username)
    if created:
        user.groups.add(Group.objects.get_or_create(name=role)[0])
    return user


def admin_ensure(*, username: str, password: str) -> AbstractBaseUser:
    """An admin of that name whose password is `password` (the demo's login, printed by `make run`)."""
    User = get_user_model()
    user = User.objects.filter(username=username).first() or User.objects.create_superuser(
        username, f"{username}@localhost", password
    )
    if not user.check_password(password):
        user.set_password(password)
        user.save(update_fields=["password"])
    user.groups.add(Group.objects.get_or_create(name="admin")[0])
    return user
