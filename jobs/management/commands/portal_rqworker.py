"""`manage.py portal_rqworker`: the portal's RQ worker as `make up` runs it (scripts/up.sh).

django-rq's `rqworker` with the portal's choices fixed, so no command line can leave one out: the
portal's queue, the scheduler (it runs submissions' retries), JSON jobs (settings.RQ_SERIALIZER,
never pickles) and `jobs.background.rq_worker.PortalWorker`, which runs jobs in this process so that the SSH
connection stays open from one Start to the next. Every other option of `rqworker` (--burst,
--name, ...) passes through.
"""
from django.conf import settings
from django_rq.management.commands.rqworker import Command as RQWorkerCommand

from jobs.background.rq_worker import QUEUES, PortalWorker


class Command(RQWorkerCommand):
    help = "The portal's RQ worker: submissions, cancels, output fetches and emails (see jobs/background/rq_worker.py)."

    def handle(self, *args, **options):
        options.update(worker_class=PortalWorker, with_scheduler=True, serializer=settings.RQ_SERIALIZER)
        return super().handle(*(args or QUEUES), **options)
