"""`manage.py watch_cluster`: the long-running loop that follows every active job on the clusters
(`jobs.watcher.loop`); this command only reads its options and stops it on SIGTERM/SIGINT."""
import signal

from django.conf import settings
from django.core.management.base import BaseCommand

from jobs.checks import refuse_insecure_start
from jobs.watcher import loop


class Command(BaseCommand):
    help = "Follow active jobs on every cluster profile (or one), applying Slurm state and progress."

    def add_arguments(self, parser):
        parser.add_argument("--profile", help="slug of one cluster profile (default: all active)")
        parser.add_argument("--once", action="store_true", help="one cycle, then exit")
        parser.add_argument("--interval", type=float, default=None, help="seconds between cycles")

    def handle(self, *args, **opts):
        refuse_insecure_start()  # also when started with --skip-checks
        stop = {"now": False}

        def _stop(*_):
            stop["now"] = True

        signal.signal(signal.SIGTERM, _stop)
        signal.signal(signal.SIGINT, _stop)
        loop.run(opts["interval"] or settings.WATCH_INTERVAL, only=opts["profile"], once=opts["once"],
                 stopped=lambda: stop["now"])
