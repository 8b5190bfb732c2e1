"""Orbit Console settings: one module, driven by the environment.

Unset variables select the embedded defaults (an SQLite file under ``var/``, the in-memory
channel layer, the embedded recovery API); ``DATABASE_URL``, ``REDIS_URL`` and
``ORBIT_API_URL`` select the real parts. ``ORBIT_ENV=production`` turns on the settings that
``manage.py check --deploy`` asks for and makes the secrets mandatory. Every variable is listed
in docs/deployment.md.
"""

import importlib.util
import os
import re
from datetime import timedelta
from pathlib import Path

import dj_database_url
from django.core.exceptions import ImproperlyConfigured
from django.utils.csp import CSP
from django.utils.translation import gettext_lazy as _

from orbit_console.lib.env import env_bool, env_choice, env_int, env_list, env_names, env_str
from orbit_console.lib.localsecret import local_secret
from orbit_console.signin.rules import parse_filter, parse_rules

BASE_DIR = Path(__file__).resolve().parent.parent
VAR_DIR = Path(env_str("ORBIT_VAR_DIR", str(BASE_DIR / "var")))

ORBIT_ENV = env_str("ORBIT_ENV", "local")
if ORBIT_ENV not in {"local", "production"}:
    raise ImproperlyConfigured(f"ORBIT_ENV must be 'local' or 'production', not {ORBIT_ENV!r}")
PRODUCTION = ORBIT_ENV == "production"

SECRET_KEY = env_str("SECRET_KEY")
if not SECRET_KEY:
    if PRODUCTION:
        raise ImproperlyConfigured("SECRET_KEY is required when ORBIT_ENV=production")
    SECRET_KEY = local_secret(VAR_DIR / "secret_key")
# Keys that SECRET_KEY replaced and that still verify what they signed (sessions, their sign-in
# hashes, signed values) while a rotation rolls out: comma-separated, newest first
# (docs/runbooks.md, "Rotating credentials"; ``manage.py keys retire-check`` says when the last
# can go).
SECRET_KEY_FALLBACKS = env_list("SECRET_KEY_FALLBACKS", [])

DEBUG = env_bool("DEBUG", default=False)
if DEBUG and PRODUCTION:
    raise ImproperlyConfigured("DEBUG must be off when ORBIT_ENV=production")

ALLOWED_HOSTS = env_list("ALLOWED_HOSTS", ["127.0.0.1", "localhost", "[::1]"])
CSRF_TRUSTED_ORIGINS = env_list("CSRF_TRUSTED_ORIGINS", [])

INSTALLED_APPS = [
    "daphne",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "channels",
    "django_htmx",
    "axes",
    "orbit_console.ops",
    "orbit_console.audit",
    "orbit_console.ledger",
    "orbit_console.events",
    "orbit_console.people",
    "orbit_console.signin",
    "orbit_console.decisions",
    "orbit_console.feed",
    "orbit_console.console",
    "orbit_console.timeline",
    "orbit_console.notifications",
    "orbit_console.insight",
    "orbit_console.keys",
]

MIDDLEWARE = [
    # Every entry must be async-native: under ASGI a synchronous middleware hops to the sync
    # thread and back for each of its hooks. Django's own middleware is synchronous, so it
    # runs inside SyncMiddlewareGroup, one hop each way for all of it (docs/architecture.md).
    "orbit_console.ops.middleware.RequestIdMiddleware",
    "orbit_console.ops.middleware.AccessLogMiddleware",
    # Sheds what a process cannot serve in time, before any work: signed-in people's requests
    # past CONSOLE_MAX_IN_FLIGHT, anonymous ones past their own smaller lane (ops/lanes.py).
    "orbit_console.ops.middleware.LoadSheddingMiddleware",
    "orbit_console.ops.middleware.OutageMiddleware",
    "orbit_console.ops.middleware.SyncMiddlewareGroup",
    "django_htmx.middleware.HtmxMiddleware",
    "orbit_console.console.middleware.TimezoneMiddleware",
    "axes.middleware.AxesMiddleware",
]
# Run in this order by SyncMiddlewareGroup, with Django's own semantics.
SYNC_MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "django.middleware.csp.ContentSecurityPolicyMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.locale.LocaleMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    # The signed-in pass, given and taken away as the session signs in and ends (ops/lanes.py):
    # before the members that may sign a person out, so that it sees their answers too.
    "orbit_console.ops.lanes.SignedInPassMiddleware",
    # Company sign-in's periodic re-check at the provider (signin/recheck.py).
    "orbit_console.signin.recheck.RecheckMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
]
# The recovery API's own chain (/v1/, ops/handler.ApiHandler): synchronous, run with the view in
# one hop. A bearer-token API has no sessions, CSRF, people, languages or sign-in throttling.
API_MIDDLEWARE = [
    "orbit_console.ops.middleware.RequestIdMiddleware",
    "orbit_console.ops.middleware.AccessLogMiddleware",
    "django.middleware.security.SecurityMiddleware",
    "django.middleware.csp.ContentSecurityPolicyMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
]
# Django's deploy checks look for its security, CSRF and clickjacking middleware in MIDDLEWARE
# only; orbit.W003 (ops/checks.py) asks the same of MIDDLEWARE and SYNC_MIDDLEWARE together.
SILENCED_SYSTEM_CHECKS = ["security.W001", "security.W002", "security.W003"]

AUTHENTICATION_BACKENDS = [
    "axes.backends.AxesStandaloneBackend",
    # Django's ModelBackend, with the signed-in user read in one plain query.
    "orbit_console.people.backends.PeopleBackend",
]

