import pytest

from correlate.topology import Topology, deployment_of_pod, gateway_key, in_change_scope, relations, scope_of


@pytest.mark.parametrize(
    "pod, deployment",
    [
        ("vllm-llama-70b-7d9f8b6c5d-x2k4p", "vllm-llama-70b"),
        ("sglang-qwen-0", "sglang-qwen"),
        ("trtllm-mixtral-12", "trtllm-mixtral"),
        ("dcgm-exporter-x7k2p", "dcgm-exporter"),
        ("standalone", ""),
    ],
)
def test_deployment_is_derived_from_the_pod_name(pod, deployment):
    assert deployment_of_pod(pod) == deployment


def test_dcgm_exporter_pod_is_not_taken_for_the_workload():
    scope = scope_of(
        {"pod": "dcgm-exporter-x7k2p", "namespace": "gpu-operator", "Hostname": "gpu-node-3", "gpu": "1"}
    )
    assert scope.pod == ""
    assert scope.node == "gpu-node-3"
    assert "gpu-node-3/gpu1" in scope.gpus


def test_exported_pod_names_the_workload_behind_an_exporter():
    scope = scope_of(
        {
            "pod": "dcgm-exporter-x7k2p",
            "exported_pod": "vllm-a-6c5d8f7b9c-abcde",
            "exported_namespace": "llm",
            "hostname": "n1",
            "UUID": "GPU-1234",
        }
    )
    assert (scope.pod, scope.namespace, scope.deployment) == ("vllm-a-6c5d8f7b9c-abcde", "llm", "vllm-a")
    assert "gpu-1234" in scope.gpus


def test_dcgm_job_without_pod_mapping_means_the_pod_label_is_the_exporter():
    scope = scope_of({"pod": "gpu-metrics-abcde", "job": "dcgm-exporter", "Hostname": "n2"})
    assert scope.pod == ""


def test_dcgm_pod_mapping_with_workload_container_names_the_workload():
    scope = scope_of(
        {
            "pod": "vllm-a-7d9f8b6c5d-x2k4p",
            "container": "inference-server",
            "namespace": "llm",
            "job": "nvidia-dcgm-exporter",
            "hostname": "n2",
            "gpu": "0",
        }
    )
    assert scope.pod == "vllm-a-7d9f8b6c5d-x2k4p"


def test_node_exporter_instance_names_the_node():
    assert scope_of({"instance": "gpu-node-4:9100", "job": "node-exporter"}).node == "gpu-node-4"
    assert scope_of({"instance": "10.1.2.3:8000", "job": "vllm"}).node == ""


@pytest.mark.parametrize("key", ["model", "model_name", "served_model_name"])
def test_model_is_read_from_its_many_labels(key):
    assert scope_of({key: "meta-llama/Llama-3.1-8B"}).model == "Llama-3.1-8B"


@pytest.mark.parametrize(
    "value, model",
    [
        ("/mnt/models", ""),
        ("/mnt/models/", ""),
        ("/models/Llama-3.1-8B-Instruct", "Llama-3.1-8B-Instruct"),
        (
            "/root/.cache/huggingface/hub/models--meta-llama--Llama-3.1-8B/snapshots/0e9e39f249a16976918f6564b8830bc894c89659",
            "Llama-3.1-8B",
        ),
        ("meta-llama/Llama-3.1-8B", "Llama-3.1-8B"),
    ],
)
def test_a_model_served_from_a_path_is_named_by_the_path_not_its_directory(value, model):
    # vLLM without --served-model-name reports the weights' path; KServe mounts every model at /mnt/models
    assert scope_of({"model_name": value}).model == model


def test_kserve_pods_of_two_inferenceservices_with_one_model_path_are_not_siblings():
    a = scope_of(
        {
            "model_name": "/mnt/models",
            "serving_kserve_io_inferenceservice": "granite-8b",
            "pod": "granite-8b-predictor-00001-deployment-6d5c9f8b7-tq2xz",
        }
    )
    b = scope_of(
        {"model_name": "/mnt/models", "pod": "mistral-nemo-12b-predictor-00002-deployment-7f8d6c5b9-jn4kw"}
    )
    assert a.deployment == "granite-8b"
    assert relations(a, b, frozenset(), frozenset(), frozenset(), frozenset()) == {"same_cluster"}


