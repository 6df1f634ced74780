"""A seeded fleet: organisation, clusters, nodes and GPUs, namespaces, model deployments, pods,
people. Another seed gives other names everywhere; the same seed gives the same fleet."""

from __future__ import annotations

import random
from dataclasses import dataclass, field

from .core import hex_id, k8s_suffix

ORGS = [
    "acme",
    "northwind",
    "globex",
    "initech",
    "helios",
    "vandelay",
    "tyrell",
    "nimbus",
    "quanta",
    "oakridge",
]

GPU_TYPES = [
    ("NVIDIA H100 80GB HBM3", 81559, "h100"),
    ("NVIDIA A100-SXM4-80GB", 81920, "a100"),
    ("NVIDIA H200", 143771, "h200"),
    ("NVIDIA L40S", 46068, "l40s"),
]

MODELS = [
    ("meta-llama/Llama-3.1-70B-Instruct", "llama-3-1-70b"),
    ("meta-llama/Llama-3.1-8B-Instruct", "llama-3-1-8b"),
    ("meta-llama/Llama-3.3-70B-Instruct", "llama-3-3-70b"),
    ("Qwen/Qwen2.5-72B-Instruct", "qwen2-5-72b"),
    ("Qwen/Qwen2.5-Coder-32B-Instruct", "qwen2-5-coder-32b"),
    ("Qwen/Qwen3-32B", "qwen3-32b"),
    ("mistralai/Mixtral-8x7B-Instruct-v0.1", "mixtral-8x7b"),
    ("mistralai/Mistral-Small-24B-Instruct-2501", "mistral-small-24b"),
    ("google/gemma-2-27b-it", "gemma-2-27b"),
    ("deepseek-ai/DeepSeek-R1-Distill-Qwen-32B", "deepseek-r1-qwen-32b"),
    ("microsoft/phi-4", "phi-4"),
    ("openai/gpt-oss-120b", "gpt-oss-120b"),
    ("ibm-granite/granite-3.1-8b-instruct", "granite-3-1-8b"),
    ("nvidia/Llama-3.1-Nemotron-70B-Instruct-HF", "nemotron-70b"),
]

NAMESPACES = [
    "llm-serving",
    "inference",
    "genai-prod",
    "chat-serving",
    "llm-platform",
    "model-serving",
    "copilot",
    "search-rerank",
    "docai-prod",
    "kserve-prod",
    "assistant-api",
    "llm-batch",
]

ROLES = ["chat", "api", "serving", "rag", "vllm", "completions", "decode", "summarize"]

PEOPLE = [
    "mchen",
    "aoyelaran",
    "jpark",
    "sfischer",
    "rkumar",
    "lnovak",
    "tdubois",
    "ywang",
    "bokafor",
    "ksato",
    "emartin",
    "dgarcia",
    "hnguyen",
    "pkowalski",
    "imorales",
    "zahmed",
]

REGIONS = {
    "gke": ["us-central1", "us-east4", "europe-west4", "asia-northeast1"],
    "eks": ["us-east-1", "us-west-2", "eu-west-1", "ap-southeast-2"],
    "aks": ["eastus2", "westus3", "westeurope", "swedencentral"],
    "onprem": ["fra", "sjc", "sin", "ams"],
}


ENGINES = ("vllm", "sglang", "trtllm")

# engine metric names, keyed by the vLLM name the rules are written in (families without `_total`)
ENGINE_METRICS = {
    "vllm": {},
    "sglang": {
        "vllm:kv_cache_usage_perc": "sglang:token_usage",
        "vllm:num_requests_waiting": "sglang:num_queue_reqs",
        "vllm:num_requests_running": "sglang:num_running_reqs",
        "vllm:num_preemptions": "sglang:num_retracted_requests",
        "vllm:time_to_first_token_seconds": "sglang:time_to_first_token_seconds",
        "vllm:inter_token_latency_seconds": "sglang:inter_token_latency_seconds",
        "vllm:request_success": "sglang:num_requests",
    },
    "trtllm": {
        "vllm:kv_cache_usage_perc": "trtllm_kv_cache_utilization",
        "vllm:num_requests_waiting": "trtllm_num_requests_waiting",
        "vllm:num_requests_running": "trtllm_num_requests_running",
        "vllm:time_to_first_token_seconds": "trtllm_time_to_first_token_seconds",
        "vllm:request_time_per_output_token_seconds": "trtllm_time_per_output_token_seconds",
        "vllm:request_success": "trtllm_request_success",
    },
}
ENGINE_WORDS = {
    "vllm": ("VLLM", "vllm", "vLLM"),
    "sglang": ("SGLang", "sglang", "SGLang"),
    "trtllm": ("TRTLLM", "trtllm", "TensorRT-LLM"),
}


