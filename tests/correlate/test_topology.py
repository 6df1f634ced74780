import pytest

from correlate.topology import Topology, deployment_of_pod, gateway_key, relations, scope_of


@pytest.mark.parametrize(
    "pod, deployment",
    [("vllm-llama-70b-7d9f8b6c5d-x2k4p", "vllm-llama-70b"), ("sglang-qwen-0", "sglang-qwen"),
     ("trtllm-mixtral-12", "trtllm-mixtral"), ("dcgm-exporter-x7k2p", "dcgm-exporter"), ("standalone", "")],
)
def test_deployment_is_derived_from_the_pod_name(pod, deployment):
    assert deployment_of_pod(pod) == deployment


def test_dcgm_exporter_pod_is_not_taken_for_the_workload():
    scope = scope_of({"pod": "dcgm-exporter-x7k2p", "namespace": "gpu-operator", "Hostname": "gpu-node-3", "gpu": "1"})
    assert scope.pod == ""
    assert scope.node == "gpu-node-3"
    assert "gpu-node-3/gpu1" in scope.gpus


def test_exported_pod_names_the_workload_behind_an_exporter():
    scope = scope_of({"pod": "dcgm-exporter-x7k2p", "exported_pod": "vllm-a-6c5d8f7b9c-abcde",
                      "exported_namespace": "llm", "hostname": "n1", "UUID": "GPU-1234"})
    assert (scope.pod, scope.namespace, scope.deployment) == ("vllm-a-6c5d8f7b9c-abcde", "llm", "vllm-a")
    assert "gpu-1234" in scope.gpus


def test_dcgm_job_without_pod_mapping_means_the_pod_label_is_the_exporter():
    scope = scope_of({"pod": "gpu-metrics-abcde", "job": "dcgm-exporter", "Hostname": "n2"})
    assert scope.pod == ""


def test_dcgm_pod_mapping_with_workload_container_names_the_workload():
    scope = scope_of({"pod": "vllm-a-7d9f8b6c5d-x2k4p", "container": "inference-server", "namespace": "llm",
                      "job": "nvidia-dcgm-exporter", "hostname": "n2", "gpu": "0"})
    assert scope.pod == "vllm-a-7d9f8b6c5d-x2k4p"


def test_node_exporter_instance_names_the_node():
    assert scope_of({"instance": "gpu-node-4:9100", "job": "node-exporter"}).node == "gpu-node-4"
    assert scope_of({"instance": "10.1.2.3:8000", "job": "vllm"}).node == ""


@pytest.mark.parametrize("key", ["model", "model_name", "served_model_name"])
def test_model_is_read_from_its_many_labels(key):
    assert scope_of({key: "meta-llama/Llama-3.1-8B"}).model == "Llama-3.1-8B"


def test_gateway_route_and_engine_deployment_meet_on_the_model_name():
    assert gateway_key("vllm-llama-8b") == gateway_key("llama-8b-route") == "llama-8b"
    assert gateway_key("outbound|8000||llama-8b.llm.svc.cluster.local") == "llama-8b"


def test_relations_between_siblings_pods_and_nodes():
    topo = Topology()
    a = scope_of({"pod": "vllm-a-6c5d8f7b9c-abcde", "node": "n1"})
    b = scope_of({"pod": "vllm-a-6c5d8f7b9c-fghjk"})
    gpu = scope_of({"Hostname": "n1", "gpu": "0"})
    topo.learn(a, 1000.0)
    rel = relations(a, b, topo.nodes(a, 1000.0), topo.nodes(b, 1000.0), topo.gpus(a, 1000.0), topo.gpus(b, 1000.0))
    assert "sibling" in rel and "same_pod" not in rel
    assert "same_node" in relations(a, gpu, topo.nodes(a, 1000.0), topo.nodes(gpu, 1000.0),
                                    topo.gpus(a, 1000.0), topo.gpus(gpu, 1000.0))


def test_links_learned_from_one_alert_relate_others_from_shortly_before_it():
    topo = Topology(grace=600.0)
    pod_only = scope_of({"pod": "vllm-a-6c5d8f7b9c-abcde"})
    gpu_only = scope_of({"Hostname": "n1", "gpu": "3"})
    assert topo.learn(scope_of({"exported_pod": "vllm-a-6c5d8f7b9c-abcde", "pod": "dcgm-exporter-aaaaa",
                                "Hostname": "n1", "gpu": "3"}), 5000.0) == [("node", "n1", 4400.0), ("gpu", "n1/gpu3", 4400.0)]
    at = 4500.0
    rel = relations(pod_only, gpu_only, topo.nodes(pod_only, at), topo.nodes(gpu_only, at),
                    topo.gpus(pod_only, at), topo.gpus(gpu_only, at))
    assert {"same_gpu", "same_node"} <= rel
    assert topo.nodes(pod_only, 4000.0) == frozenset()
    assert topo.learn(scope_of({"pod": "vllm-a-6c5d8f7b9c-abcde", "node": "n1"}), 9000.0) == []
