"""Rootline's settings: one module, every difference between environments is a variable.

The variables are the public contract's (README, docs/contract.md). With none set, Rootline runs
as a zero-setup demo: SQLite in the project's data folder, Celery eager, plain HTTP on loopback.
"""

from __future__ import annotations

import os
import secrets
from datetime import timedelta
from pathlib import Path

import dj_database_url
import dj_email_url
from celery.schedules import crontab
from django.core.exceptions import ImproperlyConfigured

BASE_DIR = Path(__file__).resolve().parent.parent
DATA_DIR = Path(os.environ.get("ROOTLINE_DATA_DIR", BASE_DIR / "var"))
LOOPBACK_HOSTS = ["127.0.0.1", "localhost", "[::1]"]


def env_flag(name: str, default: bool = False) -> bool:
    value = os.environ.get(name)
    if value is None or value.strip() == "":
        return default
    return value.strip().lower() in {"1", "true", "yes", "on"}


def env_whole(name: str, default: int, low: int, high: int, unit: str = "") -> int:
    """A whole number from `low` to `high` (`unit` names it in the error), or `default` when unset
    or blank."""
    value = os.environ.get(name, "").strip() or str(default)
    if not value.isdigit() or not low <= int(value) <= high:
        of = f" of {unit}" if unit else ""
        raise ImproperlyConfigured(f"{name} must be a whole number{of} from {low} to {high}, not {value!r}")
    return int(value)


def env_list(name: str, default: list[str]) -> list[str]:
    value = os.environ.get(name, "")
    items = [item.strip() for item in value.split(",") if item.strip()]
    return items or default


def local_secret_key() -> str:
    """A generated key kept in the data folder, so sessions survive a restart of the demo."""
    path = DATA_DIR / "secret_key"
    if path.exists():
        return path.read_text().strip()
    DATA_DIR.mkdir(parents=True, exist_ok=True)
    key = secrets.token_urlsafe(50)
    path.write_text(key)
    path.chmod(0o600)
    return key


DEBUG = env_flag("ROOTLINE_DEBUG")
HTTPS = env_flag("ROOTLINE_HTTPS")
ALLOWED_HOSTS = env_list("ROOTLINE_ALLOWED_HOSTS", LOOPBACK_HOSTS)
PRODUCTION = HTTPS or any(host not in LOOPBACK_HOSTS for host in ALLOWED_HOSTS)

SECRET_KEY = os.environ.get("ROOTLINE_SECRET_KEY", "")
if not SECRET_KEY:
    if PRODUCTION:
        raise ImproperlyConfigured(
            "ROOTLINE_SECRET_KEY is not set: a production Rootline (ROOTLINE_HTTPS=1 or a "
            "non-loopback host in ROOTLINE_ALLOWED_HOSTS) refuses to start without it."
        )
    SECRET_KEY = local_secret_key()

BASE_URL = os.environ.get("ROOTLINE_BASE_URL", "http://127.0.0.1:8000").rstrip("/")
MAX_BODY = int(os.environ.get("ROOTLINE_MAX_BODY", str(10 * 1024 * 1024)))
PROMETHEUS_URL = os.environ.get("PROMETHEUS_URL", "") or None
# Each query to Prometheus (evidence, postmortem figures, remediation checks) waits at most this
# long; a slower answer is a gap the next refresh fills, and the rest of that collection is not
# asked (a Prometheus that slow is treated as down).
PROMETHEUS_TIMEOUT_SECONDS = (
    env_whole("ROOTLINE_PROMETHEUS_TIMEOUT_MS", 4000, 100, 120_000, "milliseconds") / 1000
)
CATALOG_PATH = os.environ.get("ROOTLINE_CATALOG", "") or None
# Postmortems (docs/postmortems.md): a team's template, the severity that needs one, its due time.
POSTMORTEM_TEMPLATE = os.environ.get("ROOTLINE_POSTMORTEM_TEMPLATE", "") or None
POSTMORTEM_SEVERITY = os.environ.get("ROOTLINE_POSTMORTEM_SEVERITY", "critical").strip().lower()
if POSTMORTEM_SEVERITY not in ("critical", "warning", "info"):
    raise ImproperlyConfigured(
        f"ROOTLINE_POSTMORTEM_SEVERITY is {POSTMORTEM_SEVERITY!r}: expected critical, warning or info"
    )
