"""An alert's scope (`Scope`): where it happened, read from its labels (`scope_of`).

Labels name the same thing many ways (`pod`, `exported_pod`, `kubernetes_pod_name`...), and a
DCGM alert's `pod` may be the exporter's own pod rather than the workload's; this module turns
labels into one scope, with the name reductions that rests on: an alert's cluster (`cluster_of`,
the one definition of it), a pod's workload and pod group, a model or route name's gateway key
and stems. How two scopes relate, and the pod->node/GPU links learned from alerts, are
`correlate/topology.py`'s."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from functools import lru_cache

POD_KEYS = ("exported_pod", "pod", "kubernetes_pod_name", "pod_name", "k8s_pod_name")
# Argo CD's notifications name where an application is deployed `destination_name` (the cluster,
# as registered in Argo CD) and `destination_namespace`.
NAMESPACE_KEYS = (
    "exported_namespace",
    "namespace",
    "kubernetes_namespace",
    "k8s_namespace_name",
    "destination_namespace",
)
NODE_KEYS = (
    "node",
    "Hostname",
    "hostname",
    "kubernetes_node",
    "node_name",
    "nodename",
    "k8s_node_name",
    "host",
)
# target_model_name first: a gateway's `model_name` is the name clients ask for (an alias, an
# objective), its `target_model_name` the model the engines serve.
# LiteLLM's `litellm_model_name` is the deployment's model behind its public `model` alias.
MODEL_KEYS = (
    "target_model_name",
    "litellm_model_name",
    "model",
    "model_name",
    "served_model_name",
    "model_id",
    "llm_model",
    "base_model",
)
# Triton's `model` label names the model repository entry, the same in every deployment.
REPOSITORY_MODELS = frozenset(
    {"ensemble", "tensorrt_llm", "tensorrt_llm_bls", "preprocessing", "postprocessing"}
)
# Directories an engine started without --served-model-name reports as its model (KServe's
# /mnt/models, a Hugging Face cache): they name where weights live, not which model.
_PATH_WORDS = frozenset(
    {
        "mnt",
        "models",
        "model",
        "data",
        "weights",
        "checkpoints",
        "snapshots",
        "hub",
        "cache",
        ".cache",
        "huggingface",
        "hf",
        "root",
        "home",
        "opt",
        "workspace",
        "tmp",
        "var",
        "lib",
        "pvc",
        "volume",
        "storage",
    }
)
_HEXISH = re.compile(r"^[0-9a-f]{12,64}$")
GPU_INDEX_KEYS = ("gpu", "gpu_index", "minor_number")
GPU_UUID_KEYS = ("UUID", "uuid", "gpu_uuid")
DEPLOYMENT_KEYS = (
    "deployment",
    "statefulset",
    "workload",
    "leaderworkerset",
    "inferenceservice",
    "app_kubernetes_io_instance",
    "k8s_deployment_name",
    "k8s_statefulset_name",
    "serving_kserve_io_inferenceservice",
)
# How CD tools name what they changed (Argo CD applications, Helm releases): read only for a scope
# with no pod, model or route (a change event), where a team-wide `app` label cannot mislead.
APPLICATION_KEYS = (
    "application",
    "argocd_application",
    "app",
    "app_kubernetes_io_name",
    "helm_release",
    "release",
)
# `exported_service` first: a proxy's metric naming its backend service (ingress-nginx) keeps that
# label as `exported_service` when the scrape target's own `service` label is attached.
ROUTE_KEYS = (
    "route",
    "httproute",
    "exported_service",
    "service",
    "destination_service_name",
    "destination_workload",
    "envoy_cluster_name",
    "backend",
    "upstream",
    "inference_pool",
    "inferencepool",
    "pool",
    "server",
    "target",
)
CLUSTER_KEYS = (
    "cluster",
    "k8s_cluster",
    "cluster_name",
    "kubernetes_cluster",
    "cluster_id",
    "k8s_cluster_name",
    "destination_name",
)
EXPORTER_POD = re.compile(
    r"(dcgm|exporter|kube-state-metrics|prometheus|node-exporter|cadvisor|otel|collector|vmagent|grafana-agent|alloy)",
    re.I,
)
_INGRESS_CONTROLLER = re.compile(r"ingress|haproxy|traefik|contour|kong|ambassador", re.I)
_ROUTE_KINDS = frozenset({"httproute", "grpcroute", "tlsroute", "tcproute", "udproute"})
# A host name that can be a node's: DNS labels, starting with a letter (an IP address cannot).
_HOST_NAME = re.compile(r"^[a-z][a-z0-9-]*(\.[a-z0-9][a-z0-9-]*)*$", re.I)
# Names of services rather than machines: Kubernetes service DNS, mDNS, localhost.
_SERVICE_HOST = re.compile(r"(^|\.)(svc|cluster\.local|local|localhost|localdomain)(\.|$)", re.I)
_SIZE_TOKEN = re.compile(r"^(\d+x)?\d+(\.\d+)?[bmk]$")
_K8S_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"
_DEPLOYMENT_POD = re.compile(
    rf"^(?P<name>.+)-(?:(?=[a-z0-9]*\d)[a-z0-9]{{6,10}}|[{_K8S_ALPHABET}]{{6,10}})-[a-z0-9]{{5}}$"
)
_STATEFUL_POD = re.compile(r"^(?P<name>.+)-\d+$")
_DAEMON_POD = re.compile(rf"^(?P<name>.+)-[{_K8S_ALPHABET}]{{5}}$")
_GATEWAY_NOISE = frozenset(
    {
        "vllm",
        "sglang",
        "trtllm",
        "trt",
        "tgi",
        "triton",
        "svc",
        "service",
        "route",
        "router",
        "gateway",
        "engine",
        "server",
        "serving",
        "predictor",
        "deployment",
        "inference",
        "pool",
        "default",
        "http",
        "https",
        "backend",
        "api",
        "epp",
        "istio",
        "envoy",
        "outbound",
        "inbound",
        "cluster",
        "local",
        "upstream",
        "llm",
        "lb",
        "ingress",
        "grpc",
        "openai",
        "worker",
        "decode",
        "prefill",
        "v1",
    }
)


@dataclass(frozen=True)
class Scope:
    cluster: str = ""
    namespace: str = ""
    deployment: str = ""
    model: str = ""
    pod: str = ""
    node: str = ""
    gpus: frozenset[str] = frozenset()
    route: str = ""
    gateway_keys: frozenset[str] = frozenset()
    group: str = ""  # group_of(pod): the pod group (a LeaderWorkerSet's leader) its pod belongs to

    def describe(self) -> str:
        """The narrowest place, as people say it in an incident channel."""
        if self.pod:
            return self.pod
        if self.gpus and self.node:
            gpu = sorted(self.gpus)[0]
            return gpu if "/" in gpu else f"{self.node} GPU {gpu}"
        for value in (self.node, self.deployment, self.model, self.route, self.namespace, self.cluster):
            if value:
                return value
        return "an unknown scope"

    def as_dict(self) -> dict[str, str]:
        out = {
            k: getattr(self, k)
            for k in ("cluster", "namespace", "deployment", "model", "pod", "node", "route")
        }
        if self.gpus:
            out["gpu"] = ",".join(sorted(self.gpus))
        return {k: v for k, v in out.items() if v}


def deployment_of_pod(pod: str) -> str:
    """Kubernetes names pods `<deployment>-<replicaset hash>-<5 chars>` or `<statefulset>-<n>`."""
    for pattern in (_DEPLOYMENT_POD, _STATEFUL_POD, _DAEMON_POD):
        found = pattern.match(pod)
        if found:
            return found.group("name")
    return ""


@lru_cache(maxsize=65536)
def group_of(pod: str) -> str:
    """The pod group a pod belongs to: a LeaderWorkerSet's workers are `<lws>-<g>-<i>` (pods of a
    StatefulSet named `<lws>-<g>`) and its leader is `<lws>-<g>`, so a worker's group is its
    leader's name; any other pod is its own group."""
    owner = _STATEFUL_POD.match(pod)
    if owner and _STATEFUL_POD.match(owner.group("name")):
        return owner.group("name")
    return pod