def metric_name(engine: str, vllm_name: str) -> str | None:
    """The engine's name for a vLLM metric family; None when the engine has no such metric."""
    if engine == "vllm":
        return vllm_name
    return ENGINE_METRICS[engine].get(vllm_name)


def translate(engine: str, text: str) -> str:
    """Rewrites PromQL or prose written for vLLM into the engine's metric names and words."""
    if engine == "vllm":
        return text
    for old, new in sorted(ENGINE_METRICS[engine].items(), key=lambda kv: -len(kv[0])):
        text = text.replace(old, new)
    big, small, prose = ENGINE_WORDS[engine]
    return text.replace("VLLM", big).replace("vllm-", small + "-").replace("vLLM", prose)


@dataclass
class Gpu:
    node: Node
    index: int
    uuid: str
    pci_bus_id: str


@dataclass
class Node:
    name: str
    cluster: Cluster
    gpu_model: str
    fb_mib: int
    ip: str
    gpus: list[Gpu] = field(default_factory=list)
    used: int = 0


@dataclass
class Pod:
    name: str
    deployment: Deployment
    gpu: Gpu
    ip: str
    uid: str

    @property
    def node(self) -> Node:
        return self.gpu.node


@dataclass
class Deployment:
    name: str
    namespace: str
    cluster: Cluster
    model: str
    served_name: str
    job: str
    container: str
    rs_hash: str
    pods: list[Pod] = field(default_factory=list)
    families: set[str] = field(default_factory=set)
    kv_series: bool = True
    frag_series: bool = True
    fb_base: float = 0.92
    old_pods: list[Pod] = field(default_factory=list)
    replicas: int = 0
    engine: str = "vllm"

    def scope(self) -> dict[str, str]:
        return {
            "cluster": self.cluster.name,
            "namespace": self.namespace,
            "deployment": self.name,
            "model": self.served_name,
        }


@dataclass
class Cluster:
    name: str
    provider: str
    region: str
    prom_url: str
    am: str
    honor_labels: bool
    dcgm_job: str
    dcgm_namespace: str
    ext_labels: dict[str, str]
    eval_frac_ns: dict[str, int]
    namespaces: list[str] = field(default_factory=list)
    nodes: list[Node] = field(default_factory=list)
    deployments: list[Deployment] = field(default_factory=list)
    # Per rule kind: (from the labelled platform pack, name, layer and mode choice); see Story._style.
    style: dict[str, tuple[bool, int, int, int]] = field(default_factory=dict)
    synonyms: dict[str, int] = field(default_factory=dict)
    dcgm_pods: dict[str, str] = field(default_factory=dict)
    dcgm_host_label: str = "Hostname"


