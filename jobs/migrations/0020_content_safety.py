# Content safety settings (issue 14): the one-row SafetyPolicy (jobs/models/content_safety.py), off by default.
import django.core.validators
from django.db import migrations, models

import jobs.models.content_safety


class Migration(migrations.Migration):

    dependencies = [("jobs", "0019_model_sets")]

    operations = [
        migrations.CreateModel(
            name='SafetyPolicy',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('enabled', models.BooleanField(default=False, help_text='Off by default. Needs the optional content-check model installed on the portal and the cluster (docs/content-safety.md).', verbose_name='check photos and results')),
                ('check_sources', models.BooleanField(default=True, help_text='Each face photo a user sends is checked; a refused one cannot be used.', verbose_name='check face photos')),
                ('check_outputs', models.BooleanField(default=True, help_text='Each result is checked on the cluster right after it is made; a refused one is deleted and never delivered.', verbose_name='check results')),
                ('refuse', models.TextField(default=jobs.models.content_safety.default_refuse, help_text="The model's labels that refuse an image, separated by commas. The built-in model knows: FEMALE_GENITALIA_COVERED, FACE_FEMALE, BUTTOCKS_EXPOSED, FEMALE_BREAST_EXPOSED, FEMALE_GENITALIA_EXPOSED, MALE_BREAST_EXPOSED, ANUS_EXPOSED, FEET_EXPOSED, BELLY_COVERED, FEET_COVERED, ARMPITS_COVERED, ARMPITS_EXPOSED, FACE_MALE, BELLY_EXPOSED, MALE_GENITALIA_EXPOSED, ANUS_COVERED, FEMALE_BREAST_COVERED, BUTTOCKS_COVERED.", verbose_name='labels to refuse')),
                ('min_score', models.FloatField(default=0.5, help_text='How sure the model must be (0.01 to 1) before a label refuses an image.', validators=[django.core.validators.MinValueValidator(0.01), django.core.validators.MaxValueValidator(1.0)], verbose_name='minimum score')),
                ('plugin', models.CharField(default='nudenet', help_text='“nudenet” for the built-in model, or “package.module:callable” for another one (docs/content-safety.md).', max_length=200, verbose_name='model plug-in')),
            ],
            options={
                'verbose_name': 'content check settings',
                'verbose_name_plural': 'content check settings',
            },
        ),
    ]
