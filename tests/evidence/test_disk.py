"""Disk incidents (a filesystem or a volume filling up) keep the series their alerts watch:
node-exporter's filesystems by node and mountpoint, kubelet's volume stats by claim; not the
GPU and engine series of the node, which say nothing about a full disk. The catalog has no
failure mode for them (they classify as `other`), so evidence tells them by labels and names."""

from __future__ import annotations

import math
from types import SimpleNamespace

import pytest
from django.core.management import call_command

from incidents.catalog import catalog
from incidents.evidence import queries
from incidents.evidence.points import finite, unpack_points
from incidents.models import Alert, EvidenceSeries, Incident
from incidents.services.evidence import evidence_collect, evidence_modes
from tests.evidence.conftest import at, prometheus_backfilled_with, write_openmetrics

GiB = 1024**3
HOST_DISK = {
    "alertname": "HostDiskWillFillIn4Hours",
    "instance": "gpu-node-9:9100",
    "job": "node-exporter",
    "device": "/dev/nvme0n1p2",
    "fstype": "ext4",
    "mountpoint": "/var/lib/containerd",
    "cluster": "prod-eu",
}
PVC = {
    "alertname": "KubePersistentVolumeFillingUp",
    "namespace": "llm",
    "persistentvolumeclaim": "model-cache",
    "job": "kubelet",
    "node": "gpu-node-9",
    "instance": "10.0.0.9:10250",
    "service": "kubelet",
    "cluster": "prod-eu",
}
NODE_DISK = {"alertname": "NodeDiskFilling", "cluster": "prod-eu", "node": "gpu-node-9", "device": "/dev/sda"}
DISK_SIGNALS = {
    "filesystem_avail_bytes",
    "filesystem_size_bytes",
    "volume_available_bytes",
    "volume_capacity_bytes",
}


def by_signal(plan: list[queries.EvidenceQuery]) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for query in plan:
        out.setdefault(query.signal, []).append(query.promql)
    return out


@pytest.mark.parametrize(
    "name,labels,mode,expression,disk",
    [
        ("HostDiskWillFillIn4Hours", HOST_DISK, "other", "", True),
        ("NodeFilesystemSpaceFillingUp", {"mountpoint": "/", "instance": "n1:9100"}, "other", "", True),
        ("KubePersistentVolumeFillingUp", PVC, "other", "", True),
        ("NodeDiskFilling", NODE_DISK, "other", "", True),
        ("Node disk almost full", {"instance": "10.20.1.13:9100"}, None, "", True),
        (
            "PLAT-1300",
            {"instance": "n9:9100"},
            "other",
            "http://prom/graph?g0.expr=node_filesystem_avail_bytes%7Bmountpoint%3D%22%2F%22%7D+%3C+1e9",
            True,
        ),
        ("KubePersistentVolumeErrors", {"persistentvolume": "pv-1"}, "error_rate", "", False),
        ("LLMContainerOOMKilled", {"pod": "vllm-0", "node": "gpu-node-9"}, "oom", "", False),
        ("PLAT-1301", {"instance": "n9:9100"}, "other", "", False),
    ],
)
def test_disk_alerts_are_told_by_their_labels_names_and_rule_expressions(
    name, labels, mode, expression, disk
):
    assert queries.disk_alert(name, labels, mode, expression) is disk


def test_a_disk_incident_asks_for_its_filesystems_and_volumes_and_no_gpu_or_engine_series():
    scope = queries.incident_scope([HOST_DISK, PVC])
    plan = queries.plan(scope, [queries.DISK], catalog(), step=15)
    found = by_signal(plan)

    assert set(found) == DISK_SIGNALS
    assert not [q for q in plan if q.metric.startswith(("DCGM_", "vllm:", "sglang:", "kube_pod"))]
    mount = 'mountpoint=~"/var/lib/containerd"'
    assert found["filesystem_avail_bytes"] == [
        f'node_filesystem_avail_bytes{{instance=~"gpu-node-9:9100",{mount}}}',
        f'node_filesystem_avail_bytes{{node=~"gpu-node-9",{mount}}}',
        f'node_filesystem_avail_bytes{{instance=~"(gpu-node-9)(:[0-9]+)?",{mount}}}',
    ]
    assert (
        found["filesystem_size_bytes"][0]
        == f'node_filesystem_size_bytes{{instance=~"gpu-node-9:9100",{mount}}}'
    )
    fallbacks = [q.fallback_of for q in plan if q.signal == "filesystem_avail_bytes"]
    assert fallbacks == [
        "",
        *found["filesystem_avail_bytes"][:2],
    ]  # each read only when the one before found nothing
    claim = 'namespace="llm",persistentvolumeclaim=~"model-cache"'
    assert found["volume_available_bytes"] == [f"kubelet_volume_stats_available_bytes{{{claim}}}"]
    assert found["volume_capacity_bytes"] == [f"kubelet_volume_stats_capacity_bytes{{{claim}}}"]


