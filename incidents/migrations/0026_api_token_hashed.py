"""API tokens kept as their SHA-256 (incidents.ApiToken), not in clear as DRF's authtoken kept
them: each token there is moved here, hashed, and removed from there."""

import hashlib

import django.db.models.deletion
from django.conf import settings
from django.db import migrations, models


def hash_plain_tokens(apps, schema_editor):
    Token = apps.get_model("authtoken", "Token")
    ApiToken = apps.get_model("incidents", "ApiToken")
    for token in Token.objects.all():
        ApiToken.objects.create(
            user_id=token.user_id,
            digest=hashlib.sha256(token.key.encode("utf-8", "surrogatepass")).hexdigest(),
            hint=token.key[:6],
            created_at=token.created,
        )
    Token.objects.all().delete()


class Migration(migrations.Migration):
    dependencies = [
        ("incidents", "0025_incident_evidence_collected_at"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
        ("authtoken", "0003_tokenproxy"),
    ]

    operations = [
        migrations.CreateModel(
            name="ApiToken",
            fields=[
                (
                    "id",
                    models.BigAutoField(
                        auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                    ),
                ),
                ("digest", models.CharField(max_length=64, unique=True)),
                (
                    "hint",
                    models.CharField(
                        help_text="the token's first characters, to tell tokens apart", max_length=8
                    ),
                ),
                ("created_at", models.DateTimeField()),
                ("revoked_at", models.DateTimeField(blank=True, null=True)),
                (
                    "user",
                    models.ForeignKey(
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="api_tokens",
                        to=settings.AUTH_USER_MODEL,
                    ),
                ),
            ],
            options={
                "indexes": [models.Index(fields=["user", "revoked_at"], name="api_token_user_idx")],
            },
        ),
        # Irreversible by nature: the clear tokens are gone; going back leaves DRF's table empty.
        migrations.RunPython(hash_plain_tokens, migrations.RunPython.noop),
    ]
