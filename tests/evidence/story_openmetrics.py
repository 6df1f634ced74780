"""(Copied from the shared testbed's gen_openmetrics.py, so the tests stand alone, and kept here
rather than in testbed/: see testbed/README.md. Reformatted and lint-fixed since.)

Generate OpenMetrics text for a synthetic LLM-serving incident (for promtool backfill).

Story (T = --start, default: now - 2h15m so the whole window is recent):
  T+00m..T+20m  all 4 pods healthy (kv-cache ~50 %, fragmentation ~8 %, GPU mem ~72 %)
  T+20m         pod-2 KV-cache fragmentation starts to climb
  T+30m         pod-2 llm_kv_cache_fragmentation_ratio crosses 0.25
  T+35m         pod-2 preemptions accelerate, TTFT degrades
  T+45m         pod-2 GPU framebuffer usage crosses 85 % (DCGM_FI_DEV_FB_USED/(USED+FREE))
  T+60m         pod-2 OOM-killed: kube_pod_container_status_restarts_total 0 -> 1,
                kube_pod_container_status_last_terminated_reason{reason="OOMKilled"} = 1,
                vLLM series of pod-2 absent for 2 min, its counters restart from 0
  T+60m..T+75m  the other pods absorb pod-2's traffic: vllm:num_requests_waiting spikes,
                TTFT p95 goes to several seconds
  T+75m..T+85m  recovery: queues drain, TTFT back to baseline; T+85m..T+120m healthy

Output is OpenMetrics 1.0 text: one family at a time, each series time-ordered, histogram
MetricPoints (buckets+count+sum) grouped per timestamp, timestamps in SECONDS, and the
mandatory trailing '# EOF'.  Stdlib only; deterministic for a given --seed/--start.

  python3 gen_openmetrics.py --out /tmp/incident.om --story-json /tmp/incident.story.json
  promtool tsdb create-blocks-from openmetrics /tmp/incident.om /tmp/data
"""

from __future__ import annotations

import argparse
import itertools
import json
import math
import random
import sys
import time
import zlib
from datetime import UTC, datetime

FB_TOTAL_MIB = 81559.0  # what DCGM reports for an H100 80GB HBM3 (USED+FREE+RESERVED)
FB_RESERVED_MIB = 512.0
FB_USABLE_MIB = FB_TOTAL_MIB - FB_RESERVED_MIB  # USED + FREE (DCGM_FI_DEV_FB_RESERVED not emitted)
TTFT_BUCKETS = [0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 20.0]
MODEL = "meta-llama/Llama-3.1-8B-Instruct"
NAMESPACE = "llm-serving"

# Event times in minutes after T (exported in the story JSON for checkers).
EV = {
    "frag_ramp_start": 20.0,
    "frag_cross_025": 30.0,
    "preempt_ramp_start": 35.0,
    "mem_cross_085": 45.0,
    "oom_restart": 60.0,
    "pod_back": 62.0,
    "queue_spike_start": 60.0,
    "queue_spike_end": 75.0,
    "recovered": 85.0,
}


def interp(points, x):
    """Piecewise-linear interpolation over [(x, y), ...] (clamped at both ends)."""
    if x <= points[0][0]:
        return points[0][1]
    for (x0, y0), (x1, y1) in itertools.pairwise(points):
        if x <= x1:
            return y0 + (y1 - y0) * (x - x0) / (x1 - x0)
    return points[-1][1]


def rng_for(seed, *key):
    return random.Random(zlib.crc32((f"{seed}|" + "|".join(map(str, key))).encode()))


def fmt_labels(d):
    return (
        "{"
        + ",".join(
            '{}="{}"'.format(k, str(v).replace("\\", "\\\\").replace('"', '\\"')) for k, v in d.items()
        )
        + "}"
    )


def fmt_ts(ts):
    # OpenMetrics timestamps are seconds (float). Milliseconds here would be read as year ~55000.
    return (f"{ts:.3f}").rstrip("0").rstrip(".")


def fmt_val(v):
    if isinstance(v, int):
        return str(v)
    if v == math.inf:
        return "+Inf"
    return repr(round(float(v), 6))