try:
    POSTMORTEM_DUE_DAYS = float(os.environ.get("ROOTLINE_POSTMORTEM_DUE_DAYS", "7"))
except ValueError as exc:
    raise ImproperlyConfigured(f"ROOTLINE_POSTMORTEM_DUE_DAYS: expected a number of days ({exc})") from exc
POSTMORTEM_FOUR_EYES = env_flag("ROOTLINE_POSTMORTEM_FOUR_EYES")
POSTMORTEM_AUTO_DRAFT = True  # the demo loader turns it off while it replays a morning's actions
SLO_TARGETS = os.environ.get("ROOTLINE_SLO_TARGETS", "") or None

# Outgoing mail (remediation reminders, the weekly digest): ROOTLINE_EMAIL_URL such as
# smtp://user:pass@host:587?tls=1 (dj-email-url); unset, mails are written to the log.
_EMAIL_URL = os.environ.get("ROOTLINE_EMAIL_URL", "")
if _EMAIL_URL:
    try:
        vars().update(dj_email_url.parse(_EMAIL_URL))
    except (KeyError, ValueError) as exc:
        raise ImproperlyConfigured(f"ROOTLINE_EMAIL_URL is not a usable mail URL: {exc}") from exc
else:
    EMAIL_BACKEND = "django.core.mail.backends.console.EmailBackend"
DEFAULT_FROM_EMAIL = os.environ.get("ROOTLINE_EMAIL_FROM", "rootline@localhost")
# The weekly review's Monday digest goes to these (comma-separated); none: no digest is mailed.
REVIEW_RECIPIENTS = [
    address.strip()
    for address in os.environ.get("ROOTLINE_REVIEW_RECIPIENTS", "").split(",")
    if address.strip()
]
# A warning judged a false positive counts as ignored when its incident (or one on the same scope)
# had another alert within this many hours after it (incidents/review/alert_figures.py).
REVIEW_IGNORED_HOURS = env_whole("ROOTLINE_REVIEW_IGNORED_HOURS", 6, 1, 168, "hours")
# An issue tracker's automation hears of every remediation item created or changed.
REMEDIATION_WEBHOOK_URL = os.environ.get("ROOTLINE_REMEDIATION_WEBHOOK_URL", "") or None
REMEDIATION_WEBHOOK_SECRET = os.environ.get("ROOTLINE_REMEDIATION_WEBHOOK_SECRET", "")
# /metrics takes `Authorization: Bearer <token>` when this is set; unset, any scraper may read it.
METRICS_TOKEN = os.environ.get("ROOTLINE_METRICS_TOKEN", "")

INSTALLED_APPS = [
    "rootline.apps.RootlineAdminConfig",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.humanize",
    "whitenoise.runserver_nostatic",
    "django.contrib.staticfiles",
    "rest_framework",
    "rest_framework.authtoken",  # only for migration 0026, which moved its clear tokens to ApiToken
    "drf_spectacular",
    "axes",
    "incidents",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "rootline.middleware.NulQueryMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "rootline.middleware.TimeZoneMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "csp.middleware.CSPMiddleware",
    "axes.middleware.AxesMiddleware",  # last, as django-axes asks: it answers a locked-out sign-in
]

# Sign-in is rate limited by django-axes on the (username, address) pair together, never on either
# alone: a stranger guessing the on-call engineer's password from elsewhere locks only their own
# pair, and the engineer still signs in from their phone. Behind the HTTPS proxy the address is
# the client's, from X-Forwarded-For (one proxy), not the proxy's own.
AUTHENTICATION_BACKENDS = ["axes.backends.AxesStandaloneBackend", "django.contrib.auth.backends.ModelBackend"]
AXES_FAILURE_LIMIT = env_whole("ROOTLINE_LOGIN_FAILURES", 10, 1, 1000, "wrong passwords")
AXES_COOLOFF_TIME = timedelta(minutes=env_whole("ROOTLINE_LOGIN_LOCK_MINUTES", 15, 1, 1440, "minutes"))
AXES_LOCKOUT_PARAMETERS = [["username", "ip_address"]]
AXES_RESET_ON_SUCCESS = True
AXES_LOCKOUT_TEMPLATE = "registration/locked_out.html"
AXES_VERBOSE = False
# Only failures are kept (and cleared by a success): a row per successful sign-in would grow for good.
AXES_DISABLE_ACCESS_LOG = True
AXES_CLIENT_IP_CALLABLE = "rootline.middleware.client_address"