def test_a_gateways_target_model_is_the_model_not_its_alias():
    scope = scope_of({"model_name": "qwen25-32b", "target_model_name": "Qwen/Qwen2.5-32B-Instruct"})
    assert scope.model == "Qwen2.5-32B-Instruct"


@pytest.mark.parametrize(
    "name", ["ensemble", "tensorrt_llm", "tensorrt_llm_bls", "preprocessing", "postprocessing"]
)
def test_tritons_repository_model_names_are_not_models(name):
    # The same in every Triton deployment: taken as a model they made unrelated deployments siblings.
    assert scope_of({"model": name, "version": "1"}).model == ""
    assert scope_of({"model": name, "model_name": "mixtral-8x7b"}).model == "mixtral-8x7b"
    a = scope_of({"model": name, "pod": "triton-mixtral-8x7b-5f6d7c8b9-p9m3z"})
    b = scope_of({"model": name, "pod": "triton-llama3-8b-7b6c5d4f8-zz9rk"})
    assert "sibling" not in relations(a, b, frozenset(), frozenset(), frozenset(), frozenset())


@pytest.mark.parametrize(
    "service",
    [
        "prometheus-kube-state-metrics",
        "nvidia-dcgm-exporter",
        "kube-prometheus-stack-kubelet",
        "node-exporter",
    ],
)
def test_an_exporters_own_service_is_not_a_route(service):
    # Every kube-state-metrics or DCGM alert of a cluster carries it: as a route it related them all.
    ksm = scope_of(
        {
            "namespace": "llm",
            "pod": "vllm-a-6c5d8f7b9c-abcde",
            "service": service,
            "job": "kube-state-metrics",
        }
    )
    assert ksm.route == "" and ksm.gateway_keys == frozenset({"a"})
    gpu_a = scope_of({"Hostname": "n1", "gpu": "0", "service": service, "pod": "nvidia-dcgm-exporter-7xk2p"})
    gpu_b = scope_of({"Hostname": "n2", "gpu": "1", "service": service, "pod": "nvidia-dcgm-exporter-m4q8z"})
    assert relations(gpu_a, gpu_b, frozenset({"n1"}), frozenset({"n2"}), gpu_a.gpus, gpu_b.gpus) == {
        "same_cluster"
    }


def test_a_change_names_its_workload_as_cd_tools_do():
    assert scope_of({"namespace": "chat", "application": "embed-bge-m3"}).deployment == "embed-bge-m3"
    assert scope_of({"namespace": "chat", "release": "sglang-llama-8b"}).deployment == "sglang-llama-8b"
    # only where nothing else names the workload: a team-wide `app` label on engine alerts is not one
    assert scope_of({"pod": "sglang-llama-8b-0", "app": "sglang"}).deployment == "sglang-llama-8b"
    assert scope_of({"model_name": "x/llama-8b", "app": "vllm"}).deployment == ""


def test_opentelemetry_kubernetes_attribute_labels():
    scope = scope_of(
        {
            "k8s_cluster_name": "prod-sg",
            "k8s_namespace_name": "mixtral",
            "k8s_deployment_name": "sglang-mixtral",
            "k8s_pod_name": "sglang-mixtral-6c9d7f5b8-ppq4m",
            "k8s_node_name": "h200-sg-02",
        }
    )
    assert (scope.cluster, scope.namespace, scope.deployment, scope.node) == (
        "prod-sg",
        "mixtral",
        "sglang-mixtral",
        "h200-sg-02",
    )
    assert scope_of({"k8s_statefulset_name": "llama-70b"}).deployment == "llama-70b"


def test_gateway_route_and_engine_deployment_meet_on_the_model_name():
    assert gateway_key("vllm-llama-8b") == gateway_key("llama-8b-route") == "llama-8b"
    assert gateway_key("outbound|8000||llama-8b.llm.svc.cluster.local") == "llama-8b"


@pytest.mark.parametrize(
    "name, key",
    [
        ("httproute/llm/mistral-7b/rule/0", "mistral-7b"),
        ("grpcroute/llm/llama-8b-route/rule/1", "llama-8b"),
        ("llm/llama-70b/8000", "llama-70b"),
        ("http://llama-8b.llm.svc:8000/v1", "llama-8b"),
    ],
)
def test_gateway_key_reads_envoy_gateway_route_names(name, key):
    # Envoy Gateway names clusters httproute/<namespace>/<route>/rule/<n>; a name that starts with
    # 'http' is not a URL for that.
    assert gateway_key(name) == key


