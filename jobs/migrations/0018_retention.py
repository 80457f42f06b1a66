from django.db import migrations


class Migration(migrations.Migration):

    dependencies = [("jobs", "0017_priority")]

    operations = []