# Content-Security-Policy (django-csp): no inline script or style anywhere, everything from this
# origin. Plotly draws its charts under `style-src 'self'`: it styles SVG through the CSSOM
# (element.style, insertRule), which the policy does not govern.
CONTENT_SECURITY_POLICY = {
    "DIRECTIVES": {
        "default-src": ["'self'"],
        "script-src": ["'self'"],
        "style-src": ["'self'"],
        "img-src": ["'self'", "data:"],
        "font-src": ["'self'"],
        "connect-src": ["'self'"],
        "object-src": ["'none'"],
        "base-uri": ["'none'"],
        "form-action": ["'self'"],
        "frame-ancestors": ["'none'"],
    }
}
X_FRAME_OPTIONS = "DENY"
SECURE_REFERRER_POLICY = "same-origin"
SECURE_CONTENT_TYPE_NOSNIFF = True

ROOT_URLCONF = "rootline.urls"
WSGI_APPLICATION = "rootline.wsgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ],
        },
    },
]


def sqlite_database(path: Path) -> dj_database_url.DBConfig:
    """SQLite tuned so that parallel deliveries queue instead of failing with 'database is locked':
    WAL lets readers run beside the writer, IMMEDIATE takes the write lock at BEGIN (no upgrade
    deadlock), and the busy timeout makes a second writer wait."""
    path.parent.mkdir(parents=True, exist_ok=True)
    return {
        "ENGINE": "django.db.backends.sqlite3",
        "NAME": str(path),
        "OPTIONS": {
            "transaction_mode": "IMMEDIATE",
            "timeout": 30,
            "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;",
        },
    }


DATABASE_URL = os.environ.get("DATABASE_URL", "")
if DATABASE_URL:
    DATABASES = {"default": dj_database_url.parse(DATABASE_URL, conn_max_age=600, conn_health_checks=True)}
else:
    DATABASES = {"default": sqlite_database(DATA_DIR / "rootline.sqlite3")}

DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
]
LOGIN_URL = "/accounts/login/"
LOGIN_REDIRECT_URL = "/"
LOGOUT_REDIRECT_URL = "/accounts/login/"

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True

STATIC_URL = "/static/"
STATIC_ROOT = DATA_DIR / "static"
STATIC_ROOT.mkdir(parents=True, exist_ok=True)
STATICFILES_DIRS = [BASE_DIR / "static"] if (BASE_DIR / "static").exists() else []
# Served by the app itself (gunicorn included): no collectstatic step, no CDN.
WHITENOISE_USE_FINDERS = True
WHITENOISE_AUTOREFRESH = DEBUG

DATA_UPLOAD_MAX_MEMORY_SIZE = MAX_BODY

if HTTPS:
    SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
    SECURE_SSL_REDIRECT = True
    SESSION_COOKIE_SECURE = True
    CSRF_COOKIE_SECURE = True
    SECURE_HSTS_SECONDS = 31536000
    SECURE_HSTS_INCLUDE_SUBDOMAINS = True
    CSRF_TRUSTED_ORIGINS = [BASE_URL] if BASE_URL.startswith("https://") else []
# Asking browsers to preload HSTS is a commitment (leaving the list takes months), so it is the
# operator's choice, off by default; left off, Django's reminder of it (security.W021) is not a
# finding of `check --deploy`.
SECURE_HSTS_PRELOAD = env_flag("ROOTLINE_HSTS_PRELOAD")
SILENCED_SYSTEM_CHECKS = [] if SECURE_HSTS_PRELOAD else ["security.W021"]
SESSION_COOKIE_HTTPONLY = True
SESSION_COOKIE_SAMESITE = "Lax"
CSRF_COOKIE_SAMESITE = "Lax"
# Webhook paths are exempt from the redirect: a sender that follows no redirects still gets through.
SECURE_REDIRECT_EXEMPT = [r"^hooks/", r"^healthz$"]

