"""The engine on fleets it was not tuned on (tests/correlate/unseen): grouping and root per scenario.

Each scenario is delivered as Alertmanager / PagerDuty bodies through `correlate.io`, correlated
in one batch, and compared with the incidents its author drew: every drawn incident is exactly
one engine incident, noise stays out of them, and the drawn root ranks first. The project's
scorer must agree (pairwise F1 and root top-1 of 1.0 per scenario). Checks the engine is known
to fail (unseen.KNOWN_FAILING, with the diagnosis) run as xfail(strict=True): they pass again,
and fail the suite as XPASS, once the engine is fixed, and the entry is then removed.
"""

import pytest
from unseen import KNOWN_FAILING, SCENARIOS

from correlate.batch import correlate
from correlate.catalog import load_catalog
from correlate.scoring import grouping_from_incidents, score

CATALOG = load_catalog(use_env=False)
BUILT = {name: build() for name, build in SCENARIOS.items()}


def _cases(check):
    """Every scenario, those known to fail `check` marked xfail(strict=True) with the diagnosis."""
    cases = []
    for name in sorted(SCENARIOS):
        reason = KNOWN_FAILING.get(name, {}).get(check)
        cases.append(
            pytest.param(name, marks=pytest.mark.xfail(strict=True, reason=reason)) if reason else name
        )
    return cases


def _incidents(name):
    return correlate(list(BUILT[name].alerts), catalog=CATALOG)


def _by_tag(name, incidents):
    """Each tag's incident index and the tags of each incident's root."""
    tag_of = {(fp, starts): tag for tag, (fp, starts) in BUILT[name].tags.items()}
    where = {}
    roots = []
    for i, incident in enumerate(incidents):
        for member in incident.members:
            where[tag_of[(member.fingerprint, member.starts_at)]] = i
        root = incident.member(incident.root.alert_key) if incident.root else None
        roots.append(tag_of[(root.fingerprint, root.starts_at)] if root else None)
    return where, roots


@pytest.mark.parametrize("name", _cases("grouping"))
def test_each_drawn_incident_is_one_engine_incident(name):
    scenario = BUILT[name]
    incidents = _incidents(name)
    where, _ = _by_tag(name, incidents)
    for _, members in scenario.incidents:
        assert len({where[t] for t in members}) == 1, (name, {t: where[t] for t in sorted(members)})
        holder = incidents[where[next(iter(members))]]
        tags = {t for t, i in where.items() if i == where[next(iter(members))]}
        assert tags == members, (name, sorted(tags ^ members), [m.alertname for m in holder.members])


@pytest.mark.parametrize("name", _cases("noise"))
def test_noise_stays_out_of_the_drawn_incidents(name):
    scenario = BUILT[name]
    where, _ = _by_tag(name, _incidents(name))
    for tag in scenario.noise:
        together = {t for t, i in where.items() if i == where[tag] and t != tag}
        assert not together, (name, tag, sorted(together))


@pytest.mark.parametrize("name", _cases("root"))
def test_the_drawn_root_ranks_first(name):
    scenario = BUILT[name]
    where, roots = _by_tag(name, _incidents(name))
    for root, _ in scenario.incidents:
        assert roots[where[root]] == root, (name, root, roots[where[root]])


@pytest.mark.parametrize("name", _cases("scorer"))
def test_the_project_scorer_agrees(name):
    result = score("engine", BUILT[name].truth, grouping_from_incidents(_incidents(name)))
    assert (result.f1, result.root_top1) == (1.0, 1.0), (name, result)


def test_the_set_varies_what_fleets_vary():
    # Guard the set itself: it must keep its adversarial parts, or the tests above prove little.
    labels = [a.labels for s in BUILT.values() for a in s.alerts]
    urls = " ".join(a.generator_url for s in BUILT.values() for a in s.alerts)
    keys = set().union(*labels)
    for key in (
        "exported_pod",
        "kubernetes_pod_name",
        "Hostname",
        "hostname",
        "model",
        "model_name",
        "deployment",
        "k8s_cluster",
        "cluster_name",
        "kubernetes_namespace",
        "k8s_cluster_name",
        "failure_mode",
        "layer",
    ):
        assert key in keys, key
    for metric in (
        "sglang%3Atoken_usage",
        "DCGM_FI_DEV_XID_ERRORS",
        "vllm%3Agpu_cache_usage_perc",
        "nv_trt_llm_",
        "OOMKilled",
    ):
        assert metric in urls, metric
    assert any(a.status == "resolved" for s in BUILT.values() for a in s.alerts)
    assert any(len(s.incidents) == 2 for s in BUILT.values())
    assert {item.get("severity") for item in labels} >= {"CRITICAL", "Warning", "P1", "sev2"}
