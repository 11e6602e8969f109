"""HyperKitty under /archives/, where mailman-web (and mail.python.org) put it, with the
account pages its templates link to."""

from django.urls import include, path  # type: ignore[import-not-found]

urlpatterns = [
    path("archives/", include("hyperkitty.urls")),
    path("", include("django_mailman3.urls")),
    path("accounts/", include("allauth.urls")),
]
