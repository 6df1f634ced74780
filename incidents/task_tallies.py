"""Every Celery task run, counted for `/metrics` (incidents/services/tallies.py): which queue it came
from, which task, how it ended, and for beat's sweeps when they last ran. What the run noted on
the way (deliveries read, a correlation's length...) is written with it, in one statement."""

from __future__ import annotations

from typing import Any

from celery.signals import task_postrun, task_prerun
from django.conf import settings

from incidents.services.tallies import (
    SWEEP_LAST_RUN,
    SWEEPS,
    TASKS_FINISHED,
    tally_add,
    tally_run_finish,
    tally_run_start,
    tally_stamp,
)

OUTCOMES = {"SUCCESS": "ok", "RETRY": "retry"}  # anything else (FAILURE, REJECTED...) is an error


@task_prerun.connect(dispatch_uid="rootline-tally-run-start")
def run_started(task: Any = None, **kwargs: Any) -> None:
    tally_run_start(inside_caller=bool(task is not None and getattr(task.request, "is_eager", False)))


@task_postrun.connect(dispatch_uid="rootline-tally-run-finish")
def run_finished(task: Any = None, state: str | None = None, **kwargs: Any) -> None:
    if task is not None:
        outcome = OUTCOMES.get(state or "", "error")
        tally_add(TASKS_FINISHED, queue=queue_of(task), task=task.name, outcome=outcome)
        if task.name in SWEEPS and outcome == "ok":
            tally_stamp(SWEEP_LAST_RUN, sweep=SWEEPS[task.name])
    tally_run_finish()


def queue_of(task: Any) -> str:
    """The queue the message came from (the Redis transport's routing key); an eager run's is
    where the routes would have sent it."""
    delivered = getattr(task.request, "delivery_info", None) or {}
    queue = delivered.get("routing_key")
    if queue:
        return str(queue)
    route = settings.CELERY_TASK_ROUTES.get(task.name) or {}
    return str(route.get("queue") or settings.CELERY_TASK_DEFAULT_QUEUE)