ROOT_URLCONF = "orbit_console.urls"
ASGI_APPLICATION = "orbit_console.asgi.application"
WSGI_APPLICATION = "orbit_console.wsgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.template.context_processors.csp",
                "django.template.context_processors.i18n",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
                "orbit_console.console.context_processors.person",
                "orbit_console.console.context_processors.session",
            ],
        },
    },
]

# --- Database -------------------------------------------------------------------------------
DATABASE_URL = env_str("DATABASE_URL", f"sqlite:///{VAR_DIR / 'orbit.sqlite3'}")
# Each process does its synchronous work on one thread (ops/handler.py), which keeps its
# connection between requests; health checks replace one that the server has closed.
_database = dj_database_url.parse(
    DATABASE_URL,
    conn_max_age=env_int("DATABASE_CONN_MAX_AGE", 300, minimum=0),
    conn_health_checks=True,
)
if _database["ENGINE"] == "django.db.backends.sqlite3":
    VAR_DIR.mkdir(parents=True, exist_ok=True)
    # IMMEDIATE transactions make writers queue for the lock at BEGIN instead of failing
    # with "database is locked" when a read lock is upgraded; WAL lets readers go on. A writer
    # waits at most the busy timeout for the lock, then fails (a 503 page) rather than hold
    # its request (issue 14).
    _busy_timeout = env_int("DATABASE_BUSY_TIMEOUT_SECONDS", 5, minimum=1)
    _database["OPTIONS"] = {
        "transaction_mode": "IMMEDIATE",
        "timeout": _busy_timeout,
        "init_command": (
            f"PRAGMA journal_mode=WAL; PRAGMA busy_timeout={_busy_timeout * 1000}; "
            "PRAGMA synchronous=NORMAL;"
        ),
    }
    # A file, not memory, so that the servers the tests start share the test database; named
    # per test process, so that two test runs on one checkout do not clobber each other.
    _test_name = f"test-{Path(_database['NAME']).stem}-{os.getpid()}.sqlite3"
    _database["TEST"] = {"NAME": str(VAR_DIR / _test_name)}
elif _database["ENGINE"] == "django.db.backends.mysql":
    if importlib.util.find_spec("MySQLdb") is None:
        raise ImproperlyConfigured(
            "DATABASE_URL is a mysql:// URL but the MySQL driver is not installed: run "
            "'uv sync --extra mysql' (it builds against the MySQL client headers: "
            "'apt-get install default-libmysqlclient-dev pkg-config')"
        )
    # Bounded time (issue 14): a database that accepts and never answers fails the request
    # after these, instead of holding it and its thread. The read timeout bounds one read (the
    # client library tries a read up to three times); a migration of a large table may need
    # more (set DATABASE_READ_TIMEOUT_SECONDS for the migrate step).
    _read_timeout = env_int("DATABASE_READ_TIMEOUT_SECONDS", 30, minimum=1)
    _database["OPTIONS"] = {
        "charset": "utf8mb4",
        "isolation_level": "read committed",
        "init_command": "SET sql_mode='STRICT_ALL_TABLES'",
        "connect_timeout": env_int("DATABASE_CONNECT_TIMEOUT_SECONDS", 5, minimum=1),
        "read_timeout": _read_timeout,
        "write_timeout": _read_timeout,
    }
    _database["TEST"] = {"CHARSET": "utf8mb4", "COLLATION": "utf8mb4_bin"}
else:
    raise ImproperlyConfigured("DATABASE_URL must be an sqlite:// or mysql:// URL")
DATABASES = {"default": _database}
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

# --- Channels -------------------------------------------------------------------------------
REDIS_URL = env_str("REDIS_URL")
# A live notification may hold the request that committed it this long at most; one that takes
# longer (a hung Redis) is given up and counted, and viewers catch up (lib/live.py).
ORBIT_PUBLISH_TIMEOUT = env_int("ORBIT_PUBLISH_TIMEOUT_MS", 500, minimum=1) / 1000

# The recovery API's event stream (docs/events.md). The Origins its handshake accepts besides its
# own (events/origins.py: the consoles that consume it from elsewhere), each scheme://host[:port]
# and matched on all three; how long a client may stay silent
# (it pings at least this often; three missed close the stream); how often a stream looks for
# owed events on its own and checks its credential again; how long an unacknowledged delivery
# is kept.
ORBIT_EVENTS_ALLOWED_ORIGINS = env_list("ORBIT_EVENTS_ALLOWED_ORIGINS", [])
for _origin in ORBIT_EVENTS_ALLOWED_ORIGINS:
    if not re.fullmatch(r"https?://[^/?#@\s]+", _origin):
        raise ImproperlyConfigured(
            f"ORBIT_EVENTS_ALLOWED_ORIGINS takes origins such as https://console.example.com"
            f" or http://10.0.0.5:8080 (scheme, host, port), not {_origin!r}"
        )