@lru_cache(maxsize=65536)
def gateway_key(name: str) -> str:
    """A service, route or model name reduced to the words that name the model it serves."""
    text = name.strip().lower()
    if "|" in text:
        parts = [p for p in text.split("|") if p]
        text = parts[-1].split(".")[0] if parts else text
    elif "/" in text and "://" not in text:
        pieces = [p for p in text.split("/") if p and not p.isdigit()]
        if len(pieces) >= 3 and pieces[0] in _ROUTE_KINDS:  # Envoy Gateway: httproute/<ns>/<route>/rule/<n>
            text = pieces[2]
        else:
            text = pieces[-1] if len(pieces) < 3 else pieces[1]
    text = re.sub(r"^https?://", "", text).split(":")[0]
    if "." in text and re.search(r"\.(svc|cluster|local)\b", text):
        text = text.split(".")[0]
    tokens = [
        t
        for t in re.split(r"[^a-z0-9]+", text)
        if t and t not in _GATEWAY_NOISE and not (t.isdigit() and len(t) >= 3)
    ]
    return "-".join(tokens)


@lru_cache(maxsize=65536)
def gateway_stems(key: str) -> frozenset[str]:
    """A key and its leading parts that end in a model size ('qwen2-5-72b' of 'qwen2-5-72b-chat').

    A deployment is usually named after its model plus a purpose or version, so the gateway's
    model name and the engine's deployment meet on their common stem; a stem must end in a
    size token (8b, 72b, 8x7b), so 'llama-3' alone never joins an 8B and a 70B model. A second
    stem keeps only the family word and the numbered words before the size, written together
    ('deepseekr1^32b' for both 'deepseek-r1-distill-qwen-32b' and 'deepseek-r1-qwen-32b';
    'qwen25^7b' for 'qwen2-5-7b' and 'qwen25-7b', a version written with or without its dot;
    'qwen2-57b' stays 'qwen2^57b'); without any number there it is the family and size
    ('mistral~7b'). A third is the family and size alone ('llama~405b' of
    'llama-3-1-405b-instruct'), for a deployment named without the model's version
    ('vllm-llama-405b'); `relations` accepts a family~size stem only where the versions do not
    disagree (see `_versions_agree`).
    """
    if not key:
        return frozenset()
    tokens = key.split("-")
    stems = {key}
    for size in range(2, len(tokens) + 1):
        if _SIZE_TOKEN.match(tokens[size - 1]):
            if size < len(tokens):
                stems.add("-".join(tokens[:size]))
            numbered = [t for t in tokens[1:size] if any(ch.isdigit() for ch in t)]
            compact = "".join([tokens[0], *numbered[:-1]])
            if any(ch.isdigit() for ch in compact):
                stems.add(f"{compact}^{tokens[size - 1]}")  # family and version, written with or without dots
            else:
                stems.add("~".join([tokens[0], *numbered]))
            if len(numbered) > 1:
                stems.add(f"{tokens[0]}~{tokens[size - 1]}")
            break
    return frozenset(stems)