CELERY_BROKER_URL = os.environ.get("CELERY_BROKER_URL", "") or None
CELERY_TASK_ALWAYS_EAGER = CELERY_BROKER_URL is None
CELERY_TASK_EAGER_PROPAGATES = False
CELERY_TASK_IGNORE_RESULT = True
CELERY_RESULT_BACKEND = None
CELERY_TASK_ACKS_LATE = True
CELERY_TASK_REJECT_ON_WORKER_LOST = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 4
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
# Celery's Django fixup closes the database connection before and after every task unless this is
# set, so each drain or correlation run paid a new PostgreSQL connection (a backend started per
# task). Tasks keep theirs as web requests do instead (rootline/celery.py: CONN_MAX_AGE, health
# checks), and the fixup still closes it every 2 x this many tasks.
CELERY_DB_REUSE_MAX = 1000
CELERY_BROKER_TRANSPORT_OPTIONS = {"visibility_timeout": 3600}
CELERY_TASK_DEFAULT_QUEUE = "rootline"
# Correlation runs get their own queue and worker (bin/serve): a run over a large window takes
# seconds and runs of one key wait on each other's lock, so on the shared queue an alert storm
# let them hold every worker process and ingestion stopped (bench/ingest, 2026-11-29).
CELERY_CORRELATION_QUEUE = os.environ.get("ROOTLINE_CORRELATION_QUEUE", "rootline-correlation")
# Evidence collection (Prometheus range queries, seconds when Prometheus is slow) on its own queue
# too: a burst of collections, or a slow Prometheus, must not hold up the storing of alerts.
CELERY_EVIDENCE_QUEUE = os.environ.get("ROOTLINE_EVIDENCE_QUEUE", "rootline-evidence")
CELERY_TASK_ROUTES = {
    "incidents.correlate_key": {"queue": CELERY_CORRELATION_QUEUE},
    "incidents.collect_evidence": {"queue": CELERY_EVIDENCE_QUEUE},
    "incidents.collect_evidence_each": {"queue": CELERY_EVIDENCE_QUEUE},
    "incidents.draft_postmortems": {"queue": CELERY_EVIDENCE_QUEUE},  # it reads the metrics, as evidence does
    "incidents.remediation_check": {"queue": CELERY_EVIDENCE_QUEUE},  # so do the checks
    "incidents.prune": {"queue": CELERY_EVIDENCE_QUEUE},  # minutes of batches: never an ingestion worker's
}
# With N > 1 shards, a key's runs always go to the same queue of N (`<queue>-0` ... `<queue>-N-1`,
# chosen by a hash of the key), each served by one process that keeps its keys' engine state
# between runs (incidents/services/correlation/state.py). Every process that enqueues must use the same N.
CORRELATION_SHARDS = env_whole("ROOTLINE_CORRELATION_SHARDS", 1, 1, 64)
# After a run, the key's next run waits up to twice its length, at most this pace (milliseconds): a
# trickle of deliveries shares runs instead of paying a run's fixed cost per delivery; the first
# alert after a quiet spell goes at once (incidents/flow.py). 0: no pacing.
CORRELATION_PACE_SECONDS = env_whole("ROOTLINE_CORRELATION_PACE_MS", 250, 0, 60_000, "milliseconds") / 1000
# A correlation worker's run takes at most this many new alerts of its key, oldest first, each run
# committed on its own (incidents/services/correlation/run.py). Bigger runs cost less per alert (a
# run's fixed cost is shared by more of them), smaller runs commit their first alerts sooner and
# hold the key's lock (which a person's merge waits on) for less. 3,000: in the 5,000/s end-to-end
# storm, less correlation CPU than 1,000 and a lower median delivery -> incident
# (bench/results/history.md, eighth session).
CORRELATION_SLICE = env_whole("ROOTLINE_CORRELATION_SLICE", 3000, 100, 100_000, "alerts")
# A worker's kept state ranks an incident of 500 alerts or more (edges, chain, root candidates)
# at most this often; its alerts join it on every run meanwhile (incidents/services/correlation/state.py).
CORRELATION_RANK_EVERY_SECONDS = (
    env_whole("ROOTLINE_CORRELATION_RANK_EVERY_MS", 5000, 0, 600_000, "milliseconds") / 1000
)
# A correlation worker keeps at most this many alerts of engine state, all its clusters together;
# beyond it, runs rebuild their cluster from the window, far slower. By default the shards share
# KEPT_STATE_MEMORY_SHARE of the machine's memory (or of its cgroup's limit) at KEPT_ALERT_BYTES an
# alert (bench/correlate/kept_memory.py): the state is what a long storm needs memory for.
KEPT_STATE_MEMORY_SHARE = 0.4
KEPT_ALERT_BYTES = 10_000