# Load shedding (docs/deployment.md, "Capacity of one replica"): a console process serves at
# most this many page requests at once and answers the next ones 503 with Retry-After and a
# page that says so, before doing anything (nothing is stored). 0 turns it off. Health, metrics,
# static files, the recovery API (/v1/, its own quotas) and WebSockets are not counted.
CONSOLE_MAX_IN_FLIGHT = env_int("CONSOLE_MAX_IN_FLIGHT", 32, minimum=0)
CONSOLE_SHED_RETRY_AFTER_SECONDS = env_int("CONSOLE_SHED_RETRY_AFTER_SECONDS", 2, minimum=1)
# Requests of nobody signed in (the sign-in pages, company sign-in and its callback, back-channel
# logout, any page asked for without a signed-in session) wait in a lane of their own, so that
# they never take signed-in people's places: at most this many at once, and at most the second
# from one client address (REMOTE_ADDR: behind the proxy, the address it saw). 0: no bound
# (ops/lanes.py).
CONSOLE_ANONYMOUS_MAX_IN_FLIGHT = env_int("CONSOLE_ANONYMOUS_MAX_IN_FLIGHT", 8, minimum=0)
CONSOLE_ANONYMOUS_MAX_IN_FLIGHT_PER_ADDRESS = env_int(
    "CONSOLE_ANONYMOUS_MAX_IN_FLIGHT_PER_ADDRESS", 4, minimum=0
)
ORBIT_EVENTS_HEARTBEAT_MS = env_int("ORBIT_EVENTS_HEARTBEAT_MS", 10_000, minimum=100)
ORBIT_EVENTS_POLL_MS = env_int("ORBIT_EVENTS_POLL_MS", 1_000, minimum=10)
ORBIT_EVENTS_RECHECK_SECONDS = env_int("ORBIT_EVENTS_RECHECK_SECONDS", 5, minimum=1)
ORBIT_EVENTS_RETENTION_HOURS = env_int("ORBIT_EVENTS_RETENTION_HOURS", 7 * 24, minimum=1)
# What one credential, and all the credentials of one namespace together, may hold: each
# subscription costs a row per event written in its scope (kept until acknowledged, at most the
# retention), each open stream a database look every poll on its process's one sync thread.
# Refused beyond them with 429 SUBSCRIPTION_LIMIT / STREAM_LIMIT (docs/events.md).
ORBIT_EVENTS_MAX_SUBSCRIPTIONS_PER_CREDENTIAL = env_int(
    "ORBIT_EVENTS_MAX_SUBSCRIPTIONS_PER_CREDENTIAL", 10, minimum=1
)
ORBIT_EVENTS_MAX_SUBSCRIPTIONS_PER_NAMESPACE = env_int(
    "ORBIT_EVENTS_MAX_SUBSCRIPTIONS_PER_NAMESPACE", 50, minimum=1
)
ORBIT_EVENTS_MAX_STREAMS_PER_CREDENTIAL = env_int(
    "ORBIT_EVENTS_MAX_STREAMS_PER_CREDENTIAL", 10, minimum=1
)
ORBIT_EVENTS_MAX_STREAMS_PER_NAMESPACE = env_int(
    "ORBIT_EVENTS_MAX_STREAMS_PER_NAMESPACE", 50, minimum=1
)
if REDIS_URL:
    CHANNEL_LAYERS = {
        "default": {
            "BACKEND": "channels_redis.core.RedisChannelLayer",
            "CONFIG": {
                # redis-py 8 reads with a 5 s socket timeout by default, which cuts the layer's
                # blocking BZPOPMIN (5 s too) and kills every consumer idle for 5 s
                # (django/channels_redis#422): no client-side read timeout here.
                "hosts": [{"address": REDIS_URL, "socket_timeout": None}],
                "capacity": 1000,
                "expiry": 30,
                # Deployments (or test workers) sharing one Redis keep their groups apart.
                "prefix": env_str("REDIS_CHANNEL_PREFIX", "asgi"),
            },
        }
    }
else:
    CHANNEL_LAYERS = {"default": {"BACKEND": "channels.layers.InMemoryChannelLayer"}}