def cluster_of(labels: Mapping[str, str]) -> str:
    """An alert's cluster: the first of CLUSTER_KEYS it names, without surrounding whitespace. The
    one definition of the engine's partition, the batch's shares and the app's correlation key."""
    for key in CLUSTER_KEYS:
        value = labels.get(key)
        if value:
            return value.strip()
    return ""


def _first(labels: Mapping[str, str], keys: Iterable[str]) -> str:
    for key in keys:
        value = labels.get(key)
        if value:
            return value.strip()
    return ""


def _model(labels: Mapping[str, str]) -> str:
    for key in MODEL_KEYS:
        value = labels.get(key)
        if value and value.strip() and value.strip().lower() not in REPOSITORY_MODELS:
            value = value.strip()
            if value.startswith("/") or value.count("/") > 1:
                value = _model_of_path(value)
            if value:
                return value
    return ""


def _model_of_path(path: str) -> str:
    """'/mnt/models' -> '' and '/models/Llama-3.1-8B' -> 'Llama-3.1-8B'; HF cache
    'models--org--name' -> 'name'."""
    for part in reversed([p for p in path.split("/") if p]):
        if part.startswith("models--"):
            return part.rsplit("--", 1)[-1]
        if part.lower() not in _PATH_WORDS and not _HEXISH.match(part.lower()):
            return part
    return ""


def _route(labels: Mapping[str, str]) -> str:
    """The route or service an alert names, unless it is the exporter's own (kube-state-metrics, dcgm)."""
    for key in ROUTE_KEYS:
        value = labels.get(key)
        if value and value.strip() and not EXPORTER_POD.search(value):
            return value.strip()
    return ""


def _route_namespace(route: str) -> str:
    """The namespace a Gateway API route name carries: Envoy Gateway names its clusters
    `httproute/<namespace>/<route>/rule/<n>` (an alert summed by that label keeps no other)."""
    pieces = route.split("/")
    if len(pieces) >= 3 and pieces[0].lower() in _ROUTE_KINDS and pieces[1]:
        return pieces[1]
    return ""


