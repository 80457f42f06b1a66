# Content safety settings (issue 14): filled in by the content-safety change.
from django.db import migrations


class Migration(migrations.Migration):

    dependencies = [("jobs", "0019_model_sets")]

    operations = []
