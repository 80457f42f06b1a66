import django.db.models.deletion
from django.db import migrations, models

import jobs.models.priority


class Migration(migrations.Migration):

    dependencies = [("auth", "0012_alter_user_first_name_max_length"), ("jobs", "0016_webhooks")]

    operations = [
        migrations.CreateModel(
            name="QosLevel",
            fields=[
                ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name="ID")),
                ("name", models.CharField(help_text="The QOS as the cluster knows it (sacctmgr show qos), e.g. urgent.",
                                          max_length=64, unique=True, validators=[jobs.models.priority._check_qos_name],
                                          verbose_name="Slurm QOS")),
                ("label", models.CharField(help_text="Plain words, e.g. normal, high, urgent.", max_length=64,
                                           verbose_name="name shown to users")),
                ("rank", models.IntegerField(default=0, help_text="Higher ranks win: a job runs at the higher-ranked of its template's QOS and the best QOS of its owner's groups. Give each level the order its Slurm priority has.", verbose_name="rank")),
            ],
            options={"verbose_name": "priority level", "verbose_name_plural": "priority levels",
                     "ordering": ["-rank", "name"]},
        ),
        migrations.CreateModel(
            name="GroupPriority",
            fields=[
                ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name="ID")),
                ("group", models.OneToOneField(on_delete=django.db.models.deletion.CASCADE, related_name="priority",
                                               to="auth.group", verbose_name="group")),
                ("qos", models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name="groups",
                                          to="jobs.qoslevel", verbose_name="priority level")),
            ],
            options={"verbose_name": "group priority", "verbose_name_plural": "group priorities",
                     "ordering": ["group__name"]},
        ),
        migrations.AddField(
            model_name="job",
            name="expected_start",
            field=models.DateTimeField(blank=True, null=True),
        ),
    ]
