"""`manage.py read_team_usage`: read every active cluster's usage by team from Slurm now.

What the watcher does every 10 minutes on its own (jobs.usage.team_usage), at once: for a first
look after making a team, or to check a cluster's accounting by hand. Prints one line per cluster;
exits with status 1 when a cluster could not be read (its last figures stay).
"""
from django.core.management.base import BaseCommand, CommandError

from jobs.usage.team_usage import refresh_all


class Command(BaseCommand):
    help = "Read this month's and last month's GPU-hours of every team from each cluster's Slurm accounting."

    def handle(self, *args, **options):
        outcome = refresh_all()
        for slug, error in outcome.items():
            self.stdout.write(f"{slug}: {'read' if not error else 'not read: ' + error}")
        failed = [slug for slug, error in outcome.items() if error]
        if failed:
            raise CommandError(f"not read from {', '.join(failed)}; their last figures stay")
