# The account page: the language a user chose for the portal (jobs.models.preferences).
import django.db.models.deletion
from django.conf import settings
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("jobs", "0009_uploads"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.CreateModel(
            name="LanguagePreference",
            fields=[
                ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name="ID")),
                ("language", models.CharField(blank=True, default="", max_length=16, verbose_name="language")),
                ("user", models.OneToOneField(on_delete=django.db.models.deletion.CASCADE,
                                              related_name="language_preference", to=settings.AUTH_USER_MODEL)),
            ],
            options={"verbose_name": "language preference", "verbose_name_plural": "language preferences"},
        ),
    ]