def test_a_claim_alone_asks_for_its_volume_not_its_kubelet_nodes_filesystems():
    plan = queries.plan(queries.incident_scope([PVC]), [queries.DISK], catalog(), step=15)
    assert set(by_signal(plan)) == {"volume_available_bytes", "volume_capacity_bytes"}


def test_a_disk_alert_in_a_gpu_incident_adds_its_node_filesystems_to_the_cascade():
    scope = queries.incident_scope(
        [
            NODE_DISK,
            {
                "alertname": "LLMContainerOOMKilled",
                "namespace": "llm",
                "pod": "vllm-llama-7d9f8b6c4-x2k9p",
                "node": "gpu-node-9",
            },
        ]
    )
    found = by_signal(queries.plan(scope, ["oom", queries.DISK], catalog(), step=15))
    assert set(queries.CORE_SIGNALS) <= set(found) and {
        "filesystem_avail_bytes",
        "filesystem_size_bytes",
    } <= set(found)
    assert found["filesystem_avail_bytes"] == [
        'node_filesystem_avail_bytes{node=~"gpu-node-9"}',
        'node_filesystem_avail_bytes{instance=~"(gpu-node-9)(:[0-9]+)?"}',
    ]


def test_disk_alerts_count_as_disk_not_as_the_other_the_catalog_gives_them():
    def alert(labels: dict, mode: str):
        return SimpleNamespace(
            alertname=labels["alertname"], labels=labels, failure_mode=mode, generator_url=""
        )

    incident = SimpleNamespace(failure_modes=["other"])
    assert evidence_modes(incident, [alert(HOST_DISK, "other"), alert(PVC, "other")]) == ["disk"]
    unclassified = alert({"alertname": "SomethingOdd", "pod": "vllm-0"}, "other")
    assert evidence_modes(incident, [alert(NODE_DISK, "other"), unclassified]) == ["disk", "other"]
    assert evidence_modes(SimpleNamespace(failure_modes=["oom"]), [alert(NODE_DISK, "other")]) == [
        "disk",
        "oom",
    ]


# Through the real collection path -------------------------------------------------------------


def disk_openmetrics(path):
    """Two hours from the story's start: gpu-node-9's containerd filesystem and the model-cache
    claim fill up from T+30m; its root filesystem, another node and another claim stay put; the
    node's GPU exports its framebuffer, which a disk incident must not collect."""

    def falling(minute: int) -> float:
        return 200 * GiB - max(0, minute - 30) * 2 * GiB

    node9 = 'instance="gpu-node-9:9100",job="node-exporter",fstype="ext4"'
    filesystems = [
        (f'{node9},device="/dev/nvme0n1p2",mountpoint="/var/lib/containerd"', falling),
        (f'{node9},device="/dev/nvme0n1p1",mountpoint="/"', lambda minute: 40 * GiB),
        (
            'instance="gpu-node-1:9100",job="node-exporter",fstype="ext4",device="/dev/nvme0n1p2",mountpoint="/var/lib/containerd"',
            lambda minute: 300 * GiB,
        ),
    ]
    claims = [
        ('namespace="llm",persistentvolumeclaim="model-cache",node="gpu-node-9",job="kubelet"', falling),
        (
            'namespace="llm",persistentvolumeclaim="other-cache",node="gpu-node-9",job="kubelet"',
            lambda minute: 50 * GiB,
        ),
    ]
    minutes = range(0, 121)
    lines = []
    for family, rows in (
        ("node_filesystem_avail_bytes", filesystems),
        ("node_filesystem_size_bytes", filesystems),
        ("kubelet_volume_stats_available_bytes", claims),
        ("kubelet_volume_stats_capacity_bytes", claims),
        ("DCGM_FI_DEV_FB_FREE", [('Hostname="gpu-node-9",gpu="0"', lambda minute: 2048.0)]),
    ):
        lines.append(f"# TYPE {family} gauge")
        for labels, value in rows:
            for minute in minutes:
                v = 500 * GiB if family.endswith(("size_bytes", "capacity_bytes")) else value(minute)
                lines.append(f"{family}{{{labels}}} {v:.0f} {at(minute).timestamp():.0f}")
    return write_openmetrics(path, lines)


