"""Changes that arrive as ordinary alerts: kube-state-metrics announcing a rollout that did not go
through (kubernetes-mixin's KubeDeploymentRolloutStuck and its StatefulSet/DaemonSet kin) is the
change itself, dated back by the rule's sustained condition ("for longer than 15 minutes") and the
Deployment's progress deadline, so it can root the crash loop and queueing that came before it
fired; one with no effects stays alone."""

from __future__ import annotations

from datetime import timedelta

from correlate.batch import correlate
from correlate.classify import classify
from correlate.testing import clock, make_alert
from correlate.timing import lookback

MIXIN_STUCK = {
    "description": "Rollout of deployment hr/hr-assistant is not progressing for longer than 15 minutes.",
    "summary": "Deployment rollout is not progressing.",
}
MIXIN_MISMATCH = {
    "description": "Deployment hr/hr-assistant has not matched the expected number of replicas "
    "for longer than 15 minutes."
}


def ksm(name: str, at: str, annotations: dict[str, str], *, honor_labels: bool, **labels: str):
    """A kube-state-metrics alert as scraped with honorLabels (namespace) or without it
    (exported_namespace, with the exporter's own namespace beside it)."""
    where = {"namespace": labels.pop("namespace")}
    if not honor_labels:
        where = {"exported_namespace": where["namespace"], "namespace": "monitoring"}
    return make_alert(
        name, at, annotations=annotations, job="kube-state-metrics", cluster="lon", **where, **labels
    )


def cascade(honor_labels: bool):
    return [
        make_alert(
            "SGLangQueueBacklog",
            "09:27",
            cluster="lon",
            namespace="hr",
            pod="hr-assistant-p9ssjtdc8g-cp8sl",
            model_name="meta-llama/Llama-3.1-8B-Instruct",
        ),
        ksm(
            "KubeDeploymentReplicasMismatch",
            "09:36",
            MIXIN_MISMATCH,
            honor_labels=honor_labels,
            namespace="hr",
            deployment="hr-assistant",
        ),
        ksm(
            "KubeDeploymentRolloutStuck",
            "09:45",
            MIXIN_STUCK,
            honor_labels=honor_labels,
            namespace="hr",
            deployment="hr-assistant",
        ),
    ]


def test_a_stalled_rollout_is_a_change_dated_back_past_its_progress_deadline():
    stuck = cascade(True)[2]
    assert classify(stuck).failure_mode == "change"
    assert lookback(stuck) == timedelta(minutes=15)  # the mixin's "for longer than 15 minutes"
    [incident] = correlate([stuck])
    # 09:45 less the rule's 15 minutes and the Deployment's 10-minute progress deadline
    assert incident.members[0].onset == clock("09:20")


def test_the_rollout_roots_what_broke_before_it_fired_whichever_way_ksm_is_scraped():
    for honor_labels in (True, False):
        alerts = cascade(honor_labels)
        [incident] = correlate(alerts)
        assert {m.alertname for m in incident.members} == {a.alertname for a in alerts}
        assert incident.root is not None and incident.root.alert_key == alerts[2].key


def test_a_statefulset_rollout_that_never_rolled_out_is_a_change_too():
    alert = ksm(
        "KubeStatefulSetUpdateNotRolledOut",
        "09:45",
        {"description": "StatefulSet llm/vllm-lws update has not been rolled out."},
        honor_labels=True,
        namespace="llm",
        statefulset="vllm-lws",
    )
    assert (classify(alert).failure_mode, classify(alert).layer) == ("change", "process")


def test_a_stalled_rollout_with_nothing_broken_stays_alone():
    quiet = ksm(
        "KubeDeploymentRolloutStuck",
        "09:45",
        MIXIN_STUCK,
        honor_labels=True,
        namespace="hr",
        deployment="hr-assistant",
    )
    elsewhere = make_alert(
        "SGLangQueueBacklog", "09:30", cluster="lon", namespace="search", pod="hr-search-nskt556v9-4rhdd"
    )
    incidents = correlate([quiet, elsewhere])
    assert sorted(len(i.members) for i in incidents) == [1, 1]
