"""A HyperKitty site for the tests: Django with a SQLite file, no Mailman core.

The fixture in tests/archives/hyperkitty_server.py runs it with the interpreter of
.venv-hyperkitty (made by scripts/test); HK_DATA names the folder for the database.
"""

import os

DATA = os.environ.get("HK_DATA", "/nonexistent")

SECRET_KEY = "thresher-tests-only"
DEBUG = False
ALLOWED_HOSTS = ["127.0.0.1", "localhost"]
SITE_ID = 1
ROOT_URLCONF = "urls"
USE_TZ = True
TIME_ZONE = "UTC"
DEFAULT_AUTO_FIELD = "django.db.models.AutoField"

DATABASES = {
    "default": {"ENGINE": "django.db.backends.sqlite3", "NAME": os.path.join(DATA, "hk.db")}
}
CACHES = {"default": {"BACKEND": "django.core.cache.backends.dummy.DummyCache"}}

INSTALLED_APPS = [
    "hyperkitty",
    "django_mailman3",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.sites",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "rest_framework",
    "django_gravatar",
    "compressor",
    "haystack",
    "django_q",
    "allauth",
    "allauth.account",
    "allauth.socialaccount",
]
MIDDLEWARE = [
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "allauth.account.middleware.AccountMiddleware",
]
TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
                "django_mailman3.context_processors.common",
                "hyperkitty.context_processors.common",
            ]
        },
    }
]
STATIC_URL = "/static/"
STATIC_ROOT = os.path.join(DATA, "static")
COMPRESS_ENABLED = False

# No Mailman core: nothing listens here (a refused connection on loopback), and batch
# mode keeps HyperKitty from asking it about lists and senders when mail is archived.
MAILMAN_REST_API_URL = "http://127.0.0.1:9"
MAILMAN_REST_API_USER = "restadmin"
MAILMAN_REST_API_PASS = "restpass"
HYPERKITTY_BATCH_MODE = True
# The archiver API, as Mailman core's mailman-hyperkitty plugin calls it.
MAILMAN_ARCHIVER_KEY = "thresher-archiver-key"
MAILMAN_ARCHIVER_FROM = ("127.0.0.1",)

HAYSTACK_CONNECTIONS = {"default": {"ENGINE": "haystack.backends.simple_backend.SimpleEngine"}}
# Background tasks (thread order, caches) run at once, in the request: no qcluster.
Q_CLUSTER = {"orm": "default", "sync": True, "timeout": 30, "retry": 60}
LOGIN_URL = "account_login"
LOGOUT_URL = "account_logout"