class Story:
    def __init__(self, pods, bad_pod, seed):
        self.pods = pods
        self.bad = bad_pod
        self.seed = seed

    # ---- helpers: is a pod's vLLM process up at minute m? -------------------------------
    def vllm_up(self, p, m):
        return not (p == self.bad and EV["oom_restart"] <= m < EV["pod_back"])

    def overload(self, m):
        """0..1 factor for the other pods' overload after the OOM (spike then drain)."""
        return interp(
            [
                (EV["queue_spike_start"] - 0.01, 0.0),
                (EV["queue_spike_start"] + 2, 1.0),
                (EV["queue_spike_end"], 1.0),
                (EV["recovered"] - 2, 0.0),
            ],
            m,
        )

    # ---- gauges ---------------------------------------------------------------------------
    def frag(self, p, m, r):
        if p != self.bad:
            return 0.08 + r.uniform(-0.006, 0.006) + 0.02 * self.overload(m)
        if m < EV["frag_ramp_start"]:
            return 0.08 + r.uniform(-0.006, 0.006)
        if m < EV["oom_restart"]:
            # tiny noise while ramping so the 0.25 crossing lands exactly on T+30m (not a step early)
            return (
                0.08
                + r.uniform(-0.0008, 0.0008)
                + interp(
                    [
                        (EV["frag_ramp_start"], 0.0),
                        (EV["frag_cross_025"], 0.173),
                        (EV["mem_cross_085"], 0.25),
                        (EV["oom_restart"], 0.34),
                    ],
                    m,
                )
            )
        return 0.05 + 0.03 * min(1.0, (m - EV["pod_back"]) / 20.0) + r.uniform(-0.004, 0.004)

    def mem_frac(self, p, m, r):
        """FB_USED / (FB_USED + FB_FREE)."""
        if p != self.bad:
            return 0.72 + r.uniform(-0.004, 0.004) + 0.03 * self.overload(m)
        if m < EV["frag_cross_025"]:
            return 0.72 + r.uniform(-0.004, 0.004)
        if m < EV["oom_restart"]:
            return (
                0.72
                + r.uniform(-0.0005, 0.0005)
                + interp(
                    [
                        (EV["frag_cross_025"], 0.0),
                        (EV["mem_cross_085"], 0.1315),
                        (55.0, 0.21),
                        (EV["oom_restart"], 0.268),
                    ],
                    m,
                )
            )
        if m < EV["pod_back"]:
            return 0.006  # driver/context only while the container restarts
        # model weights load, then vLLM pre-allocates its KV cache again
        return interp(
            [(EV["pod_back"], 0.05), (EV["pod_back"] + 1.5, 0.45), (EV["pod_back"] + 2.5, 0.72)], m
        ) + r.uniform(-0.003, 0.003)

    def kv_usage(self, p, m, r):
        base = 0.50 + r.uniform(-0.05, 0.05)
        if p == self.bad and m < EV["oom_restart"]:
            return min(0.995, base + interp([(0, 0), (EV["frag_cross_025"], 0.0), (55.0, 0.47)], m))
        if p == self.bad:
            return max(0.0, base - 0.35 * (1 - min(1.0, (m - EV["pod_back"]) / 10.0)))
        return min(0.995, base + 0.46 * self.overload(m))

    def waiting(self, p, m, r):
        base = r.choice([0, 0, 0, 1, 1, 2, 3])
        if p == self.bad and m < EV["oom_restart"]:
            return base + int(
                interp([(0, 0), (EV["mem_cross_085"], 0), (EV["oom_restart"], 25)], m) + r.uniform(0, 4)
            )
        if p == self.bad:
            return base
        return base + int(48 * self.overload(m) + (r.uniform(-8, 12) if self.overload(m) > 0.3 else 0))

    def running(self, p, m, r):
        base = 22 + r.randint(-4, 4)
        if p == self.bad and m < EV["oom_restart"]:
            return max(
                4, base - int(interp([(0, 0), (EV["preempt_ramp_start"], 0), (EV["oom_restart"], 14)], m))
            )
        return min(64, base + int(30 * self.overload(m)))

    # ---- per-step increments for counters / histograms -------------------------------------
    def preemptions_inc(self, p, m, r):
        if p == self.bad and m < EV["oom_restart"]:
            lam = interp([(0, 0.02), (EV["preempt_ramp_start"], 0.02), (EV["oom_restart"], 4.0)], m)
        else:
            lam = 0.02 + 1.5 * self.overload(m)
        # Poisson via Knuth (lam is small)
        L, k, prod = math.exp(-lam), 0, r.random()
        while prod > L:
            k += 1
            prod *= r.random()
        return k

    def ttft_median(self, p, m):
        if p == self.bad and m < EV["oom_restart"]:
            return interp([(0, 0.15), (EV["preempt_ramp_start"], 0.15), (EV["oom_restart"], 1.6)], m)
        if p == self.bad:
            return 0.15
        return 0.15 + 3.0 * self.overload(m)

    def req_rate(self, p, m):
        """requests/s served by pod p."""
        if not self.vllm_up(p, m):
            return 0.0
        if p == self.bad:
            return 4.0 if m < EV["oom_restart"] else 4.0 * min(1.0, (m - EV["pod_back"]) / 5.0)
        n_other = max(1, len(self.pods) - 1)
        return 4.0 + 4.0 / n_other * self.overload(m)