def memory_bytes() -> int:
    """The machine's memory, or the cgroup's limit when it is lower (a container)."""
    total = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    try:
        limit = Path("/sys/fs/cgroup/memory.max").read_text().strip()
    except OSError:
        return total
    return min(total, int(limit)) if limit.isdigit() else total


CORRELATION_KEPT_ALERTS = env_whole(
    "ROOTLINE_CORRELATION_KEPT_ALERTS",
    max(50_000, int(memory_bytes() * KEPT_STATE_MEMORY_SHARE / CORRELATION_SHARDS / KEPT_ALERT_BYTES)),
    1_000,
    50_000_000,
    "alerts",
)
# An imported action whose alerts have not arrived this long after it was kept (import_actions
# before import_alerts) expires, naming them, and is no longer retried (incidents/replay.py).
PENDING_ACTION_TTL_HOURS = env_whole("ROOTLINE_PENDING_ACTION_TTL_HOURS", 24, 1, 8760, "hours")
# Retention (docs/retention.md, `manage.py prune` and beat's `incidents.prune`): delivery bodies are
# emptied this many days after they were received (the row stays), and resolved alerts in no
# incident that nothing refers to are deleted this many days after they ended, their counts rolled
# up for the weekly review. Alerts stay at least a week: correlation and the review read them.
RETAIN_BODIES_DAYS = env_whole("ROOTLINE_RETAIN_BODIES_DAYS", 30, 1, 3650, "days")
RETAIN_ALERTS_DAYS = env_whole("ROOTLINE_RETAIN_ALERTS_DAYS", 90, 7, 3650, "days")
# The sweeps that make the database, not the broker, the record of work owed: every this many
# seconds, beat requeues what was stored and not taken up after REQUEUE_AFTER_SECONDS. A Celery
# message held by a worker that was killed comes back only after the broker's visibility timeout
# (an hour), so these bound the delay of a crash, a lost message or a broker outage.
SWEEP_SECONDS = float(env_whole("ROOTLINE_SWEEP_SECONDS", 60, 1, 3600, "seconds"))
REQUEUE_AFTER_SECONDS = env_whole("ROOTLINE_REQUEUE_AFTER_SECONDS", 120, 1, 86400, "seconds")
CELERY_BEAT_SCHEDULE = {
    # Mondays 00:30 UTC: the week that just closed is frozen (its objectives read while Prometheus
    # still holds them); 07:00 UTC, its digest is mailed to ROOTLINE_REVIEW_RECIPIENTS.
    "review-freeze": {
        "task": "incidents.review_freeze",
        "schedule": crontab(minute=30, hour=0, day_of_week="mon"),
    },
    "review-digest": {
        "task": "incidents.review_digest",
        "schedule": crontab(minute=0, hour=7, day_of_week="mon"),
    },
    # Every 5 minutes: remediation items done (or verified) are checked against their data; their
    # owners hear of deadlines within 24 hours, of overdue items and of regressions, once a change.
    "remediation-check": {"task": "incidents.remediation_check", "schedule": 300.0},
    "remediation-remind": {"task": "incidents.remediation_remind", "schedule": 300.0},
    # Every ROOTLINE_SWEEP_SECONDS: deliveries still pending ROOTLINE_REQUEUE_AFTER_SECONDS after
    # they were stored (a broker outage, a worker killed with its messages unacknowledged) are
    # enqueued again.
    "requeue-stale-deliveries": {
        "task": "incidents.requeue_stale_deliveries",
        "schedule": SWEEP_SECONDS,
    },
    # Keys whose stored alerts no correlation run has taken (the run's enqueue failed with the
    # broker or the cache down, or its worker died) are queued again.
    "requeue-uncorrelated": {
        "task": "incidents.requeue_uncorrelated",
        "schedule": SWEEP_SECONDS,
    },
    # Incidents changed since their last evidence collection with none pending (its worker died
    # mid-collection, its message was lost) get one.
    "requeue-evidence": {
        "task": "incidents.requeue_evidence",
        "schedule": SWEEP_SECONDS,
    },
    # Every 30 s: actions imported before their alerts, applied once those are stored and correlated
    # (or expired, PENDING_ACTION_TTL_HOURS after they were kept).
    "apply-pending-actions": {
        "task": "incidents.apply_pending_actions",
        "schedule": 30.0,
    },
    # Daily at 03:15 UTC (a quiet hour for most fleets): retention prunes delivery bodies and old
    # alerts in short batches, for a few minutes at most; what is left waits for the next day.
    "prune": {
        "task": "incidents.prune",
        "schedule": crontab(minute=15, hour=3),
    },
}