# --- Authentication, sessions, security -----------------------------------------------------
# Argon2id (argon2-cffi; Django's defaults: 2 passes over 100 MiB), as Django's docs and OWASP
# recommend: memory-hard, and about a quarter of PBKDF2's time here (docs/performance.md,
# "Signing in"). The others only check older hashes; Django upgrades each to Argon2 on the
# person's next sign-in.
PASSWORD_HASHERS = [
    "django.contrib.auth.hashers.Argon2PasswordHasher",
    "django.contrib.auth.hashers.PBKDF2PasswordHasher",
    "django.contrib.auth.hashers.PBKDF2SHA1PasswordHasher",
    "django.contrib.auth.hashers.ScryptPasswordHasher",
]
AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
    {"NAME": "django.contrib.auth.password_validation.NumericPasswordValidator"},
]
LOGIN_URL = "login"
LOGIN_REDIRECT_URL = "console:start"  # lands per role (console/views/queue.py ``start``)
LOGOUT_REDIRECT_URL = "login"
# Django's database sessions, read with one plain query (ops/sessions.py).
SESSION_ENGINE = "orbit_console.ops.sessions"
SESSION_COOKIE_AGE = env_int("SESSION_COOKIE_AGE", 8 * 3600, minimum=60)
# Sessions and drafts (docs/console.md): a session ends SESSION_COOKIE_AGE after sign-in at the
# latest, and after SESSION_IDLE_TIMEOUT seconds without a request (0: never for idleness);
# "stay signed in" moves only the idle end (ops/sessions.py). Open sockets look at their session
# this often and close with 4401 once it has ended (ops/sockets.py). What a form carried when it
# arrived after its session had ended is kept for CONSOLE_DRAFT_MINUTES, for the same person in
# the same browser (people/drafts.py).
SESSION_IDLE_TIMEOUT = env_int("SESSION_IDLE_TIMEOUT", 3600, minimum=0)
SESSION_RECHECK_SECONDS = env_int("SESSION_RECHECK_SECONDS", 30, minimum=1)
CONSOLE_DRAFT_MINUTES = env_int("CONSOLE_DRAFT_MINUTES", 30, minimum=1)
# Sign-in throttling (django-axes, console/throttle.py): within AXES_COOLOFF_TIME, sign-in is
# refused after AXES_FAILURE_LIMIT failures for one user name from one address, after
# AXES_USERNAME_FAILURE_LIMIT for one user name from anywhere, and after
# AXES_ADDRESS_FAILURE_LIMIT from one address whatever the user names. Django's login()
# rotates the session key on every sign-in.
AXES_FAILURE_LIMIT = env_int("AXES_FAILURE_LIMIT", 5, minimum=1)
AXES_USERNAME_FAILURE_LIMIT = env_int("AXES_USERNAME_FAILURE_LIMIT", 10, minimum=1)
AXES_ADDRESS_FAILURE_LIMIT = env_int("AXES_ADDRESS_FAILURE_LIMIT", 10, minimum=1)
AXES_COOLOFF_TIME = timedelta(minutes=env_int("AXES_COOLOFF_MINUTES", 15, minimum=1))
AXES_LOCKOUT_PARAMETERS = [["username", "ip_address"], "username", "ip_address"]
AXES_HANDLER = "orbit_console.people.throttle.ThrottleHandler"
AXES_RESET_ON_SUCCESS = True
AXES_LOCKOUT_TEMPLATE = "console/locked_out.html"
AXES_VERBOSE = False
# Company sign-in (OpenID Connect, docs/sign-in.md): on when OIDC_ISSUER is set. The endpoints
# come from the issuer's discovery document; the code flow uses PKCE, state and nonce; the ID
# token is verified against the provider's JWKS (signature, issuer, audience, times). Roles and
# namespaces follow OIDC_ROLE_RULES (signin/rules.py), read at every sign-in.
# The issuer exactly as the provider's discovery document spells it, a final "/" included: issuers
# are compared as exact strings (OpenID Connect Core 3.1.3.7).
OIDC_ISSUER = env_str("OIDC_ISSUER")
OIDC_PROVIDER_NAME = env_str("OIDC_PROVIDER_NAME", "your company")
OIDC_RP_CLIENT_ID = env_str("OIDC_CLIENT_ID")
OIDC_RP_CLIENT_SECRET = env_str("OIDC_CLIENT_SECRET")
OIDC_RP_SCOPES = env_str("OIDC_SCOPES", "openid profile email groups")
OIDC_RP_SIGN_ALGO = env_str("OIDC_SIGN_ALGO", "RS256")
# How the client authenticates at the token endpoint, for every call there (sign-in's code,
# the re-check's refresh, `signin check`): its secret in the request's body, or in an HTTP
# Basic header. A provider's application may accept only one (Okta's default is Basic, Auth0's
# "Post" apps only the body): signin/provider.py's client_credentials.
OIDC_TOKEN_AUTH_METHOD = env_choice(
    "OIDC_TOKEN_AUTH_METHOD", "client_secret_post", ("client_secret_post", "client_secret_basic")
)
OIDC_TOKEN_USE_BASIC_AUTH = OIDC_TOKEN_AUTH_METHOD == "client_secret_basic"  # noqa: S105
# The claim holding the person's groups: what a rule that names no claim reads (Entra ID's app
# roles: roles; Auth0: a namespaced claim its Action sets).
OIDC_GROUPS_CLAIM = env_str("OIDC_GROUPS_CLAIM", "groups")
OIDC_GROUPS_FILTER = parse_filter(env_str("OIDC_GROUPS_FILTER"))
OIDC_ROLE_RULES = parse_rules(env_str("OIDC_ROLE_RULES"))
OIDC_ACR_VALUES = env_str("OIDC_ACR_VALUES")
OIDC_TIMEOUT = env_int("OIDC_TIMEOUT_SECONDS", 10, minimum=1)
# A company sign-in is re-checked at the provider this often, at the person's next request: with
# the refresh token, or without one a silent prompt=none round trip (signin/recheck.py).
OIDC_RECHECK_SECONDS = env_int("OIDC_RECHECK_SECONDS", 300, minimum=1)
# Approving or rejecting re-checks first when the last check is older than this (0: every time).
OIDC_DECISION_RECHECK_SECONDS = env_int("OIDC_DECISION_RECHECK_SECONDS", 60, minimum=0)
# Approving or rejecting needs an authentication younger than this (signin/stepup.py; 0: off).
STEP_UP_MAX_AGE_SECONDS = env_int("STEP_UP_MAX_AGE_SECONDS", 600, minimum=0)
# How a company session steps up (signin/stepup.py): "login" asks the provider to authenticate
# the person again (prompt=login, max_age=0); "auth_time" takes the provider's word of when they
# last authenticated, for providers that cannot be asked (Google); "off": company sessions are
# not asked (console accounts still type their password).
OIDC_STEP_UP = env_choice("OIDC_STEP_UP", "login", ("login", "auth_time", "off"))
# A back-channel logout token older than this is refused (signin/logout.py).
OIDC_LOGOUT_TOKEN_MAX_AGE = env_int("OIDC_LOGOUT_TOKEN_MAX_AGE", 300, minimum=10)
# The provider's signing keys (its JWKS) for logout tokens are kept this long, and read again at
# most once in this many seconds when a token names a key they do not hold (signin/keys.py).
OIDC_JWKS_CACHE_SECONDS = env_int("OIDC_JWKS_CACHE_SECONDS", 3600, minimum=1)
OIDC_JWKS_REFRESH_SECONDS = env_int("OIDC_JWKS_REFRESH_SECONDS", 30, minimum=1)
OIDC_USE_PKCE = True
OIDC_USE_NONCE = True
OIDC_PKCE_CODE_CHALLENGE_METHOD = "S256"
OIDC_AUTHENTICATION_CALLBACK_URL = "signin:oidc_callback"
LOGIN_REDIRECT_URL_FAILURE = "login"
if OIDC_ISSUER:
    if not (OIDC_RP_CLIENT_ID and OIDC_RP_CLIENT_SECRET):
        raise ImproperlyConfigured("OIDC_ISSUER needs OIDC_CLIENT_ID and OIDC_CLIENT_SECRET")
    if not OIDC_ROLE_RULES:
        raise ImproperlyConfigured("OIDC_ISSUER needs OIDC_ROLE_RULES: nobody could sign in")
    AUTHENTICATION_BACKENDS.append("orbit_console.signin.backends.OidcBackend")
