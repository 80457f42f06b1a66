"""The SSH private keys of cluster profiles, encrypted at rest (jobs.secrets).

Forward: every key stored in clear is encrypted with the first FIELD_ENCRYPTION_KEY, then the
column becomes an EncryptedTextField. Backward: the field becomes plain text again, then every key
is decrypted back into the column. Both steps leave rows that are already in the wanted form alone,
so a half-finished run can be repeated.
"""
from django.db import migrations

import jobs.secrets


def encrypt_keys(apps, schema_editor):
    # The column is still a plain TextField here: values are read and written as stored.
    Profile = apps.get_model("jobs", "ClusterProfile")
    for pk, value in Profile.objects.values_list("pk", "private_key"):
        if value and not jobs.secrets.looks_encrypted(value):
            Profile.objects.filter(pk=pk).update(private_key=jobs.secrets.encrypt(value))


def decrypt_keys(apps, schema_editor):
    # A key no FIELD_ENCRYPTION_KEY opens stops the rollback (SecretUnreadable): leaving its token
    # in a plain-text column would hand SSH a key that is not one.
    Profile = apps.get_model("jobs", "ClusterProfile")
    for pk, value in Profile.objects.values_list("pk", "private_key"):
        if value and jobs.secrets.looks_encrypted(value):
            Profile.objects.filter(pk=pk).update(private_key=str(jobs.secrets.decrypt(value)))


class Migration(migrations.Migration):

    dependencies = [
        ("jobs", "0006_cluster_limits"),
    ]

    operations = [
        migrations.RunPython(encrypt_keys, decrypt_keys),
        migrations.AlterField(
            model_name="clusterprofile",
            name="private_key",
            field=jobs.secrets.EncryptedTextField(help_text="The service user's private key (OpenSSH or PEM text).",
                                                  verbose_name="SSH private key"),
        ),
    ]
