from rest_framework import serializers

from incidents.models import Alert


class AlertSerializer(serializers.ModelSerializer):
    incident = serializers.SerializerMethodField()

    class Meta:
        model = Alert
        fields = [
            "id", "fingerprint", "alertname", "status", "labels", "annotations", "starts_at", "ends_at",
            "layer", "failure_mode", "incident", "false_positive", "kind",
        ]

    def get_incident(self, alert: Alert) -> int | None:
        return None  # filled in by correlation, which arrives with the incidents issue
