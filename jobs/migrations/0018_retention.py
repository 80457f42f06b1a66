# Retention of a job's files (issue 14): the admin's policy row and the job's tombstone dates.
import django.core.validators
from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [("jobs", "0017_priority")]

    operations = [
        migrations.CreateModel(
            name='RetentionPolicy',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('days', models.PositiveIntegerField(default=30, help_text='Counted from the end of the job. Then its photos, videos and results are deleted from the portal and from the cluster; the job stays listed, marked “files deleted”.', validators=[django.core.validators.MinValueValidator(1), django.core.validators.MaxValueValidator(3650)], verbose_name="keep a job's files for (days)")),
                ('notice_days', models.PositiveIntegerField(default=3, help_text='The owner is emailed this many days before the deletion (0: no email). Files are never deleted sooner than this after the email.', validators=[django.core.validators.MaxValueValidator(365)], verbose_name='tell the owner (days before)')),
            ],
            options={
                'verbose_name': 'retention settings',
                'verbose_name_plural': 'retention settings',
            },
        ),
        migrations.AddField(
            model_name='job',
            name='cluster_files_deleted_at',
            field=models.DateTimeField(blank=True, null=True),
        ),
        migrations.AddField(
            model_name='job',
            name='files_deleted_at',
            field=models.DateTimeField(blank=True, db_index=True, null=True),
        ),
        migrations.AddField(
            model_name='job',
            name='retention_notice_at',
            field=models.DateTimeField(blank=True, null=True),
        ),
        migrations.AlterField(
            model_name='emailnotice',
            name='kind',
            field=models.CharField(choices=[('job_finished', 'job ended'), ('quota_80', '80 % of the monthly GPU-hours'), ('quota_100', 'monthly GPU-hours used up'), ('booking', 'booking'), ('retention', 'files to be deleted soon')], max_length=16, verbose_name='kind'),
        ),
    ]
