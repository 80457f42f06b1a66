from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('jobs', '0021_access_permissions'),
    ]

    operations = [
        migrations.AddField(
            model_name='job',
            name='changed_at',
            field=models.DateTimeField(blank=True, null=True),
        ),
    ]
