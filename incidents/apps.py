from django.apps import AppConfig
from django.db.backends.signals import connection_created


class IncidentsConfig(AppConfig):
    name = "incidents"
    verbose_name = "Rootline incidents"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from incidents import (
            task_tallies,  # noqa: F401 - every task run counted for /metrics
            tasks,  # noqa: F401 - registers the tasks `incidents.flow` sends by name
        )
        from incidents.postmortems.template import load_template
        from rootline.postgres_types import use_c_timestamps

        connection_created.connect(use_c_timestamps, dispatch_uid="rootline-c-timestamps")
        load_template()  # a team's template naming an unknown placeholder stops start-up, saying which
