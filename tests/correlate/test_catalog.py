import textwrap
from datetime import timedelta

import pytest

from correlate.catalog import FAILURE_MODES, LAYERS, CatalogError, load_catalog, parse_duration
from correlate.classify import Classifier
from correlate.testing import make_alert


def test_packaged_catalog_names_every_contract_mode_and_layer():
    catalog = load_catalog(use_env=False)
    assert set(FAILURE_MODES) <= set(catalog.modes)
    assert set(LAYERS) <= set(catalog.layers)
    assert {m.mode for m in catalog.matchers} <= set(catalog.modes)


@pytest.mark.parametrize(
    "band, yellow, red, direction",
    [
        ("kv_pool_usage", 0.70, 0.85, "above"),
        ("framebuffer_headroom", 2048, 1024, "below"),
        ("queue_wait", 0.1, 0.3, "above"),
        ("batch_fill", 0.8, 0.6, "below"),
        ("kv_fragmentation", None, 0.25, "above"),
        ("ttft_p99", None, 2.0, "above"),
        ("tpot_p99", None, 0.08, "above"),
        ("itl_jitter", None, 0.03, "above"),
        ("spec_acceptance", None, 0.65, "below"),
    ],
)
def test_bands_carry_domain_thresholds_with_series(band, yellow, red, direction):
    found = load_catalog(use_env=False).bands[band]
    assert found.red == pytest.approx(red)
    assert found.yellow == (pytest.approx(yellow) if yellow is not None else None)
    assert found.direction == direction
    assert found.series


def test_causal_rules_cover_the_canonical_chains():
    catalog = load_catalog(use_env=False)
    for cause, effect in [
        ("kv_fragmentation", "oom"),
        ("oom", "restart"),
        ("restart", "queueing"),
        ("queueing", "slo_ttft"),
        ("preemption", "slo_itl"),
        ("preemption", "slo_tpot"),
        ("hot_instance", "queueing"),
        ("numeric", "error_rate"),
        ("gpu_error", "restart"),
        ("restart", "target_down"),
        ("timeout", "queueing"),
        ("spec_decode", "slo_tpot"),
        ("change", "gpu_error"),
    ]:
        assert catalog.rules_for(cause, effect), f"no rule {cause}->{effect}"
    assert not catalog.rules_for("slo_ttft", "kv_fragmentation")


def test_team_file_named_by_env_adds_matchers_that_win(tmp_path, monkeypatch):
    team = tmp_path / "team.yaml"
    team.write_text(
        textwrap.dedent("""
        matchers:
          - id: team-blockpool
            mode: kv_fragmentation
            layer: engine
            names: ['block pool split']
    """)
    )
    alert = make_alert("BlockPoolSplitQueueGrowing", "01:00", pod="p-0")
    assert Classifier(load_catalog(use_env=False)).classify(alert).failure_mode == "queueing"
    monkeypatch.setenv("ROOTLINE_CATALOG", str(team))
    assert Classifier(load_catalog()).classify(alert).failure_mode == "kv_fragmentation"


def test_override_path_replaces_rule_by_id_and_disables_another(tmp_path):
    team = tmp_path / "team.yaml"
    team.write_text(
        textwrap.dedent("""
        rules:
          - {id: oom->restart, max_lag: 5m}
          - {id: queueing->slo_ttft, disabled: true}
        settings:
          max_span: 90m
        bands:
          ttft_p99: {red: 1.5}
    """)
    )
    catalog = load_catalog(team, use_env=False)
    assert catalog.rules_for("oom", "restart")[0].max_lag == timedelta(minutes=5)
    assert not catalog.rules_for("queueing", "slo_ttft")
    assert catalog.settings.max_span == timedelta(minutes=90)
    assert catalog.bands["ttft_p99"].red == 1.5
    assert catalog.bands["ttft_p99"].series


def test_bad_override_is_reported_with_its_entry(tmp_path):
    team = tmp_path / "team.yaml"
    team.write_text("matchers:\n  - {id: broken, mode: oom, names: ['(unclosed']}\n")
    with pytest.raises(CatalogError, match="broken"):
        load_catalog(team, use_env=False)
    team.write_text("rules:\n  - {id: x, cause: oom, effect: melted}\n")
    with pytest.raises(CatalogError, match="melted"):
        load_catalog(team, use_env=False)


def test_missing_override_file_is_an_error_not_silence(tmp_path):
    with pytest.raises(CatalogError):
        load_catalog(tmp_path / "nope.yaml", use_env=False)


@pytest.mark.parametrize("text, seconds", [("90s", 90), ("15m", 900), ("1h30m", 5400), (30, 30)])
def test_durations_read_like_prometheus(text, seconds):
    assert parse_duration(text) == timedelta(seconds=seconds)


def test_a_mode_can_narrow_where_two_of_its_alerts_are_one_trouble(tmp_path):
    """Two GPU faults on sibling pods (different nodes) are one trouble under the packaged
    same_mode_scope; a team that says GPU faults fail device by device keeps them apart."""
    from correlate.batch import correlate
    from correlate.testing import make_alert

    labels = {"cluster": "prod-a", "namespace": "llm"}
    xid_a = make_alert(
        "DCGMXidErrors", "02:00", pod="vllm-llama-7d9f8b6c5d-x2k4p", node="gpu-1", gpu="0", **labels
    )
    xid_b = make_alert(
        "DCGMXidErrors", "02:04", pod="vllm-llama-7d9f8b6c5d-q8r7s", node="gpu-2", gpu="3", **labels
    )
    assert len(correlate([xid_a, xid_b], catalog=load_catalog(use_env=False))) == 1
    team = tmp_path / "team.yaml"
    team.write_text("modes:\n  gpu_error: {same_mode_scope: [same_gpu, same_node, same_pod]}\n")
    narrowed = load_catalog(team, use_env=False)
    assert narrowed.modes["gpu_error"].same_mode_scope == frozenset({"same_gpu", "same_node", "same_pod"})
    assert narrowed.modes["gpu_error"].layer == "hardware"  # deep merge keeps the rest of the mode
    assert len(correlate([xid_a, xid_b], catalog=narrowed)) == 2


def test_an_unknown_relation_in_a_modes_same_mode_scope_is_refused(tmp_path):
    from correlate.catalog import CatalogError

    team = tmp_path / "team.yaml"
    team.write_text("modes:\n  gpu_error: {same_mode_scope: [same_rack]}\n")
    with pytest.raises(CatalogError, match="modes.gpu_error.same_mode_scope: unknown relation"):
        load_catalog(team, use_env=False)


def test_the_packaged_catalog_reads_the_same_with_libyaml_as_with_pure_python():
    import yaml

    from correlate.catalog import _SAFE_LOADER, packaged_catalog_text

    assert _SAFE_LOADER is yaml.CSafeLoader  # PyYAML's wheels carry libyaml
    text = packaged_catalog_text()
    assert yaml.load(text, Loader=_SAFE_LOADER) == yaml.load(text, Loader=yaml.SafeLoader)


def test_a_team_file_that_is_not_yaml_is_an_error_naming_the_file_and_line(tmp_path):
    path = tmp_path / "team.yaml"
    path.write_text("matchers:\n  - id: x\n    match: {alertname: [unclosed\n")
    with pytest.raises(CatalogError) as caught:
        load_catalog(path, use_env=False)
    assert (
        str(path) in str(caught.value)
        and "invalid YAML" in str(caught.value)
        and "line 3" in str(caught.value)
    )