# The client's address is REMOTE_ADDR. Behind the reverse proxy, the image's CMD (`serve
# --proxy-headers`) sets it from the X-Forwarded-For that the proxy writes afresh
# (deploy/nginx.conf), so a client cannot choose the address its failures count against.
SESSION_EXPIRE_AT_BROWSER_CLOSE = True
SESSION_COOKIE_HTTPONLY = True
SESSION_COOKIE_SAMESITE = "Lax"
CSRF_COOKIE_HTTPONLY = True
# The console's: a refused form that carried typed text keeps it (console/views/session.py).
CSRF_FAILURE_VIEW = "orbit_console.console.views.session.csrf_failure"
X_FRAME_OPTIONS = "DENY"
SECURE_CONTENT_TYPE_NOSNIFF = True
SECURE_REFERRER_POLICY = "same-origin"
SECURE_CROSS_ORIGIN_OPENER_POLICY = "same-origin"
SECURE_CSP = {
    "default-src": [CSP.NONE],
    "script-src": [CSP.SELF],
    "style-src": [CSP.SELF],
    "img-src": [CSP.SELF, "data:"],
    "font-src": [CSP.SELF],
    "connect-src": [CSP.SELF],
    "form-action": [CSP.SELF],
    "frame-ancestors": [CSP.NONE],
    "base-uri": [CSP.NONE],
    "object-src": [CSP.NONE],
}
if OIDC_ISSUER:
    # Signing out (a form) continues at the provider's end_session_endpoint (RP-initiated
    # logout): browsers hold a form's redirects to form-action too.
    _issuer_origin = re.match(r"https?://[^/?#]+", OIDC_ISSUER)
    if _issuer_origin:
        SECURE_CSP["form-action"] = [CSP.SELF, _issuer_origin.group(0)]
if PRODUCTION:
    SESSION_COOKIE_SECURE = True
    CSRF_COOKIE_SECURE = True
    SECURE_SSL_REDIRECT = env_bool("SECURE_SSL_REDIRECT", default=True)
    SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
    SECURE_HSTS_SECONDS = env_int("SECURE_HSTS_SECONDS", 31536000, minimum=0)
    SECURE_HSTS_INCLUDE_SUBDOMAINS = True
    SECURE_HSTS_PRELOAD = env_bool("SECURE_HSTS_PRELOAD", default=True)
    # Not redirected to https: the orchestrator's probes and Prometheus reach each pod directly,
    # over plain HTTP on its own port (deploy/kubernetes: the ServiceMonitor scrapes
    # http://POD_IP:8000/metrics); the proxy never routes /metrics (issue 41).
    SECURE_REDIRECT_EXEMPT = [r"^health/", r"^metrics$"]

# --- Languages and time ---------------------------------------------------------------------
LANGUAGE_CODE = "en"
LANGUAGES = [("en", _("English")), ("zh-hans", _("Simplified Chinese"))]
LOCALE_PATHS = [BASE_DIR / "orbit_console" / "locale"]
USE_I18N = True
TIME_ZONE = "UTC"
USE_TZ = True

# --- Static files ---------------------------------------------------------------------------
STATIC_URL = "/static/"
STATICFILES_DIRS = [BASE_DIR / "static"]
# Collected files (production, `collectstatic`); locally the apps' folders are served directly.
STATIC_ROOT = (
    Path(env_str("STATIC_ROOT", str(BASE_DIR / "staticfiles")))
    if PRODUCTION or env_str("STATIC_ROOT")
    else None
)
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {
        "BACKEND": (
            "whitenoise.storage.CompressedManifestStaticFilesStorage"
            if PRODUCTION
            else "django.contrib.staticfiles.storage.StaticFilesStorage"
        )
    },
}

# --- The embedded recovery API (the ledger) -------------------------------------------------
# C8: how long an idempotency receipt answers replays. The seeds tie it to task acceptance
# without a number; docs/api.md records the choice.
ORBIT_IDEMPOTENCY_RETENTION_HOURS = env_int("ORBIT_IDEMPOTENCY_RETENTION_HOURS", 7 * 24, minimum=1)
# RT7: the hint sent with 429 QUEUE_FULL / APPLICATION_FULL.
ORBIT_RETRY_AFTER_MS = env_int("ORBIT_RETRY_AFTER_MS", 1000, minimum=1)
# GET /v1/tasks?count=true counts at most this many tasks; past it the total is a lower bound
# (docs/api.md "The task list": a COUNT of bounded cost).
ORBIT_TASK_COUNT_CAP = env_int("ORBIT_TASK_COUNT_CAP", 10_000, minimum=1)