def _related(a, b):
    sa, sb = scope_of(a), scope_of(b)
    return relations(sa, sb, frozenset(), frozenset(), frozenset(), frozenset())


def test_two_models_whose_names_share_a_prefix_are_not_one_model():
    base, instruct = "llama-3-8b-6d8f9c7b5-abcde", "llama-3-8b-instruct-7c9d8f6b4-mnpqr"
    assert "gateway" not in _related({"pod": base}, {"pod": instruct})
    assert "gateway" not in _related(
        {"model_name": "meta-llama/Meta-Llama-3-8B"}, {"model_name": "meta-llama/Meta-Llama-3-8B-Instruct"}
    )
    assert "gateway" not in _related(
        {"model_name": "meta-llama/Meta-Llama-3-8B"},
        {"pod": instruct, "model_name": "meta-llama/Meta-Llama-3-8B-Instruct"},
    )
    # a deployment named after its model plus a purpose still meets the model, and a route on
    # the common stem still reaches both deployments (it may serve either)
    assert "gateway" in _related(
        {"deployment": "qwen2-5-72b-summarize"}, {"model_name": "Qwen/Qwen2.5-72B-Instruct"}
    )
    assert "gateway" in _related({"route": "llama-3-8b"}, {"pod": instruct})
    assert "gateway" in _related(
        {"pod": base}, {"pod": "llama-3-8b-6d8f9c7b5-fghjk", "model_name": "x/llama-3-8b"}
    )


def test_a_leaderworkersets_leader_and_worker_pods_stay_related():
    assert "gateway" in _related({"pod": "llama-405b-0"}, {"pod": "llama-405b-0-1"})


def test_numbered_deployments_of_one_model_stay_related_and_other_models_on_the_stem_do_not():
    zero = {"pod": "vllm-llama-3-8b-0-6d8f9c7b5-abcde", "model_name": "llama-3-8b-0"}
    one = {"pod": "vllm-llama-3-8b-1-7c9d8b6f4-fghjk", "model_name": "llama-3-8b-1"}
    instruct = {"pod": "vllm-llama-3-8b-instruct-5b7c6d9f8-klmnp", "model_name": "llama-3-8b-instruct"}
    assert "gateway" in _related(zero, one)
    assert "gateway" not in _related(zero, instruct)
    assert "gateway" not in _related({"model_name": "llama-3-8b-0"}, {"model_name": "llama-3-1-8b"})


def test_a_deployment_named_without_the_model_version_meets_the_model():
    assert "gateway" in _related(
        {"deployment": "vllm-llama-405b-fp8"}, {"model_name": "meta-llama/Llama-3.1-405B-Instruct-FP8"}
    )
    assert "gateway" in _related(
        {"deployment": "vllm-llama-3-70b"}, {"model_name": "meta-llama/Llama-3.1-70B-Instruct"}
    )
    assert "gateway" not in _related(
        {"deployment": "vllm-llama-2-70b"}, {"model_name": "meta-llama/Llama-3-70B-Instruct"}
    )
    assert "gateway" not in _related(
        {"deployment": "vllm-llama-405b"}, {"model_name": "meta-llama/Llama-3.1-70B-Instruct"}
    )


def test_relations_between_siblings_pods_and_nodes():
    topo = Topology()
    a = scope_of({"pod": "vllm-a-6c5d8f7b9c-abcde", "node": "n1"})
    b = scope_of({"pod": "vllm-a-6c5d8f7b9c-fghjk"})
    gpu = scope_of({"Hostname": "n1", "gpu": "0"})
    topo.learn(a, 1000.0)
    rel = relations(
        a, b, topo.nodes(a, 1000.0), topo.nodes(b, 1000.0), topo.gpus(a, 1000.0), topo.gpus(b, 1000.0)
    )
    assert "sibling" in rel and "same_pod" not in rel
    assert "same_node" in relations(
        a, gpu, topo.nodes(a, 1000.0), topo.nodes(gpu, 1000.0), topo.gpus(a, 1000.0), topo.gpus(gpu, 1000.0)
    )


