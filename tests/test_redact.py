"""redact: every credential form of a store URL masked, in URLs and in any text."""

from __future__ import annotations

import logging

import pytest

from thresher.redact import RedactingFilter, redact_text, redact_url, remember, secrets_of

PW = "S3cr3tPW"


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        ("postgresql://alice:S3cr3tPW@db.example/h", "postgresql://alice:***@db.example/h"),
        ("postgres://alice:S3cr3tPW@db:5432/h", "postgres://alice:***@db:5432/h"),
        ("postgresql://:S3cr3tPW@db/h", "postgresql://:***@db/h"),
        ("postgresql://alice:S3c@r/3tPW@db/h", "postgresql://alice:***@db/h"),
        (
            "postgresql://alice@db/h?sslmode=require&password=S3cr3tPW&x=1",
            "postgresql://alice@db/h?sslmode=require&password=***&x=1",
        ),
        ("postgresql://db/h?password=S3cr3tPW", "postgresql://db/h?password=***"),
        ("postgresql://db/h?sslpassword=S3cr3tPW", "postgresql://db/h?sslpassword=***"),
        ("host=db password=S3cr3tPW user=alice", "host=db password=*** user=alice"),
        ("host=db password = S3cr3tPW", "host=db password = ***"),
        ("host=db password='S3c r3t\\'PW' user=a", "host=db password=*** user=a"),
        ("host=db password=S3c&r3t#PW", "host=db password=***"),
        ("postgresql://alice@db/h", "postgresql://alice@db/h"),
        ("sqlite:////home/a/thresher.db", "sqlite:////home/a/thresher.db"),
    ],
)
def test_redact_url_masks_every_form(url: str, shown: str) -> None:
    assert redact_url(url) == shown


def test_secrets_of_every_form_raw_and_decoded() -> None:
    assert secrets_of("postgresql://a:S3c%40r3t@h/d") == {"S3c%40r3t", "S3c@r3t"}
    assert secrets_of("postgresql://h/d?password=S3cr3tPW") == {PW}
    assert secrets_of("host=h password='S3c r3t\\'PW'") == {"S3c r3t'PW"}
    assert secrets_of("postgresql://a@h/d") == set()


def test_redact_text_masks_urls_in_a_message_and_echoed_passwords() -> None:
    url = "postgresql://alice:S3cr%zzPW@db/h"
    # What libpq says of that URL: the bad escape, quoted on its own.
    assert redact_text('invalid percent-encoded token: "S3cr%zzPW"', url) == (
        'invalid percent-encoded token: "***"'
    )
    message = "cannot open postgresql://bob:hunter22@db/x and host=db password=hunter22"
    assert "hunter22" not in redact_text(message)
    # Ordinary URLs keep their ports and paths.
    text = "GET http://example.org:8080/@user?q=1: HTTP 404"
    assert redact_text(text) == text


def test_short_passwords_are_masked_only_as_passwords() -> None:
    url = "postgresql://alice:ab@db/h"
    assert redact_text("a table of abc", url) == "a table of abc"
    assert redact_text(f"using {url}", url) == "using postgresql://alice:***@db/h"


def test_the_logging_filter_masks_messages_and_tracebacks() -> None:
    remember("postgresql://alice:Remembered1@db/h")
    record = logging.LogRecord("thresher", logging.WARNING, __file__, 1, "%s", ("x",), None)
    record.msg, record.args = "store %s said Remembered1", ("postgresql://a:Other-PW1@h/d",)
    try:
        raise ValueError("boom Remembered1")
    except ValueError as exc:
        record.exc_info = (type(exc), exc, exc.__traceback__)
    assert RedactingFilter().filter(record)
    formatted = logging.Formatter().format(record)
    assert "Remembered1" not in formatted and "Other-PW1" not in formatted
    assert "boom ***" in formatted and "postgresql://a:***@h/d" in formatted