# --- The console ----------------------------------------------------------------------------
# Where the console finds the recovery API. ORBIT_API_URL points at an external Orbit; unset,
# the console uses the embedded API of this very deployment: at ORBIT_EMBEDDED_API_URL over
# HTTP when that is set (a separate API pool, or a test's fault-injecting proxy), else in this
# process through Django's handler, the same requests without the network (client/inprocess.py).
ORBIT_API_EMBEDDED = not env_str("ORBIT_API_URL")
ORBIT_API_URL = env_str("ORBIT_API_URL") or env_str("ORBIT_EMBEDDED_API_URL")
# The client's timeouts: ORBIT_API_TIMEOUT bounds each read and also each whole exchange (a
# server that drips its answer never trips a read timeout); no answer is read past
# ORBIT_API_MAX_ANSWER_BYTES (client/client.py).
ORBIT_API_TIMEOUT = float(env_int("ORBIT_API_TIMEOUT_SECONDS", 15, minimum=1))
ORBIT_API_CONNECT_TIMEOUT = float(env_int("ORBIT_API_CONNECT_TIMEOUT_SECONDS", 5, minimum=1))
ORBIT_API_MAX_ANSWER_BYTES = env_int("ORBIT_API_MAX_ANSWER_BYTES", 4 * 1024 * 1024, minimum=1024)
# Fernet keys for Orbit tokens at rest, first one encrypts (docs/deployment.md).
ORBIT_TOKEN_KEYS = env_list("ORBIT_TOKEN_KEYS", [])
if PRODUCTION and not ORBIT_TOKEN_KEYS:
    raise ImproperlyConfigured("ORBIT_TOKEN_KEYS is required when ORBIT_ENV=production")
# The keys that link the audit chains (lib/auditkeys.py): the first links, all verify.
ORBIT_AUDIT_KEYS = env_list("ORBIT_AUDIT_KEYS", [])
if PRODUCTION and not ORBIT_AUDIT_KEYS:
    raise ImproperlyConfigured("ORBIT_AUDIT_KEYS is required when ORBIT_ENV=production")
# Signed checkpoints of the chains' heads (audit/checkpoints.py): the Ed25519 private keys
# that sign them (the first signs, all verify; in production only the checkpoint job holds
# them), public keys that only verify, the folder outside the database they are written to,
# and how often the periodic job looks for heads that moved.
ORBIT_AUDIT_SIGNING_KEYS = env_list("ORBIT_AUDIT_SIGNING_KEYS", [])
if not ORBIT_AUDIT_SIGNING_KEYS and not PRODUCTION:
    ORBIT_AUDIT_SIGNING_KEYS = [local_secret(VAR_DIR / "audit_signing_key", nbytes=32)]
ORBIT_AUDIT_VERIFY_KEYS = env_list("ORBIT_AUDIT_VERIFY_KEYS", [])
# A process that holds no key to check signatures cannot trust any checkpoint or verification
# result: /audit says nothing and /metrics reports the audit failing (AuditVerifyFailing) for
# as long as it runs. In production that is a missed setting, refused at start (issue 41).
if PRODUCTION and not (ORBIT_AUDIT_VERIFY_KEYS or ORBIT_AUDIT_SIGNING_KEYS):
    raise ImproperlyConfigured(
        "ORBIT_AUDIT_VERIFY_KEYS is required when ORBIT_ENV=production: the public keys of the "
        "audit checkpoints' signing keys ('manage.py audit public-key' prints them), without "
        "which no checkpoint or verification result can be checked"
    )
ORBIT_AUDIT_CHECKPOINT_DIR = Path(
    env_str("ORBIT_AUDIT_CHECKPOINT_DIR", str(VAR_DIR / "audit-checkpoints"))
)
ORBIT_AUDIT_CHECKPOINT_SECONDS = env_int("ORBIT_AUDIT_CHECKPOINT_SECONDS", 60, minimum=1)
# Four eyes (docs/approvals.md): per action, whether a supervisor must approve a decision
# before it is sent, and how many distinct supervisors. Default: required, one approver.
CONSOLE_APPROVAL_POLICY = {
    action: {
        "required": env_str(f"CONSOLE_{action.upper()}_APPROVAL", "required") != "off",
        "approvers": env_int(f"CONSOLE_{action.upper()}_APPROVERS", 1, minimum=1),
    }
    for action in ("review", "retry")
}
for _action, _policy in CONSOLE_APPROVAL_POLICY.items():
    if env_str(f"CONSOLE_{_action.upper()}_APPROVAL", "required") not in {"required", "off"}:
        raise ImproperlyConfigured(f"CONSOLE_{_action.upper()}_APPROVAL must be required or off")