def test_links_learned_from_one_alert_relate_others_from_shortly_before_it():
    topo = Topology(grace=600.0)
    pod_only = scope_of({"pod": "vllm-a-6c5d8f7b9c-abcde"})
    gpu_only = scope_of({"Hostname": "n1", "gpu": "3"})
    assert topo.learn(
        scope_of(
            {
                "exported_pod": "vllm-a-6c5d8f7b9c-abcde",
                "pod": "dcgm-exporter-aaaaa",
                "Hostname": "n1",
                "gpu": "3",
            }
        ),
        5000.0,
    ) == [("node", "n1", 4400.0), ("gpu", "n1/gpu3", 4400.0)]
    at = 4500.0
    rel = relations(
        pod_only,
        gpu_only,
        topo.nodes(pod_only, at),
        topo.nodes(gpu_only, at),
        topo.gpus(pod_only, at),
        topo.gpus(gpu_only, at),
    )
    assert {"same_gpu", "same_node"} <= rel
    assert topo.nodes(pod_only, 4000.0) == frozenset()
    assert topo.learn(scope_of({"pod": "vllm-a-6c5d8f7b9c-abcde", "node": "n1"}), 9000.0) == []


def test_litellms_deployment_model_is_the_model_not_its_public_alias():
    scope = scope_of(
        {
            "model": "docs-assistant",
            "litellm_model_name": "hosted_vllm/mistralai/Mixtral-8x7B-Instruct-v0.1",
            "pod": "litellm-proxy-5d8f7c9b6-k2x4p",
        }
    )
    assert scope.model == "Mixtral-8x7B-Instruct-v0.1"


def test_an_ingress_alert_is_about_its_backend_not_the_controller_or_the_virtual_host():
    """ingress-nginx's metrics name the backend as `exported_service` (the scrape target's own
    `service` is attached), the controller pod that proxied, and the HTTP `host` clients asked for."""
    scope = scope_of(
        {
            "cluster": "dc2",
            "namespace": "ingress-nginx",
            "pod": "ingress-nginx-controller-6c7d8f9b5-m2x4q",
            "service": "ingress-nginx-controller-metrics",
            "exported_namespace": "assistants",
            "ingress": "llama-70b-api",
            "exported_service": "vllm-llama-70b",
            "host": "llm.internal.example.com",
        }
    )
    assert (scope.route, scope.namespace, scope.pod, scope.node) == ("vllm-llama-70b", "assistants", "", "")
    assert "llama~70b" in scope.gateway_keys


def test_a_host_label_still_names_the_node_outside_an_ingress():
    assert scope_of({"host": "gpu-node-7", "pod": "vllm-a-7d9f8b6c5d-x2k4p"}).node == "gpu-node-7"
    # A controller's own trouble (no backend named) keeps its pod.
    assert (
        scope_of({"pod": "ingress-nginx-controller-6c7d8f9b5-m2x4q", "namespace": "ingress-nginx"}).pod
        == "ingress-nginx-controller-6c7d8f9b5-m2x4q"
    )


def test_an_argo_cd_change_names_its_cluster_and_namespace_as_destination():
    scope = scope_of(
        {
            "alertname": "ArgoCDSyncSucceeded",
            "application": "vllm-llama-70b",
            "destination_name": "gke-llm-apac",
            "destination_namespace": "serving",
            "failure_mode": "change",
        }
    )
    assert (scope.cluster, scope.namespace, scope.deployment) == ("gke-llm-apac", "serving", "vllm-llama-70b")


@pytest.mark.parametrize(
    "model, deployment, related",
    [
        ("Qwen/Qwen2.5-7B-Instruct", "sglang-qwen25-7b", True),  # a version written without its dot
        ("meta-llama/Llama-3.1-70B-Instruct", "vllm-llama31-70b", True),
        ("Qwen/Qwen2-57B-A14B-Instruct", "sglang-qwen25-7b", False),  # Qwen2 57B is not Qwen2.5 7B
        ("Qwen/Qwen2-7B-Instruct", "sglang-qwen25-7b", False),
    ],
)
def test_a_model_meets_its_deployment_named_with_a_dotless_version(model, deployment, related):
    gateway = scope_of({"model_name": model})
    engine = scope_of({"pod": f"{deployment}-7d9f8b6c5d-x2k4p", "namespace": "llm"})
    assert (
        "gateway" in relations(gateway, engine, frozenset(), frozenset(), frozenset(), frozenset())
    ) is related


