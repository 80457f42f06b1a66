# Results that check themselves, and a preview before the big run (issue 27).

from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('jobs', '0026_bilingual_names'),
    ]

    operations = [
        migrations.AlterModelOptions(
            name='job',
            options={'ordering': ['-created_at', '-id'], 'permissions': [('see_faces', "Can see other people's face photos and results")], 'verbose_name': 'job', 'verbose_name_plural': 'jobs'},
        ),
        migrations.AlterModelOptions(
            name='upload',
            options={'verbose_name': 'file sent ahead', 'verbose_name_plural': 'files sent ahead'},
        ),
        migrations.AddField(
            model_name='template',
            name='self_check',
            field=models.BooleanField(db_default=True, default=True, help_text="Look at each photo's result again with the engine's own face recogniser, and mark the faces that did not take as needing a look on the job page. Without a GPU this takes about as long as the swap itself; with one, a few milliseconds a face.", verbose_name='check each result'),
        ),
        migrations.AddField(
            model_name='job',
            name='is_preview',
            field=models.BooleanField(db_default=False, default=False),
        ),
        migrations.AddField(
            model_name='job',
            name='needs_look',
            field=models.PositiveIntegerField(db_default=0, default=0),
        ),
        migrations.AddField(
            model_name='target',
            name='self_check',
            field=models.CharField(blank=True, db_default='', default='', max_length=16),
        ),
        migrations.AddField(
            model_name='target',
            name='self_check_faces',
            field=models.PositiveSmallIntegerField(db_default=0, default=0),
        ),
    ]