CONSOLE_PROPOSAL_TTL_HOURS = env_int("CONSOLE_PROPOSAL_TTL_HOURS", 24, minimum=1)
# A proposal or batch waiting for approval is reminded of this long before it expires.
CONSOLE_PROPOSAL_REMINDER_MINUTES = env_int("CONSOLE_PROPOSAL_REMINDER_MINUTES", 60, minimum=1)
# The Orbit permissions each role implies (console.md, "Who sees what"): operators hold the
# recovery permissions only for actions that need no approval; supervisors send approved ones.
# Everyone reads the platform's audit of the tasks they see: the person deciding a task is its
# first reader, and its live timeline is how they learn that it moved (issue 15).
CONSOLE_ROLE_PERMISSIONS = {
    "operator": ["tasks:read", "tasks:audit:read"]
    + [
        f"tasks:{action}"
        for action, rule in CONSOLE_APPROVAL_POLICY.items()
        if not rule["required"]
    ],
    "supervisor": ["tasks:read", "tasks:audit:read", "tasks:review", "tasks:retry"],
    "auditor": ["tasks:read", "tasks:audit:read"],
}
# Durable submissions: how long the console keeps resending an unknown outcome (well inside
# the API's idempotency retention), and the reconciler's bounded backoff: its cap bounds how
# long a decision waits after the API is back (issue 14).
CONSOLE_RECONCILE_DEADLINE_HOURS = env_int("CONSOLE_RECONCILE_DEADLINE_HOURS", 24, minimum=1)
CONSOLE_RECONCILE_BACKOFF_SECONDS = (2, 30)
# Batches (docs/bulk.md): at most this many tasks in one; the worker's sends at once, sends
# started per second, and how long a claimed item waits before another send may take it.
CONSOLE_BATCH_MAX_TASKS = env_int("CONSOLE_BATCH_MAX_TASKS", 10_000, minimum=1)
CONSOLE_BATCH_CONCURRENCY = env_int("CONSOLE_BATCH_CONCURRENCY", 8, minimum=1)
CONSOLE_BATCH_RATE = env_int("CONSOLE_BATCH_RATE", 200, minimum=1)
CONSOLE_BATCH_CLAIM_SECONDS = env_int("CONSOLE_BATCH_CLAIM_SECONDS", 30, minimum=1)
# Starting a batch stores its submissions this many to a transaction (docs/bulk.md): each
# transaction holds the record's chain head, which every console decision needs, so its
# length bounds how long a large batch makes others wait (docs/performance.md).
CONSOLE_BATCH_START_CHUNK = env_int("CONSOLE_BATCH_START_CHUNK", 200, minimum=1)
# Which process sends them: "auto" (the server with the in-memory channel layer, whose sockets
# the pushes must reach; the reconciler when the layer is shared), "server" or "reconciler".
CONSOLE_BATCH_WORKER = env_str("CONSOLE_BATCH_WORKER", "auto")
if CONSOLE_BATCH_WORKER not in ("auto", "server", "reconciler"):
    raise ImproperlyConfigured(
        f"CONSOLE_BATCH_WORKER must be auto, server or reconciler, not {CONSOLE_BATCH_WORKER!r}"
    )
# The console's feed of Orbit's event stream (feed/consumer.py): whether this deployment's server
# processes are candidates to consume it ("server"; "off": only `manage.py feed run` does), how
# long the consuming process's lease lasts (another takes over within it when it dies), and the
# Origin the console declares to an external Orbit's stream.
CONSOLE_FEED = env_str("CONSOLE_FEED", "server")
if CONSOLE_FEED not in ("server", "off"):
    raise ImproperlyConfigured(f"CONSOLE_FEED must be server or off, not {CONSOLE_FEED!r}")
CONSOLE_FEED_LEASE_SECONDS = env_int("CONSOLE_FEED_LEASE_SECONDS", 10, minimum=1)
ORBIT_EVENTS_ORIGIN = env_str("ORBIT_EVENTS_ORIGIN", "")
# The largest frame the console reads from an event stream (client/events.py).
ORBIT_EVENTS_MAX_FRAME_BYTES = env_int("ORBIT_EVENTS_MAX_FRAME_BYTES", 64 * 1024, minimum=1024)
# How long the console follows what an applied decision led to (decisions/followups.py): the
# stream's retention, by default; a page still reads the task when shown.
CONSOLE_FOLLOW_HOURS = env_int("CONSOLE_FOLLOW_HOURS", 7 * 24, minimum=1)
CONSOLE_PENDING_GRACE_SECONDS = env_int("CONSOLE_PENDING_GRACE_SECONDS", 30, minimum=1)

# Insight (docs/insight.md): at most this many tasks waiting now are read for their ages (past
# it a count says "at least"); the backfill lists at most this many tasks in NEEDS_REVIEW; and
# precedent looks this many days back.
INSIGHT_WAITING_CAP = env_int("INSIGHT_WAITING_CAP", 10_000, minimum=1)
INSIGHT_BACKFILL_MAX = env_int("INSIGHT_BACKFILL_MAX", 10_000, minimum=0)
INSIGHT_PRECEDENT_DAYS = env_int("INSIGHT_PRECEDENT_DAYS", 180, minimum=1)

# Readable names (docs/console.md "Names instead of ids"): JSON objects of namespace ids and of
# platform actor ids (workers, schedulers, services: actors that are no console person) to the
# names the pages show beside the id. A namespace without one shows the name the API gives its
# credential (GET /v1/credential), a console person's actor id always shows the person.
CONSOLE_NAMESPACE_NAMES = env_names("CONSOLE_NAMESPACE_NAMES")
CONSOLE_ACTOR_NAMES = env_names("CONSOLE_ACTOR_NAMES")

# --- The live timeline ----------------------------------------------------------------------
# A socket re-checks the person's access to the task against the API this often, and never
# pushes on a check older than twice this (docs/timeline.md).
TIMELINE_RECHECK_SECONDS = env_int("TIMELINE_RECHECK_SECONDS", 5, minimum=1)
# How long the API's "this person's credential can read this task" is trusted (console/access.py).
CONSOLE_ACCESS_SECONDS = env_int("CONSOLE_ACCESS_SECONDS", 5, minimum=1)
# With an external Orbit: bounded polling of watched tasks (I4).
TIMELINE_POLL_SECONDS = 1.0
TIMELINE_POLL_MAX_SECONDS = 10.0
TIMELINE_WATCH_DEADLINE_SECONDS = env_int("TIMELINE_WATCH_DEADLINE_SECONDS", 3600, minimum=10)
# The task page shows the first page of the task's timeline from this coroutine function
# (``(client, person, task_id) -> page``), named here so that the console does not import the
# timeline app that depends on it (docs/architecture.md); empty, the page has no timeline.
CONSOLE_TASK_TIMELINE = "orbit_console.timeline.builder.build_page"

