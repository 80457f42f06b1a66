# The language a job was started in: what is written about it in the background is in it.
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [("jobs", "0013_reference_face")]
    operations = [
        migrations.AddField(model_name="job", name="language", field=models.CharField(blank=True, default="", max_length=16)),
    ]