def test_a_leaderworkersets_workers_and_leader_are_one_pod_group():
    from correlate.topology import group_of

    assert group_of("trtllm-llama31-405b-0-1") == "trtllm-llama31-405b-0"  # worker 1 of group 0
    assert group_of("trtllm-llama31-405b-0") == "trtllm-llama31-405b-0"  # the leader
    assert group_of("vllm-llama-7d9f8b6c5d-x2k4p") == "vllm-llama-7d9f8b6c5d-x2k4p"
    worker = scope_of({"pod": "trtllm-llama31-405b-0-1", "namespace": "frontier"})
    leader = scope_of({"pod": "trtllm-llama31-405b-0", "namespace": "frontier"})
    other_group = scope_of({"pod": "trtllm-llama31-405b-1-1", "namespace": "frontier"})
    none = frozenset()
    assert "same_group" in relations(worker, leader, none, none, none, none)
    assert "same_group" not in relations(other_group, leader, none, none, none, none)
    assert "same_group" not in relations(
        scope_of({"pod": "vllm-a-0"}), scope_of({"pod": "vllm-a-1"}), none, none, none, none
    )


def test_a_gateway_api_routes_namespace_is_the_alerts_when_it_names_none():
    # Envoy Gateway: `sum by (envoy_cluster_name)` leaves the route as the alert's only place
    scope = scope_of({"cluster": "eks-prod", "envoy_cluster_name": "httproute/reasoning/deepseek-r1/rule/0"})
    assert (scope.namespace, scope.route) == ("reasoning", "httproute/reasoning/deepseek-r1/rule/0")
    assert scope_of({"route": "grpcroute/llm/llama-8b-route/rule/1"}).namespace == "llm"
    # the alert's own namespace wins; a path that is no Gateway API route names no namespace
    assert (
        scope_of(
            {
                "namespace": "envoy-gateway-system",
                "envoy_cluster_name": "httproute/reasoning/deepseek-r1/rule/0",
            }
        ).namespace
        == "envoy-gateway-system"
    )
    assert scope_of({"envoy_cluster_name": "llm/llama-70b/8000"}).namespace == ""
    assert scope_of({"service": "vllm-llama-8b"}).namespace == ""
    # so a change to another namespace no longer covers the route
    other, own = scope_of({"namespace": "coder"}), scope_of({"namespace": "reasoning"})
    assert not in_change_scope(other, scope, frozenset(), frozenset())
    assert in_change_scope(own, scope, frozenset(), frozenset())


@pytest.mark.parametrize(
    "labels, node",
    [
        ({"instance": "gpu-node-3:8000", "job": "trtllm"}, "gpu-node-3"),
        (
            {"instance": "ip-10-1-22-7.us-west-2.compute.internal:8000", "job": "vllm"},
            "ip-10-1-22-7.us-west-2.compute.internal",
        ),
        # an IP, a service's DNS name, a URL, an exporter, localhost: no machine named
        ({"instance": "10.0.3.7:8000", "job": "vllm"}, ""),
        ({"instance": "[fd00::7]:8000", "job": "vllm"}, ""),
        ({"instance": "vllm-llama-8b.llm.svc.cluster.local:8000", "job": "vllm"}, ""),
        ({"instance": "vllm-llama-8b.llm.svc:8000", "job": "vllm"}, ""),
        ({"instance": "vllm-llama-8b.llm:8000", "job": "vllm"}, ""),
        ({"instance": "https://api.example-llm.com", "job": "blackbox-exporter"}, ""),
        ({"instance": "kube-state-metrics:8080", "job": "kube-state-metrics"}, ""),
        ({"instance": "localhost:8000", "job": "vllm"}, ""),
        # a pod's series: its instance is the pod's address, and its node comes from links
        ({"instance": "gpu-node-3:8000", "pod": "vllm-a-6c5d8f7b9c-abcde"}, ""),
    ],
)
def test_a_pod_less_alerts_instance_host_names_its_node_only_when_it_is_a_machine_name(labels, node):
    assert scope_of(labels).node == node


def test_an_engine_series_named_by_instance_meets_dcgm_on_its_hostname():
    dcgm = scope_of({"job": "dcgm", "instance": "10.20.1.11:9400", "Hostname": "gpu-node-3", "gpu": "0"})
    engine = scope_of({"job": "trtllm", "instance": "gpu-node-3:8000"})
    other = scope_of({"job": "trtllm", "instance": "gpu-node-4:8000"})
    nodes = lambda s: frozenset({s.node})  # noqa: E731
    assert "same_node" in relations(dcgm, engine, nodes(dcgm), nodes(engine), dcgm.gpus, engine.gpus)
    assert "same_node" not in relations(dcgm, other, nodes(dcgm), nodes(other), dcgm.gpus, other.gpus)
