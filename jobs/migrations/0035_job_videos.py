"""Job.videos: how many of a job's targets are videos, kept on the job (a page no longer counts them
over every target). Jobs made before it get their count here, once, in one UPDATE."""
from django.db import migrations, models
from django.db.models import Count, OuterRef, Q, Subquery
from django.db.models.functions import Coalesce

# The video extensions as they were when this migration was written (worker.manifest.VIDEO_EXTENSIONS
# may grow; a migration must not change with it).
VIDEO_EXTENSIONS = (".mp4", ".mov", ".mkv", ".webm")


def count_videos(apps, schema_editor):
    Job = apps.get_model("jobs", "Job")
    Target = apps.get_model("jobs", "Target")
    is_video = Q()
    for ext in VIDEO_EXTENSIONS:
        is_video |= Q(name__iendswith=ext)
    per_job = (Target.objects.filter(is_video, job=OuterRef("pk")).order_by().values("job")
               .annotate(n=Count("pk")).values("n"))
    Job.objects.filter(total__gt=0).update(videos=Coalesce(Subquery(per_job), 0))


class Migration(migrations.Migration):

    dependencies = [
        ('jobs', '0034_power_saving'),
    ]

    operations = [
        migrations.AddField(
            model_name='job',
            name='videos',
            field=models.PositiveIntegerField(db_default=0, default=0),
        ),
        migrations.RunPython(count_videos, migrations.RunPython.noop),
    ]
