# The photo of the person whose faces a job replaces (face_selector "reference", chosen per job).
from django.db import migrations, models

import jobs.models.job


class Migration(migrations.Migration):
    dependencies = [("jobs", "0012_recovery")]
    operations = [
        migrations.AddField(
            model_name="job",
            name="reference_face",
            field=models.FileField(blank=True, max_length=500, upload_to=jobs.models.job.reference_upload_to),
        ),
    ]