def generate(args):
    step = args.step
    n_steps = int(args.duration // step) + 1
    t0 = args.start
    pods = ["%s%d" % (args.pod_prefix, i) for i in range(args.pods)]
    bad = pods[args.bad_pod]
    st = Story(pods, bad, args.seed)
    times = [t0 + i * step for i in range(n_steps)]
    minutes = [(t - t0) / 60.0 for t in times]

    def vllm_labels(p):
        return {
            "job": "vllm",
            "namespace": NAMESPACE,
            "pod": p,
            "instance": f"{p}:8000",
            "model_name": MODEL,
        }

    def dcgm_labels(p, i):
        return {
            "job": "dcgm-exporter",
            "namespace": NAMESPACE,
            "pod": p,
            "container": "vllm",
            "gpu": "0",
            "UUID": "GPU-5f1c0000-0000-0000-0000-00000000000%d" % i,
            "device": "nvidia0",
            "modelName": "NVIDIA H100 80GB HBM3",
            "Hostname": "gpu-node-%d" % (i // 2),
        }

    def ksm_labels(p):
        return {
            "job": "kube-state-metrics",
            "namespace": NAMESPACE,
            "pod": p,
            "container": "vllm",
            "uid": f"uid-{p}",
        }

    out = []
    w = out.append

    # -- simple gauges ----------------------------------------------------------------------
    gauges = [
        (
            "vllm:kv_cache_usage_perc",
            "GPU KV-cache usage. 1 means 100 percent usage.",
            st.kv_usage,
            vllm_labels,
            True,
        ),
        (
            "llm_kv_cache_fragmentation_ratio",
            "Fraction of allocated KV-cache blocks that are unusable fragments.",
            st.frag,
            vllm_labels,
            True,
        ),
        (
            "vllm:num_requests_waiting",
            "Number of requests waiting to be processed.",
            st.waiting,
            vllm_labels,
            True,
        ),
        (
            "vllm:num_requests_running",
            "Number of requests currently running on GPU.",
            st.running,
            vllm_labels,
            True,
        ),
    ]
    for name, help_, fn, lab, needs_up in gauges:
        w(f"# TYPE {name} gauge")
        w(f"# HELP {name} {help_}")
        for p in pods:
            r = rng_for(args.seed, name, p)
            ls = fmt_labels(lab(p))
            for t, m in zip(times, minutes, strict=True):
                v = fn(p, m, r)
                if needs_up and not st.vllm_up(p, m):
                    continue  # target down: no samples (staleness in a live Prometheus)
                w(f"{name}{ls} {fmt_val(v)} {fmt_ts(t)}")

    # -- DCGM framebuffer (MiB) ---------------------------------------------------------------
    mem = {}
    for p in pods:
        r = rng_for(args.seed, "fb", p)
        mem[p] = [st.mem_frac(p, m, r) for m in minutes]
    for name, help_, sel in (
        ("DCGM_FI_DEV_FB_USED", "Framebuffer memory used (in MiB).", lambda f: f * FB_USABLE_MIB),
        (
            "DCGM_FI_DEV_FB_FREE",
            "Framebuffer memory free (in MiB).",
            lambda f: FB_USABLE_MIB - f * FB_USABLE_MIB,
        ),
    ):
        w(f"# TYPE {name} gauge")
        w(f"# HELP {name} {help_}")
        for i, p in enumerate(pods):
            ls = fmt_labels(dcgm_labels(p, i))
            for t, f in zip(times, mem[p], strict=True):
                w(f"{name}{ls} {fmt_val(float(round(max(0.0, sel(f)))))} {fmt_ts(t)}")

    # -- counter: preemptions (resets to 0 when pod-2's vLLM restarts) -------------------------
    fam = "vllm:num_preemptions"
    w(f"# TYPE {fam} counter")
    w(f"# HELP {fam} Cumulative number of preemption from the engine.")
    for p in pods:
        r = rng_for(args.seed, fam, p)
        ls = fmt_labels(vllm_labels(p))
        c = 0
        for t, m in zip(times, minutes, strict=True):
            if not st.vllm_up(p, m):
                c = 0
                continue
            c += st.preemptions_inc(p, m, r)
            w("%s_total%s %d %s" % (fam, ls, c, fmt_ts(t)))

    # -- histogram: time to first token -------------------------------------------------------
    fam = "vllm:time_to_first_token_seconds"
    w(f"# TYPE {fam} histogram")
    w(f"# HELP {fam} Histogram of time to first token in seconds.")
    for p in pods:
        r = rng_for(args.seed, fam, p)
        lab = vllm_labels(p)
        cum = [0] * (len(TTFT_BUCKETS) + 1)
        total_sum = 0.0
        for t, m in zip(times, minutes, strict=True):
            if not st.vllm_up(p, m):
                cum = [0] * (len(TTFT_BUCKETS) + 1)
                total_sum = 0.0
                continue
            n = int(round(st.req_rate(p, m) * step + r.uniform(-3, 3))) if st.req_rate(p, m) > 0 else 0
            med = st.ttft_median(p, m)
            for _ in range(max(0, n)):
                x = med * math.exp(r.gauss(0.0, 0.55))
                total_sum += x
                for bi, ub in enumerate(TTFT_BUCKETS):
                    if x <= ub:
                        cum[bi] += 1
                cum[-1] += 1
            ts = fmt_ts(t)
            for bi, ub in enumerate(TTFT_BUCKETS):
                w("%s_bucket%s %d %s" % (fam, fmt_labels(dict(lab, le=str(ub))), cum[bi], ts))
            w("%s_bucket%s %d %s" % (fam, fmt_labels(dict(lab, le="+Inf")), cum[-1], ts))
            w("%s_count%s %d %s" % (fam, fmt_labels(lab), cum[-1], ts))
            w(f"{fam}_sum{fmt_labels(lab)} {fmt_val(total_sum)} {ts}")

    # -- kube-state-metrics ------------------------------------------------------------------
    fam = "kube_pod_container_status_restarts"
    w(f"# TYPE {fam} counter")
    w(f"# HELP {fam} The number of container restarts per container.")
    for p in pods:
        ls = fmt_labels(ksm_labels(p))
        for t, m in zip(times, minutes, strict=True):
            v = 1 if (p == bad and m >= EV["oom_restart"]) else 0
            w("%s_total%s %d %s" % (fam, ls, v, fmt_ts(t)))
    fam = "kube_pod_container_status_last_terminated_reason"
    w(f"# TYPE {fam} gauge")
    w(f"# HELP {fam} Describes the last reason the container was in terminated state.")
    ls = fmt_labels(dict(ksm_labels(bad), reason="OOMKilled"))
    for t, m in zip(times, minutes, strict=True):
        if m >= EV["oom_restart"]:
            w(f"{fam}{ls} 1 {fmt_ts(t)}")

    w("# EOF")
    story = {
        "start": t0,
        "end": times[-1],
        "step_s": step,
        "pods": pods,
        "bad_pod": bad,
        "start_iso": datetime.fromtimestamp(t0, UTC).isoformat(),
        "events_min": EV,
        "events_unix": {k: t0 + v * 60 for k, v in EV.items()},
        "samples": sum(1 for line in out if not line.startswith("#")),
    }
    return out, story


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default="-", help="output file ('-' = stdout)")
    ap.add_argument("--story-json", help="write start/end/event timestamps here (for checkers)")
    ap.add_argument(
        "--start",
        default="auto",
        help="unix seconds, ISO-8601 (e.g. 2024-01-01T00:00:00Z) or 'auto' (= now - duration - 15m)",
    )
    ap.add_argument("--duration", type=float, default=7200, help="seconds (default 2h)")
    ap.add_argument("--step", type=float, default=15, help="seconds between samples (default 15)")
    ap.add_argument("--pods", type=int, default=4)
    ap.add_argument("--bad-pod", type=int, default=2, help="index of the pod that fragments and OOMs")
    ap.add_argument("--pod-prefix", default="pod-")
    ap.add_argument("--seed", type=int, default=42)
    args = ap.parse_args(argv)
    if args.start == "auto":
        args.start = float(int((time.time() - args.duration - 900) // args.step) * args.step)
    else:
        try:
            args.start = float(args.start)
        except ValueError:
            args.start = datetime.fromisoformat(args.start.replace("Z", "+00:00")).timestamp()
    lines, story = generate(args)
    text = "\n".join(lines) + "\n"
    if args.out == "-":
        sys.stdout.write(text)
    else:
        with open(args.out, "w") as fh:
            fh.write(text)
    if args.story_json:
        with open(args.story_json, "w") as fh:
            json.dump(story, fh, indent=2)
    print(
        "generated %d samples, %d bytes, start=%s" % (story["samples"], len(text), story["start_iso"]),
        file=sys.stderr,
    )


if __name__ == "__main__":
    main()
