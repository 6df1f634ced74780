from django.db import migrations, models

from correlate.forecast import cascade

BATCH = 500


def cascade_of_stored_incidents(apps, schema_editor):
    """Incidents correlated before the column existed get their cascade from their stored alerts,
    so that history speaks from the first day."""
    from incidents.forecast import StepRow, stored_cascade

    Incident = apps.get_model("incidents", "Incident")
    Alert = apps.get_model("incidents", "Alert")
    fields = ("id", "incident_id", "starts_at", "false_positive", "layer", "failure_mode", "labels")
    last = 0
    while True:
        batch = list(Incident.objects.filter(pk__gt=last).order_by("pk").only("pk", "root_alert_id")[:BATCH])
        if not batch:
            return
        members: dict[int, list[StepRow]] = {incident.pk: [] for incident in batch}
        for row in (
            Alert.objects.filter(incident_id__in=list(members)).values(*fields).iterator(chunk_size=5000)
        ):
            members[row["incident_id"]].append(StepRow(row))
        for incident in batch:
            rows = {member.key: _Pk(member.key) for member in members[incident.pk]}
            root = str(incident.root_alert_id) if incident.root_alert_id else None
            incident.cascade = stored_cascade(cascade(members[incident.pk], root), rows)
        Incident.objects.bulk_update(batch, ["cascade"])
        last = batch[-1].pk


class _Pk:
    def __init__(self, key: str) -> None:
        self.pk = int(key)


class Migration(migrations.Migration):
    dependencies = [
        ("incidents", "0023_review_weeks"),
    ]

    operations = [
        migrations.AddField(
            model_name="incident",
            name="cascade",
            field=models.JSONField(
                blank=True,
                default=list,
                help_text="its distinct steps [layer, failure_mode, place, seconds after its start, alert id] in "
                "firing order (correlate/forecast.py): what comes next is read from the resolved ones",
            ),
        ),
        migrations.RunPython(cascade_of_stored_incidents, migrations.RunPython.noop),
    ]
