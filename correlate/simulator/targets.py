"""What a rule fires on (`Target`): a pod, a deployment, a GPU, a node, a GPU with the pod using
it, or a static target for the series a story does not model (`static_target`: blackbox probes,
jobs, node-exporter); `resolve` names the deployment, pod, GPU, node and cluster behind one."""

from __future__ import annotations

from typing import Any

from .world import Cluster, Deployment, Gpu, Node, Pod

# A static target: the series' labels (str), and the cluster under "cluster_obj".
StaticTarget = dict[str, Any]
Target = Pod | Deployment | Gpu | Node | tuple[Gpu, Pod] | StaticTarget


def resolve(target: Target) -> tuple[Deployment | None, Pod | None, Gpu | None, Node | None, Cluster]:
    """(deployment, pod, gpu, node, cluster) for whatever a rule watches."""
    if isinstance(target, Pod):
        return target.deployment, target, target.gpu, target.gpu.node, target.deployment.cluster
    if isinstance(target, Deployment):
        return target, target.pods[0], target.pods[0].gpu, None, target.cluster
    if isinstance(target, Gpu):
        return None, None, target, target.node, target.node.cluster
    if isinstance(target, Node):
        return None, None, None, target, target.cluster
    if isinstance(target, tuple):  # (gpu, pod)
        gpu, pod = target
        return pod.deployment, pod, gpu, gpu.node, pod.deployment.cluster
    return None, None, None, None, target["cluster_obj"]


def static_target(cluster: Cluster, labels: dict[str, str]) -> StaticTarget:
    """A target for rules whose series the story does not model (blackbox, jobs, node-exporter)."""
    d: StaticTarget = {"cluster": cluster.name}
    d.update(labels)
    d["cluster_obj"] = cluster
    return d
