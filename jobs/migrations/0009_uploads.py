# Reserved in the migration chain (filled by the change that needs it).
from django.db import migrations


class Migration(migrations.Migration):
    dependencies = [("jobs", "0008_indexes_for_big_jobs")]
    operations = []
