from django.db import migrations, models


class Migration(migrations.Migration):
    """Team folders put a team job's folder under `<work_root>/teams/<account>/`. Jobs already made
    keep the folder they were submitted to: the column arrives False on every existing row, and True
    (the model's default) for every job made from now on."""

    dependencies = [
        ('jobs', '0031_team_usage'),
    ]

    operations = [
        migrations.AddField(
            model_name='job',
            name='team_prefix',
            field=models.BooleanField(default=False),
            preserve_default=False,
        ),
        migrations.AlterField(
            model_name='job',
            name='team_prefix',
            field=models.BooleanField(default=True),
        ),
        # a team lead's team page: the team's jobs, newest first
        migrations.AddIndex(
            model_name='job',
            index=models.Index(fields=['team', '-created_at', '-id'], name='job_team_newest'),
        ),
    ]