# Webhook deliveries are processed by a few drain tasks in batches (one flag in the shared cache
# tells whether one is queued) instead of one task each; it needs the cache shared by the web and
# the worker processes, hence Redis. ROOTLINE_INGEST_DRAIN=0 goes back to one task per delivery.
ROOTLINE_INGEST_DRAIN = env_flag(
    "ROOTLINE_INGEST_DRAIN", bool(CELERY_BROKER_URL and CELERY_BROKER_URL.startswith("redis"))
)
# A webhook remembers the integration that authenticated it for this long (per web process), so
# it needs no query for it; a disabled integration or a replaced token stops being accepted within
# this many seconds. 0: look it up on every request.
ROOTLINE_INTEGRATION_CACHE_SECONDS = float(os.environ.get("ROOTLINE_INTEGRATION_CACHE_SECONDS", "2") or 2)

if CELERY_BROKER_URL and CELERY_BROKER_URL.startswith("redis"):
    # Short socket timeouts: with Redis down or hung, a flag or a rate-limit count fails within a
    # second (callers go on without it) instead of holding a webhook or a worker.
    CACHES = {
        "default": {
            "BACKEND": "django.core.cache.backends.redis.RedisCache",
            "LOCATION": CELERY_BROKER_URL,
            "OPTIONS": {"socket_connect_timeout": 1, "socket_timeout": 2},
        }
    }
else:
    CACHES = {"default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"}}

REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "incidents.api.request.TokenAuthentication",
        "rest_framework.authentication.SessionAuthentication",
    ],
    "DEFAULT_PARSER_CLASSES": [
        "incidents.api.request.JSONParser",
        "rest_framework.parsers.FormParser",
        "rest_framework.parsers.MultiPartParser",
    ],
    "DEFAULT_PERMISSION_CLASSES": ["rest_framework.permissions.IsAuthenticated"],
    "DEFAULT_PAGINATION_CLASS": "incidents.api.pagination.Pagination",
    "DEFAULT_SCHEMA_CLASS": "drf_spectacular.openapi.AutoSchema",
    "DEFAULT_RENDERER_CLASSES": ["rest_framework.renderers.JSONRenderer"],
    "PAGE_SIZE": 50,
}
SPECTACULAR_SETTINGS = {
    "TITLE": "Rootline API",
    "DESCRIPTION": "Alerts, incidents, timelines and postmortems of LLM inference fleets.",
    "VERSION": "1",
    "SERVE_INCLUDE_SCHEMA": False,
    # Two models have a `status`: named here, a client generator gets stable enum names
    # (otherwise drf-spectacular names the second by a hash, `Status5dcEnum`, and warns).
    "ENUM_NAME_OVERRIDES": {
        "AlertStatusEnum": "incidents.models.Alert.Status",
        "IncidentStatusEnum": "incidents.models.Incident.Status",
        "ForecastSourceEnum": "correlate.forecast.SOURCES",
    },
}

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "handlers": {"console": {"class": "logging.StreamHandler"}},
    "root": {"handlers": ["console"], "level": os.environ.get("ROOTLINE_LOG_LEVEL", "INFO")},
    "loggers": {"django.db.backends": {"level": "WARNING"}},
}