@pytest.fixture(scope="module")
def disk_file(tmp_path_factory):
    return disk_openmetrics(tmp_path_factory.mktemp("disk") / "disk.om")


@pytest.fixture(scope="module")
def disk_prometheus(disk_file, tmp_path_factory):
    yield from prometheus_backfilled_with(disk_file, tmp_path_factory.mktemp("disk-tsdb"))


@pytest.fixture
def disk_incident(make_integration):
    integration = make_integration()

    def make(*rows: dict) -> Incident:
        incident = Incident.objects.create(
            title="disk",
            started_at=at(45),
            last_alert_at=at(50),
            resolved_at=at(85),
            status="resolved",
            failure_modes=["other"],
            scope={},
        )
        for number, labels in enumerate(rows):
            Alert.objects.create(
                fingerprint=f"{incident.pk}-{number}",
                starts_at=at(45 + number * 5),
                ends_at=at(85),
                status="resolved",
                alertname=labels["alertname"],
                labels=labels,
                integration=integration,
                received_at=at(45),
                incident=incident,
                failure_mode="other",
            )
        return incident

    return make


def stored(incident: Incident) -> dict[tuple[str, str, str], EvidenceSeries]:
    return {
        (row.signal, row.query, row.labels_key): row
        for row in EvidenceSeries.objects.filter(incident=incident)
    }


@pytest.mark.services
@pytest.mark.django_db
def test_a_disk_incident_collects_its_filesystem_and_volume_from_prometheus_and_the_local_store_alike(
    disk_prometheus, disk_file, disk_incident, settings
):
    settings.PROMETHEUS_URL = disk_prometheus
    incident = disk_incident(HOST_DISK, PVC)

    result = evidence_collect(incident_id=incident.pk)

    rows = list(EvidenceSeries.objects.filter(incident=incident))
    assert result.gaps == [] and {row.signal for row in rows} == DISK_SIGNALS
    assert {row.source for row in rows} == {"prometheus"} and len(rows) == 4
    (avail,) = [row for row in rows if row.signal == "filesystem_avail_bytes"]
    assert (
        avail.labels["mountpoint"] == "/var/lib/containerd" and avail.labels["instance"] == "gpu-node-9:9100"
    )
    values = dict(finite(unpack_points(avail.points)))
    assert values[at(30).timestamp()] == 200 * GiB and values[at(80).timestamp()] == 100 * GiB
    (volume,) = [row for row in rows if row.signal == "volume_available_bytes"]
    assert volume.labels["persistentvolumeclaim"] == "model-cache"
    assert dict(finite(unpack_points(volume.points)))[at(80).timestamp()] == 100 * GiB

    # An alert naming only the node: its filesystems (not another node's) through the fallback by instance.
    node_only = disk_incident(NODE_DISK)
    evidence_collect(incident_id=node_only.pk)
    avail = EvidenceSeries.objects.filter(incident=node_only, signal="filesystem_avail_bytes")
    assert {(row.labels["instance"], row.labels["mountpoint"]) for row in avail} == {
        ("gpu-node-9:9100", "/var/lib/containerd"),
        ("gpu-node-9:9100", "/"),
    }
    assert (
        not EvidenceSeries.objects.filter(incident=node_only)
        .exclude(signal__startswith="filesystem_")
        .exists()
    )

    call_command("import_metrics", str(disk_file))
    settings.PROMETHEUS_URL = None
    local = disk_incident(HOST_DISK, PVC)
    evidence_collect(incident_id=local.pk)
    from_prometheus, from_store = stored(incident), stored(local)
    assert set(from_store) == set(from_prometheus)
    assert {row.source for row in from_store.values()} == {"import"}
    for key, row in from_prometheus.items():
        theirs, ours = unpack_points(row.points), unpack_points(from_store[key].points)
        assert [t for t, _ in ours] == [t for t, _ in theirs], key
        assert all(math.isclose(a, b) for (_, a), (_, b) in zip(theirs, ours, strict=True)), key