class World:
    def __init__(self, rng: random.Random, n_clusters: int, ns_precision_cluster: bool = True) -> None:
        self.rng = rng
        self.org = rng.choice(ORGS)
        self.domain = f"{self.org}.internal"
        self.people = rng.sample(PEOPLE, 6)
        self.routing_key = hex_id(rng, 32)
        self.am_urls = {
            "central": rng.choice(
                [
                    f"https://alertmanager.{self.domain}",
                    f"https://alerts.{self.org}-ml.net",
                    "http://alertmanager.monitoring.svc:9093",
                ]
            ),
            "edge": f"https://am-{rng.choice(['dc', 'edge', 'onprem'])}.{self.domain}",
        }
        self._used_models: set[str] = set()
        self._used_names: set[str] = set()
        providers = rng.sample(["gke", "eks", "aks", "onprem"], k=min(4, n_clusters))
        while len(providers) < n_clusters:
            providers.append(rng.choice(["gke", "eks", "aks", "onprem"]))
        self.clusters = [
            self._cluster(p, i, ns_precision_cluster and i == n_clusters - 1 and n_clusters > 1)
            for i, p in enumerate(providers)
        ]

    def _cluster(self, provider: str, index: int, ns_precision: bool) -> Cluster:
        rng = self.rng
        region = rng.choice(REGIONS[provider])
        env = rng.choice(["prod", "prd", "production", "live"])
        if provider == "gke":
            name = f"gke-{region}-{env}-{rng.choice('abc')}"
        elif provider == "eks":
            name = f"eks-{region}-inference-{rng.randint(1, 4)}"
        elif provider == "aks":
            name = f"aks-{region}-gpu-{rng.randint(1, 12):02d}"
        else:
            name = f"{region}-dc{rng.randint(1, 4)}-gpu"
        while name in self._used_names:
            name += "x"
        self._used_names.add(name)
        prom_url = rng.choice(
            [
                f"https://prometheus.{name}.{self.domain}",
                "http://prometheus-k8s-0:9090",
                f"https://thanos-query.{self.domain}",
                f"http://prometheus-{name}.monitoring:9090",
            ]
        )
        am = "edge" if provider == "onprem" else "central"
        ext = {}
        if rng.random() < 0.6:
            ext["prometheus"] = rng.choice(
                ["monitoring/k8s", "monitoring/kube-prometheus-stack-prometheus", "prometheus/prometheus"]
            )
        if provider == "onprem" or rng.random() < 0.3:
            ext["region"] = region
        fracs = {}
        for group in ("llm", "k8s", "gpu", "slo", "node", "misc"):
            if ns_precision:
                fracs[group] = rng.randrange(1, 1_000_000_000)
            else:
                fracs[group] = rng.randrange(0, 1000) * 1_000_000
        cluster = Cluster(
            name=name,
            provider=provider,
            region=region,
            prom_url=prom_url,
            am=am,
            honor_labels=rng.random() < 0.5,
            dcgm_job=rng.choice(["nvidia-dcgm-exporter", "dcgm-exporter", "gpu-metrics"]),
            dcgm_namespace=rng.choice(["gpu-operator", "nvidia-gpu-operator", "kube-system"]),
            ext_labels=ext,
            eval_frac_ns=fracs,
            namespaces=rng.sample(NAMESPACES, 3),
        )
        cluster.dcgm_host_label = "hostname" if rng.random() < 0.25 else "Hostname"
        gpu_model, fb, tag = rng.choice(GPU_TYPES[:3]) if provider != "aks" else rng.choice(GPU_TYPES)
        for n in range(rng.randint(5, 7)):
            cluster.nodes.append(self._node(cluster, gpu_model, fb, tag, n))
        return cluster

    def _node(self, cluster: Cluster, gpu_model: str, fb: int, tag: str, n: int) -> Node:
        rng = self.rng
        a, b, c = rng.randint(0, 255), rng.randint(0, 255), rng.randint(2, 250)
        if cluster.provider == "gke":
            name = f"gke-{cluster.name[4:20].rstrip('-')}-{tag}-pool-{hex_id(rng, 8)}-{k8s_suffix(rng, 4)}"
        elif cluster.provider == "eks":
            name = f"ip-10-{a}-{b}-{c}.{cluster.region}.compute.internal"
        elif cluster.provider == "aks":
            name = (
                f"aks-gpunp{rng.randint(1, 3)}-{rng.randint(10000000, 99999999)}"
                f"-vmss{rng.randint(0, 4095):06x}"
            )
        else:
            name = f"gpu-{tag}-r{rng.randint(1, 12):02d}-n{n + 1:02d}"
        node = Node(name=name, cluster=cluster, gpu_model=gpu_model, fb_mib=fb, ip=f"10.{a}.{b}.{c}")
        for i in range(8):
            uuid = (
                f"GPU-{hex_id(rng, 8)}-{hex_id(rng, 4)}-{hex_id(rng, 4)}-{hex_id(rng, 4)}-{hex_id(rng, 12)}"
            )
            node.gpus.append(
                Gpu(node=node, index=i, uuid=uuid, pci_bus_id=f"00000000:{0x18 + i * 0x11:02X}:00.0")
            )
        cluster.dcgm_pods[name] = f"{cluster.dcgm_job}-{k8s_suffix(rng, 5)}"
        return node

    def deployment(
        self,
        cluster: Cluster,
        namespace: str | None = None,
        pods: int | None = None,
        model: tuple[str, str] | None = None,
        engine: str = "vllm",
    ) -> Deployment:
        """A model deployment with its pods spread over the cluster's nodes (one GPU per pod)."""
        rng = self.rng
        if model is None:
            choices = [m for m in MODELS if m[0] not in self._used_models] or MODELS
            model = rng.choice(choices)
        self._used_models.add(model[0])
        hf, slug = model
        role = rng.choice(ROLES)
        prefix = {"vllm": "vllm", "sglang": "sglang", "trtllm": "trtllm"}[engine]
        name = rng.choice([f"{slug}-{role}", f"{prefix}-{slug}", f"{slug}-{role}-v{rng.randint(2, 4)}"])
        while name in self._used_names:
            name = f"{name}-{rng.randint(2, 9)}"
        self._used_names.add(name)
        served = rng.choice([hf, hf, slug, f"{slug}-{role}"])
        jobs = {
            "vllm": ["vllm", f"{name}-metrics", "vllm-engine", name],
            "sglang": ["sglang", f"{name}-metrics", name],
            "trtllm": ["trtllm-serve", f"{name}-metrics", name],
        }
        containers = {
            "vllm": ["vllm", "vllm-openai", "inference-server", "engine"],
            "sglang": ["sglang", "sglang-server", "engine"],
            "trtllm": ["trtllm-serve", "triton", "engine"],
        }
        dep = Deployment(
            name=name,
            namespace=namespace or rng.choice(cluster.namespaces),
            cluster=cluster,
            model=hf,
            served_name=served,
            job=rng.choice(jobs[engine]),
            container=rng.choice(containers[engine]),
            rs_hash=k8s_suffix(rng, rng.choice([9, 10])),
            engine=engine,
        )
        for _ in range(pods or rng.randint(3, 4)):
            dep.pods.append(self._pod(dep))
        dep.replicas = len(dep.pods)
        cluster.deployments.append(dep)
        return dep

    def _pod(self, dep: Deployment, rs_hash: str | None = None) -> Pod:
        rng = self.rng
        nodes = sorted(dep.cluster.nodes, key=lambda n: (n.used, rng.random()))
        node = nodes[0]
        gpu = node.gpus[node.used % 8]
        node.used += 1
        name = f"{dep.name}-{rs_hash or dep.rs_hash}-{k8s_suffix(rng, 5)}"
        ip = f"10.{rng.randint(64, 127)}.{rng.randint(0, 255)}.{rng.randint(2, 250)}"
        uid = f"{hex_id(rng, 8)}-{hex_id(rng, 4)}-{hex_id(rng, 4)}-{hex_id(rng, 4)}-{hex_id(rng, 12)}"
        return Pod(name=name, deployment=dep, gpu=gpu, ip=ip, uid=uid)

    def roll(self, dep: Deployment, count: int | None = None) -> list[Pod]:
        """A rollout: a new ReplicaSet hash and `count` new pods; the old ones are kept for metrics."""
        dep.old_pods = dep.old_pods + list(dep.pods)
        dep.rs_hash = k8s_suffix(self.rng, len(dep.rs_hash))
        dep.pods = [self._pod(dep) for _ in range(count or len(dep.pods))]
        return dep.pods

    def replace_pod(self, pod: Pod) -> Pod:
        """A pod evicted and recreated by its ReplicaSet (same hash, new suffix, maybe another node)."""
        dep = pod.deployment
        new = self._pod(dep)
        dep.pods[dep.pods.index(pod)] = new
        dep.old_pods.append(pod)
        return new
