"""Settings an admin edits as one row (upload expiry, retention, the content check).

Its row is always row 1: `current()` reads it, or the defaults while there is none. Saving forces
the key, so the admin's "add" writes row 1 whatever the database's sequence says (PostgreSQL's does
not go back when a transaction rolls back: an add after an earlier rolled-back one was row 2, and
`current()` went on reading the defaults: the content check an admin turned on stayed off).
"""
from __future__ import annotations

from django.db import models

ROW = 1


class SingleRow(models.Model):
    class Meta:
        abstract = True

    @classmethod
    def current(cls):
        """The row, or an unsaved one with the defaults."""
        return cls.objects.filter(pk=ROW).first() or cls(pk=ROW)

    def save(self, *args, **kwargs):
        self.pk = ROW
        super().save(*args, **kwargs)