# --- Operations -----------------------------------------------------------------------------
# /metrics answers only requests bearing this token; unset, it does not exist (ops/metrics.py).
METRICS_TOKEN = env_str("METRICS_TOKEN")

# --- Logging --------------------------------------------------------------------------------
LOG_LEVEL = env_str("LOG_LEVEL", "INFO")
LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {"json": {"()": "orbit_console.ops.logging.JsonFormatter"}},
    "filters": {"request_id": {"()": "orbit_console.ops.logging.RequestIdFilter"}},
    "handlers": {
        "console": {
            "class": "logging.StreamHandler",
            "formatter": "json",
            "filters": ["request_id"],
        }
    },
    "root": {"handlers": ["console"], "level": LOG_LEVEL},
    "loggers": {
        "django.db.backends": {"level": "WARNING"},
        "daphne": {"level": "WARNING"},
        "httpx": {"level": "WARNING"},
        "httpcore": {"level": "WARNING"},
    },
}

# WhiteNoise serves /static/ at the ASGI edge (orbit_console/ops/static.py). Locally it reads
# the apps' static folders directly; production serves the collected, hashed files.
WHITENOISE_USE_FINDERS = not PRODUCTION
WHITENOISE_AUTOREFRESH = DEBUG

# --- Notifications (docs/notifications.md) ---------------------------------------------------
# Where links in notifications that leave the console (email, webhooks) point.
CONSOLE_BASE_URL = env_str("CONSOLE_BASE_URL", "http://localhost:8000")
# A decision whose outcome is still unknown this long after it was made is told.
CONSOLE_NOTIFY_UNKNOWN_AFTER_MINUTES = env_int(
    "CONSOLE_NOTIFY_UNKNOWN_AFTER_MINUTES", 15, minimum=1
)
# A checkpoint is overdue this long after its period has passed.
CONSOLE_NOTIFY_CHECKPOINT_GRACE_SECONDS = env_int(
    "CONSOLE_NOTIFY_CHECKPOINT_GRACE_SECONDS", 300, minimum=0
)
# Each webhook attempt's wall-clock deadline, from resolving the host to the answer's last
# byte (a receiver that drips its answer is cut off at it); connecting takes at most the first.
CONSOLE_WEBHOOK_CONNECT_TIMEOUT = env_int("CONSOLE_WEBHOOK_CONNECT_TIMEOUT", 3, minimum=1)
CONSOLE_WEBHOOK_TIMEOUT = env_int("CONSOLE_WEBHOOK_TIMEOUT", 10, minimum=1)
# Attempts one delivery worker has in flight at once, and at most to one endpoint: a slow
# endpoint holds its own few, never another's or the email's.
CONSOLE_WEBHOOK_CONCURRENCY = env_int("CONSOLE_WEBHOOK_CONCURRENCY", 32, minimum=1)
CONSOLE_WEBHOOK_ENDPOINT_CONCURRENCY = env_int("CONSOLE_WEBHOOK_ENDPOINT_CONCURRENCY", 4, minimum=1)
# Tries: 30 s, 2 min, 8 min, 32 min, 2 h 8 min, then every 4 h (each with jitter) — about
# eleven hours over eight tries before a message is failed.
CONSOLE_WEBHOOK_BACKOFF_SECONDS = env_int("CONSOLE_WEBHOOK_BACKOFF_SECONDS", 30, minimum=0)
CONSOLE_WEBHOOK_BACKOFF_MAX_SECONDS = env_int(
    "CONSOLE_WEBHOOK_BACKOFF_MAX_SECONDS", 4 * 3600, minimum=0
)
CONSOLE_WEBHOOK_MAX_ATTEMPTS = env_int("CONSOLE_WEBHOOK_MAX_ATTEMPTS", 8, minimum=1)
# Networks webhooks may reach although they are not public (CIDRs; empty: none). Only an
# administrator sets this, e.g. "10.20.0.0/16" for a chat relay inside the company network.
CONSOLE_WEBHOOK_ALLOWED_NETWORKS = env_list("CONSOLE_WEBHOOK_ALLOWED_NETWORKS", [])

# Email (Django's mail framework, its mailers): SMTP in production or when EMAIL_HOST is set
# (default host: localhost), else the console backend (local use: mail is printed).
# docs/deployment.md lists the variables.
EMAIL_TIMEOUT_SECONDS = env_int("EMAIL_TIMEOUT", 10, minimum=1)
DEFAULT_FROM_EMAIL = env_str("DEFAULT_FROM_EMAIL", "orbit-console@localhost")
MAILERS = {
    "default": {
        "BACKEND": "django.core.mail.backends.smtp.EmailBackend",
        "OPTIONS": {
            "host": env_str("EMAIL_HOST", "localhost"),
            "port": env_int("EMAIL_PORT", 25, minimum=1),
            "username": env_str("EMAIL_HOST_USER", ""),
            "password": env_str("EMAIL_HOST_PASSWORD", ""),
            "use_tls": env_bool("EMAIL_USE_TLS", False),
            "use_ssl": env_bool("EMAIL_USE_SSL", False),
            "timeout": EMAIL_TIMEOUT_SECONDS,
        },
    }
    if env_str("EMAIL_HOST", "") or PRODUCTION
    else {"BACKEND": "django.core.mail.backends.console.EmailBackend"},
}
