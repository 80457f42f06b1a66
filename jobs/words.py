"""The language of what the portal writes about a job when nobody is on the page: the watcher's
and the submission's sentences (why it waits, why it failed, each photo's message), and Slurm's
reasons said in plain words (cluster.states, given this gettext).

They are stored as written, so they are written in the language of the person who started the
job (Job.language, taken from their page at Start), not in the server's: a job started from a
Chinese page reads in Chinese on its page, in its emails and through the API.
"""
from __future__ import annotations

from django.conf import settings
from django.utils import translation


def in_language_of(job):
    """A context manager: gettext speaks the job's language inside it."""
    return translation.override(job.language or settings.LANGUAGE_CODE)
