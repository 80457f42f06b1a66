"""Secrets kept encrypted in the database: the SSH private key of each cluster profile.

    private_key = EncryptedTextField(_("SSH private key"))   # code reads and writes the text

Code reads and writes `profile.private_key` as text, exactly as before; only the database column
(and so every backup, dump and copied database file) holds the encrypted form, a Fernet token
(AES-128-CBC with an HMAC-SHA256, from `cryptography`).

The keys are settings.FIELD_ENCRYPTION_KEYS, read from the environment variable
FIELD_ENCRYPTION_KEY (comma-separated Fernet keys). The first one encrypts; every one decrypts, so
a key is rotated without downtime: put the new key first, run `manage.py reencrypt_secrets`, then
drop the old key (docs/security.md). Production must set it: portal/settings.py refuses to start
without it when DEBUG is off. A checkout without it derives a key from SECRET_KEY, so changing a
checkout's SECRET_KEY makes its stored keys unreadable (paste them again in the admin).

A value that no key opens raises SecretUnreadable, an ImproperlyConfigured that names the
variable to fix; it never silently reads as empty, and a save never overwrites it with nothing.

Decrypted values are SecretText: a str whose repr is masked, so that a key held in a variable
stays out of error pages and error mails (they print every frame's variables with repr).
"""
from __future__ import annotations

import base64
import functools

from cryptography.fernet import Fernet, InvalidToken, MultiFernet
from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from django.db import models
from django.utils.crypto import salted_hmac
from django.utils.translation import gettext_lazy as _

__all__ = ["EncryptedTextField", "SecretText", "SecretUnreadable", "encrypt", "decrypt", "looks_encrypted"]

#: how every Fernet token begins (the version byte 0x80 and the high, still zero, bytes of its time)
TOKEN_PREFIX = "gAAAAA"
#: the only lookup an encrypted column answers: comparing its ciphertext with a value means nothing,
#: and in the admin's list filters it would be an oracle for the key
ALLOWED_LOOKUPS = frozenset({"isnull"})


class SecretUnreadable(ImproperlyConfigured):
    """A stored secret that none of the FIELD_ENCRYPTION_KEY keys opens."""


class SecretText(str):
    """A secret's text: a str in every way (str(), formatting and slicing give the plain text)
    except its repr, which error pages and error mails use to show variables."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "'********'"


def dev_key(secret_key: str) -> bytes:
    """The key a checkout without FIELD_ENCRYPTION_KEY uses, derived from its SECRET_KEY."""
    # Django's own key derivation, with a salt of its own: not any other HMAC made from SECRET_KEY.
    digest = salted_hmac("jobs.secrets", "field-encryption", secret=secret_key, algorithm="sha256").digest()
    return base64.urlsafe_b64encode(digest)


@functools.lru_cache(maxsize=8)
def _fernet(keys: tuple[str, ...], secret_key: str) -> MultiFernet:
    return MultiFernet([Fernet(key.encode()) for key in keys] or [Fernet(dev_key(secret_key))])


def fernet() -> MultiFernet:
    """The keys in force now (read each time, so a settings change in a test or a shell applies)."""
    return _fernet(tuple(getattr(settings, "FIELD_ENCRYPTION_KEYS", ())), settings.SECRET_KEY)


def encrypt(text: str) -> str:
    """The token of `text`, under the first key."""
    return fernet().encrypt(str(text).encode()).decode()


def decrypt(token: str) -> SecretText:
    """The text of a token; SecretUnreadable when no key opens it."""
    try:
        return SecretText(fernet().decrypt(token.encode()).decode())
    except InvalidToken:
        raise SecretUnreadable(
            "A secret stored in the database (a cluster profile's SSH key) cannot be decrypted with the "
            "keys in FIELD_ENCRYPTION_KEY: it was encrypted with another key. Put that key back (after the "
            "current one: FIELD_ENCRYPTION_KEY=new,old), or paste the SSH key again in the admin.") from None


def looks_encrypted(value: str) -> bool:
    """Whether `value` is a token rather than text. Unambiguous for this field: an SSH private key
    never starts like a Fernet token."""
    return value.startswith(TOKEN_PREFIX)


class EncryptedTextField(models.TextField):
    """A TextField whose column holds the value encrypted; Python code sees the text (SecretText).

    Queryset updates and saves encrypt, loads decrypt, serializers (dumpdata) write the token and
    read it back (loaddata), and lookups other than isnull are refused (FieldError)."""

    description = _("Text, encrypted in the database")

    def from_db_value(self, value, expression, connection):
        # "" is left as it is: a row saved before encryption with no key at all.
        return decrypt(value) if value else value

    def to_python(self, value):
        if isinstance(value, str) and looks_encrypted(value):
            return decrypt(value)  # a token from a dump (loaddata)
        value = super().to_python(value)
        return value if value is None or isinstance(value, SecretText) else SecretText(value)

    def get_prep_value(self, value):
        value = super().get_prep_value(value)  # to_python: a token given here is opened, never encrypted twice
        return None if value is None else encrypt(value)

    def value_to_string(self, obj) -> str | None:
        value = self.value_from_object(obj)
        return None if value is None else encrypt(value)

    def get_lookup(self, lookup_name):
        return super().get_lookup(lookup_name) if lookup_name in ALLOWED_LOOKUPS else None

    def get_transform(self, name):
        return None