def _is_exporter_pod(labels: Mapping[str, str], pod: str) -> bool:
    """Whether `pod` is the exporter that scraped the metric rather than the workload it maps.

    dcgm-exporter maps GPUs to the workload's namespace/pod/container; without that mapping (or
    when Prometheus renamed them to exported_*) the pod label is the exporter's DaemonSet pod.
    """
    if EXPORTER_POD.search(pod):
        return True
    if ("ingress" in labels or "exported_service" in labels) and _INGRESS_CONTROLLER.search(pod):
        return True  # the proxy that served the request, not the backend the alert is about
    if "dcgm" not in labels.get("job", "").lower() or "exported_pod" in labels:
        return False
    container = labels.get("container", "")
    return (
        not container
        or bool(EXPORTER_POD.search(container))
        or _looks_like_monitoring(labels.get("namespace", ""))
    )


def _node(labels: Mapping[str, str]) -> str:
    """The node an alert names. An ingress's `host` is the virtual host clients asked for
    (ingress-nginx labels requests with `host` and `ingress`), not a machine."""
    keys = NODE_KEYS if "ingress" not in labels else tuple(key for key in NODE_KEYS if key != "host")
    return _first(labels, keys) or _node_from_instance(labels)


def _node_from_instance(labels: Mapping[str, str]) -> str:
    """A node exporter's `instance` host; or, for an alert that names no pod, an `instance` host
    that is a machine's name (a static target `gpu-node-3:8000`, as DCGM's `Hostname` names the
    node), never an IP address, a URL or a service's DNS name."""
    instance = labels.get("instance", "")
    job = labels.get("job", "").lower()
    if not instance:
        return ""
    host, _, port = instance.rpartition(":") if ":" in instance else (instance, "", "")
    if "node" in job and "exporter" in job or job in ("node", "node-exporter", "kubelet") or port == "9100":
        return host
    if any(labels.get(key) for key in POD_KEYS) or "/" in instance:
        return ""
    return host if _is_node_name(host) else ""


@lru_cache(maxsize=4096)
def _is_node_name(host: str) -> bool:
    """'gpu-node-3' and 'ip-10-1-22-7.us-west-2.compute.internal' name machines; '10.0.3.7',
    'vllm.llm.svc.cluster.local', 'vllm.llm' (service.namespace) and an exporter's own name do not."""
    if not _HOST_NAME.match(host) or _SERVICE_HOST.search(host) or EXPORTER_POD.search(host):
        return False
    return host.count(".") != 1


def scope_of(labels: Mapping[str, str]) -> Scope:
    workload_pod = labels.get("exported_pod", "").strip()
    pod = workload_pod or _first(labels, POD_KEYS[1:])
    namespace = labels.get("exported_namespace", "").strip() or _first(labels, NAMESPACE_KEYS[1:])
    if pod and not workload_pod and _is_exporter_pod(labels, pod):
        pod = ""
        if not labels.get("exported_namespace"):
            namespace = "" if _looks_like_monitoring(namespace) else namespace
    node = _node(labels)
    gpus = _gpus(labels, node)
    deployment = _first(labels, DEPLOYMENT_KEYS) or (deployment_of_pod(pod) if pod else "")
    model = _model(labels)
    if "/" in model and not model.startswith("/"):
        model = model.rsplit("/", 1)[-1]
    route = _route(labels)
    if route and not namespace:
        namespace = _route_namespace(route)
    if not (deployment or pod or model or route):
        deployment = _first(labels, APPLICATION_KEYS)
    keys: set[str] = set()
    for value in (deployment, model, route):
        if value:
            keys.update(gateway_stems(gateway_key(value)))
    return Scope(
        cluster=cluster_of(labels),
        namespace=namespace,
        deployment=deployment,
        model=model,
        pod=pod,
        node=node,
        gpus=gpus,
        route=route,
        gateway_keys=frozenset(keys),
        group=group_of(pod) if pod else "",
    )


def _looks_like_monitoring(namespace: str) -> bool:
    return bool(
        re.search(r"monitor|prometheus|gpu-operator|observab|dcgm|kube-system|metrics", namespace, re.I)
    )


def _gpus(labels: Mapping[str, str], node: str) -> frozenset[str]:
    found: set[str] = set()
    uuid = _first(labels, GPU_UUID_KEYS)
    if uuid:
        found.add(uuid.lower())
    index = _first(labels, GPU_INDEX_KEYS)
    if not index:
        device = labels.get("device", "")
        digits = re.fullmatch(r"nvidia(\d+)", device)
        index = digits.group(1) if digits else ""
    if index and node:
        found.add(f"{node}/gpu{index}")
    return frozenset(found)
