# Model sets, the models each job used, and the template watermark (issue 14: provenance, model versions).
import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [("jobs", "0018_retention")]

    operations = [
        migrations.CreateModel(
            name='ModelSet',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('name', models.CharField(help_text='A name that says which version this is, e.g. inswapper 2026-11.', max_length=100, unique=True, verbose_name='name')),
                ('folder', models.CharField(help_text="Absolute folder on the cluster's shared storage that holds these model files.", max_length=500, verbose_name='folder on the cluster')),
                ('files', models.JSONField(default=list, help_text='Each file and its SHA-256, e.g. [{"name": "inswapper_128.onnx", "sha256": "e4a3…"}]. A task refuses a file whose hash differs.', verbose_name='files')),
                ('description', models.TextField(blank=True, verbose_name='description')),
                ('created_at', models.DateTimeField(auto_now_add=True, verbose_name='created')),
            ],
            options={
                'verbose_name': 'model set',
                'verbose_name_plural': 'model sets',
                'ordering': ['-created_at', 'name'],
            },
        ),
        migrations.AddField(
            model_name='job',
            name='models_used',
            field=models.JSONField(blank=True, default=list, verbose_name='models used'),
        ),
        migrations.AddField(
            model_name='template',
            name='watermark',
            field=models.CharField(blank=True, db_default='', default='', help_text='Optional short text drawn small in the bottom-right corner of every result, e.g. “Made with AI”. Letters, digits and punctuation of the Latin alphabet only.', max_length=60, verbose_name='watermark'),
        ),
        migrations.AddField(
            model_name='template',
            name='model_set',
            field=models.ForeignKey(blank=True, help_text="Pin the template to these model files: jobs use this folder and refuse a file whose SHA-256 differs. Empty: the cluster profile's models folder.", null=True, on_delete=django.db.models.deletion.PROTECT, related_name='templates', to='jobs.modelset', verbose_name='model set'),
        ),
    ]
