"""Hardening: production settings pass `check --deploy`, every page carries the security headers,
sign-in locks only the (username, address) pair that guessed wrong, and API and integration
tokens are kept hashed and can be rotated."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from io import StringIO
from pathlib import Path

import pytest
from django.contrib.auth.models import User
from django.core.management import call_command
from django.test import Client, override_settings
from django.utils import timezone

from incidents.models import ApiToken, Integration, token_digest
from incidents.services.api_tokens import API_TOKENS
from incidents.services.integrations import INTEGRATIONS

ROOT = Path(__file__).resolve().parents[2]
PRODUCTION = {
    "ROOTLINE_HTTPS": "1",
    "ROOTLINE_SECRET_KEY": "k" * 20 + "-production-secret-for-the-deploy-check-0123456789",
    "ROOTLINE_ALLOWED_HOSTS": "rootline.example.com",
    "ROOTLINE_BASE_URL": "https://rootline.example.com",
}


def run(*args: str) -> str:
    out = StringIO()
    call_command(*args, stdout=out, stderr=StringIO())
    return out.getvalue().strip().splitlines()[-1]


def deploy_check(tmp_path: Path, **env: str) -> subprocess.CompletedProcess:
    # The browser tests set DJANGO_ALLOW_ASYNC_UNSAFE for their live server; no deployment has it.
    clean = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith("ROOTLINE_") and key != "DJANGO_ALLOW_ASYNC_UNSAFE"
    }
    clean.update({"DJANGO_SETTINGS_MODULE": "rootline.settings", "ROOTLINE_DATA_DIR": str(tmp_path), **env})
    return subprocess.run(
        [sys.executable, "manage.py", "check", "--deploy", "--fail-level", "DEBUG"],
        cwd=ROOT,
        env=clean,
        capture_output=True,
        text=True,
        timeout=120,
    )


# check --deploy -----------------------------------------------------------------------------


@pytest.mark.parametrize("preload", ["", "1"])
def test_check_deploy_finds_nothing_with_production_settings(tmp_path, preload):
    result = deploy_check(tmp_path, **PRODUCTION, ROOTLINE_HSTS_PRELOAD=preload)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "System check identified no issues (0 silenced)" in result.stdout or (
        not preload and "identified no issues (1 silenced)" in result.stdout
    ), result.stdout


def test_check_deploy_still_reports_a_development_setup(tmp_path):
    result = deploy_check(tmp_path, ROOTLINE_DEBUG="1")
    assert result.returncode != 0 and "security.W" in result.stdout + result.stderr


# Security headers ---------------------------------------------------------------------------

PAGES = ["/accounts/login/", "/", "/review/", "/healthz", "/api/v1/incidents/", "/hooks/alertmanager/1/"]


@pytest.mark.django_db
@pytest.mark.parametrize("path", PAGES)
def test_every_answer_carries_the_security_headers(client, path):
    response = client.get(path)
    assert response["X-Content-Type-Options"] == "nosniff"
    assert response["Referrer-Policy"] == "same-origin"
    assert response["X-Frame-Options"] == "DENY"
    assert response["Cross-Origin-Opener-Policy"] == "same-origin"
    if response.get("Content-Type", "").startswith("text/html"):
        policy = response["Content-Security-Policy"]
        assert "default-src 'self'" in policy and "frame-ancestors 'none'" in policy


@pytest.mark.django_db
@override_settings(
    SECURE_HSTS_SECONDS=31536000,
    SECURE_HSTS_INCLUDE_SUBDOMAINS=True,
    SECURE_HSTS_PRELOAD=True,
    SESSION_COOKIE_SECURE=True,
    CSRF_COOKIE_SECURE=True,
)
def test_over_https_pages_ask_for_hsts_and_cookies_are_secure(django_user_model):
    django_user_model.objects.create_user("oncall", password="a long pass phrase")
    client = Client(enforce_csrf_checks=False)
    login = client.get("/accounts/login/", secure=True)
    assert login["Strict-Transport-Security"] == "max-age=31536000; includeSubDomains; preload"
    signed_in = client.post(
        "/accounts/login/", {"username": "oncall", "password": "a long pass phrase"}, secure=True
    )
    session = signed_in.cookies["sessionid"]
    assert session["secure"] and session["httponly"] and session["samesite"] == "Lax"


# Sign-in lockout ----------------------------------------------------------------------------


def sign_in(address: str, username: str, password: str, **extra: str):
    return Client(REMOTE_ADDR=address, **extra).post(
        "/accounts/login/", {"username": username, "password": password}
    )


@pytest.fixture
def oncall(django_user_model):
    django_user_model.objects.create_user("oncall", password="the right pass phrase")
    django_user_model.objects.create_user("lead", password="the lead's pass phrase")


@pytest.mark.django_db
@override_settings(AXES_FAILURE_LIMIT=4)
def test_wrong_passwords_lock_the_pair_only(oncall):
    for _ in range(3):
        assert sign_in("203.0.113.9", "oncall", "guess").status_code == 200  # the form again
    locked = sign_in("203.0.113.9", "oncall", "guess")
    assert locked.status_code == 429 and b"Sign-in locked" in locked.content
    # Now even the right password from that address is refused...
    assert sign_in("203.0.113.9", "oncall", "the right pass phrase").status_code == 429
    # ...but the engineer on their phone elsewhere signs in, and so does someone else from there.
    assert sign_in("198.51.100.7", "oncall", "the right pass phrase").status_code == 302
    assert sign_in("203.0.113.9", "lead", "the lead's pass phrase").status_code == 302


@pytest.mark.django_db
@override_settings(AXES_FAILURE_LIMIT=3)
def test_fewer_wrong_passwords_than_the_limit_lock_nothing_and_a_success_forgets_them(oncall):
    for _ in range(2):
        sign_in("203.0.113.9", "oncall", "guess")
    assert sign_in("203.0.113.9", "oncall", "the right pass phrase").status_code == 302
    for _ in range(2):
        sign_in("203.0.113.9", "oncall", "guess")
    assert sign_in("203.0.113.9", "oncall", "the right pass phrase").status_code == 302


@pytest.mark.django_db
@override_settings(AXES_FAILURE_LIMIT=2)
def test_the_lock_lifts_after_the_cool_off(oncall):
    from axes.models import AccessAttempt

    for _ in range(2):
        sign_in("203.0.113.9", "oncall", "guess")
    assert sign_in("203.0.113.9", "oncall", "the right pass phrase").status_code == 429
    # 16 minutes later (the default lock is 15 minutes)
    AccessAttempt.objects.update(attempt_time=timezone.now() - timezone.timedelta(minutes=16))
    assert sign_in("203.0.113.9", "oncall", "the right pass phrase").status_code == 302


@pytest.mark.django_db
@override_settings(AXES_FAILURE_LIMIT=2, HTTPS=True)
def test_behind_the_https_proxy_the_client_is_the_address_the_proxy_added(oncall):
    proxy = "10.0.0.2"
    for _ in range(2):
        sign_in(proxy, "oncall", "guess", HTTP_X_FORWARDED_FOR="203.0.113.9")
    right = "the right pass phrase"
    assert sign_in(proxy, "oncall", right, HTTP_X_FORWARDED_FOR="203.0.113.9").status_code == 429
    # Another client through the same proxy is not locked, whatever it claims to come from first.
    other = sign_in(proxy, "oncall", right, HTTP_X_FORWARDED_FOR="203.0.113.9, 198.51.100.7")
    assert other.status_code == 302


def test_the_lockout_settings_come_from_the_environment(tmp_path):
    probe = (
        "import json, django; from django.conf import settings; django.setup();"
        "print(json.dumps([settings.AXES_FAILURE_LIMIT, settings.AXES_COOLOFF_TIME.total_seconds(),"
        " settings.AXES_LOCKOUT_PARAMETERS]))"
    )
    clean = {key: value for key, value in os.environ.items() if not key.startswith("ROOTLINE_")}
    clean.update({"DJANGO_SETTINGS_MODULE": "rootline.settings", "ROOTLINE_DATA_DIR": str(tmp_path)})

    def read(**env: str) -> list:
        result = subprocess.run(
            [sys.executable, "-c", probe], cwd=ROOT, env={**clean, **env}, capture_output=True, text=True
        )
        assert result.returncode == 0, result.stderr
        return json.loads(result.stdout)

    assert read() == [10, 900.0, [["username", "ip_address"]]]
    assert read(ROOTLINE_LOGIN_FAILURES="5", ROOTLINE_LOGIN_LOCK_MINUTES="60")[:2] == [5, 3600.0]
    bad = subprocess.run(
        [sys.executable, "-c", probe],
        cwd=ROOT,
        env={**clean, "ROOTLINE_LOGIN_FAILURES": "0"},
        capture_output=True,
        text=True,
    )
    assert bad.returncode != 0 and "ROOTLINE_LOGIN_FAILURES must be a whole number" in bad.stderr


# Tokens -------------------------------------------------------------------------------------


def api_status(token: str) -> int:
    return Client().get("/api/v1/alerts/", HTTP_AUTHORIZATION=f"Token {token}").status_code


@pytest.mark.django_db
def test_api_tokens_are_kept_hashed_and_rotation_revokes_the_others():
    first = run("api_token", "bot", "--create-user")
    second = run("api_token", "bot")
    assert first != second and api_status(first) == api_status(second) == 200
    stored = list(ApiToken.objects.values_list("digest", flat=True))
    assert sorted(stored) == sorted([token_digest(first), token_digest(second)])
    assert first not in json.dumps(list(ApiToken.objects.values()), default=str)
    third = run("api_token", "bot", "--rotate")
    assert api_status(third) == 200
    assert api_status(first) == api_status(second) == 401
    assert ApiToken.objects.filter(revoked_at=None).count() == 1


@pytest.mark.django_db
@override_settings(ROOTLINE_INTEGRATION_CACHE_SECONDS=0.5)
def test_a_token_revoked_by_another_process_is_refused_within_the_cache_time():
    token = run("api_token", "bot", "--create-user")
    assert api_status(token) == 200  # remembered by this process now
    # Another process revokes it: no signal reaches this one's cache.
    ApiToken.objects.update(revoked_at=timezone.now())
    assert api_status(token) == 200
    time.sleep(0.6)
    assert api_status(token) == 401


@pytest.mark.django_db
def test_an_inactive_users_token_is_refused():
    token = run("api_token", "bot", "--create-user")
    User.objects.filter(username="bot").update(is_active=False)
    API_TOKENS.clear()
    assert api_status(token) == 401


@pytest.mark.django_db
@override_settings(ROOTLINE_INTEGRATION_CACHE_SECONDS=0.5)
def test_integration_rotate_replaces_the_token_everywhere_within_the_cache_time():
    created = json.loads(run("integration", "add", "--kind", "alertmanager", "--name", "prod-am"))

    def send(token: str) -> int:
        return (
            Client()
            .post(
                created["url"],
                b'{"alerts": []}',
                content_type="application/json",
                HTTP_AUTHORIZATION=f"Bearer {token}",
            )
            .status_code
        )

    assert send(created["token"]) == 202
    rotated = json.loads(run("integration", "rotate", str(created["id"])))
    assert set(rotated) == {"id", "url", "token"} and rotated["url"] == created["url"]
    assert send(rotated["token"]) == 202 and send(created["token"]) == 401  # at once in this process
    # Rotated from another process: this one remembers the old token only for the cache time.
    again = json.loads(run("integration", "rotate", str(created["id"])))
    assert send(again["token"]) == 202
    Integration.objects.filter(pk=created["id"]).update(token_digest=token_digest("from-elsewhere"))
    assert send(again["token"]) == 202
    time.sleep(0.6)
    assert send(again["token"]) == 401 and send("from-elsewhere") == 202
    INTEGRATIONS.clear()


@pytest.mark.django_db
def test_integration_rotate_of_an_unknown_id_is_a_clear_error():
    from django.core.management import CommandError

    with pytest.raises(CommandError, match="no integration 999"):
        run("integration", "rotate", "999")
