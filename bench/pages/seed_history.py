#!/usr/bin/env python3
"""A year of a fleet's incidents in PostgreSQL, to time the pages against (`page_p95.py`).

    .venv/bin/python bench/pages/seed_history.py [--database rootline_bench_pages]
        [--incidents 100000] [--alerts 1000000] [--open 300] [--storms 0] [--chain-max 0] [--seed 7]

Drops and creates the database, migrates it, then writes the rows with set-based SQL (INSERT ...
SELECT over generate_series), not the ORM: 20 clusters serving 40 models (200 deployments), one
incident every ~5 minutes for a year, each a cascade the engine would have ranked (GPU Xid ->
crash loop -> target down -> 5xx; KV pressure -> preemption -> queueing -> TTFT; a stuck rollout
-> NaN logits -> errors; ...). Most incidents hold 3-15 alerts; storms of 1,000-5,000 alerts over
dozens of pods take what is left of `--alerts` (`--storms 0`: as many as that needs). All but
`--open` incidents are resolved; those are mostly from the last week, and the latest storm is
among them. Each incident gets what correlation writes (title, scope, layers, failure modes,
root, edges, 1-3 root candidates, and a chain of every member alert, cause before effect, as
`correlate/ranking.py` writes it; `--chain-max N` keeps its first N) and what people did
(acknowledge, assign, note, mitigate, resolve). Then `VACUUM ANALYZE`, as autovacuum would have
done by then (this machine's PostgreSQL runs without autovacuum).
"""

from __future__ import annotations

import argparse
import os
import random
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import psycopg

ROOT = Path(__file__).resolve().parents[2]
SERVER = "postgres://postgres@127.0.0.1:5432"
SPAN_DAYS = 365
RECENT_DAYS = 7  # most open incidents started this recently; the rest were left open long ago
USERS = ("ana", "bo", "chen", "dara", "eli", "femi", "gus", "hana", "ivo", "jun", "kai", "lea")

CLUSTERS = [
    f"{env}-{region}-{n}"
    for env, region, n in [
        ("prod", "us-east", 1), ("prod", "us-east", 2), ("prod", "us-east", 3), ("prod", "us-west", 1),
        ("prod", "us-west", 2), ("prod", "us-central", 1), ("prod", "eu-west", 1), ("prod", "eu-west", 2),
        ("prod", "eu-central", 1), ("prod", "eu-north", 1), ("prod", "ap-northeast", 1),
        ("prod", "ap-northeast", 2), ("prod", "ap-southeast", 1), ("prod", "ap-south", 1),
        ("prod", "sa-east", 1), ("staging", "us-east", 1), ("staging", "eu-west", 1),
        ("canary", "us-east", 1), ("batch", "us-central", 1), ("research", "us-west", 1),
    ]
]  # fmt: skip
MODELS = [
    f"{family}-{size}"
    for family, sizes in [
        ("llama-3.1", ("8b-instruct", "70b-instruct", "405b-instruct-fp8")),
        ("llama-3.2", ("1b-instruct", "3b-instruct", "11b-vision")),
        ("llama-3.3", ("70b-instruct",)),
        ("qwen2.5", ("7b-instruct", "14b-instruct", "32b-instruct", "72b-instruct", "coder-32b")),
        ("mistral", ("7b-instruct-v0.3", "nemo-12b", "small-24b", "large-123b")),
        ("mixtral", ("8x7b-instruct", "8x22b-instruct")),
        ("gemma-2", ("2b-it", "9b-it", "27b-it")),
        ("deepseek", ("v3", "r1", "r1-distill-llama-70b", "coder-v2-lite")),
        ("phi-3", ("mini-128k", "medium-128k")),
        ("phi-4", ("14b",)),
        ("granite-3.1", ("8b-instruct", "2b-instruct")),
        ("command-r", ("35b", "plus-104b")),
        ("yi-1.5", ("34b-chat",)),
        ("starcoder2", ("15b",)),
        ("bge", ("m3-embed",)),
        ("e5", ("mistral-7b-embed",)),
        ("nemotron", ("70b-instruct", "mini-4b")),
    ]
    for size in sizes
]
MODELS_PER_CLUSTER = 10
# (container, the word in its alerts' names), vLLM three times: most of a fleet runs it.
ENGINES = (("vllm", "Vllm"), ("vllm", "Vllm"), ("vllm", "Vllm"), ("sglang", "Sglang"), ("trtllm", "Trtllm"))

# Cascades, cause before effect: (alertname, layer, failure mode). `{E}` is the deployment's engine.
SCENARIOS = [
    [("LLMGpuXidError", "hardware", "gpu_error"), ("LLMPodCrashLooping", "platform", "restart"),
     ("LLM{E}TargetDown", "platform", "target_down"), ("LLMGatewayUpstream5xxHigh", "serving", "error_rate")],
    [("LLM{E}KVCacheUsageCritical", "engine", "oom"), ("LLM{E}Preemptions", "engine", "preemption"),
     ("LLM{E}QueueWaitHigh", "engine", "queueing"), ("LLM{E}TTFTHigh", "serving", "slo_ttft"),
     ("LLMEppTTFTHigh", "serving", "slo_ttft")],
    [("LLMContainerOOMKilled", "platform", "oom"), ("LLMPodCrashLooping", "platform", "restart"),
     ("LLMGatewayUpstream5xxHigh", "serving", "error_rate")],
    [("LLMKVFragmentationHigh", "engine", "kv_fragmentation"), ("LLM{E}KVCacheUsageHigh", "engine", "oom"),
     ("LLM{E}ITLJitterHigh", "serving", "slo_itl"), ("LLM{E}TPOTHigh", "serving", "slo_tpot")],
    [("KubeDeploymentRolloutStuck", "process", "change"), ("LLM{E}NaNLogitsDetected", "engine", "numeric"),
     ("LLMEppErrorRateHigh", "serving", "error_rate")],
    [("KubeNodeNotReady", "platform", "node_not_ready"), ("LLMGatewayTargetDown", "platform", "target_down"),
     ("LLMGatewayUpstreamTimeouts", "serving", "timeout")],
    [("LLM{E}HotReplica", "serving", "hot_instance"), ("LLMEppQueueImbalance", "serving", "hot_instance"),
     ("LLM{E}TTFTHigh", "serving", "slo_ttft")],
    [("LLMGatewayUpstreamTimeouts", "serving", "timeout"),
     ("LLMGatewayClientDisconnects", "serving", "timeout"),
     ("LLMEppErrorRateHigh", "serving", "error_rate")],
    [("LLM{E}SpecDecodeAcceptanceLow", "engine", "spec_decode"), ("LLM{E}TPOTHigh", "serving", "slo_tpot")],
    [("LLMDcgmExporterDown", "platform", "target_down"),
     ("LLMKubernetesMetricsTargetDown", "platform", "target_down")],
    [("ModelLatencyAnomaly", "unknown", "other"), ("LLM{E}TTFTHigh", "serving", "slo_ttft")],
]  # fmt: skip
STORM_SCENARIOS = (0, 1, 5)  # a storm is a node pool's or a model's trouble reaching every replica


def shape(args: argparse.Namespace) -> list[tuple[int, int, str, bool]]:
    """(incident id, alert count, status, storm) per incident, ids in order of start.

    Decided here rather than in SQL because the counts must sum to exactly `--alerts`: ordinary
    incidents first, the storms share what is left."""
    rng = random.Random(args.seed)
    n = args.incidents
    ordinary = [3 + int(12.99 * rng.random() ** 1.6) for _ in range(n)]
    storms = args.storms or storm_count(args.alerts - sum(ordinary), n)
    storm_ids = {round((k + 0.5) * n / storms) for k in range(storms)} if storms else set()
    left = args.alerts - sum(size for i, size in enumerate(ordinary, 1) if i not in storm_ids)
    if storms and not 1000 * storms <= left <= 5000 * storms:
        raise SystemExit(f"{left} alerts left for {storms} storms: not 1,000-5,000 each")
    storm_alerts = storm_sizes(left, storms, rng)
    sizes = dict(enumerate(ordinary, 1)) | dict(zip(sorted(storm_ids), storm_alerts, strict=True))
    statuses = open_statuses(n, args.open, max(storm_ids, default=0), rng)
    return [(i, sizes[i], statuses.get(i, "resolved"), i in storm_ids) for i in range(1, n + 1)]


def storm_count(left: int, incidents: int) -> int:
    return max(1, min(incidents // 100, round(left / 3000)))


def storm_sizes(total: int, storms: int, rng: random.Random) -> list[int]:
    """`storms` sizes of 1,000-5,000 that sum to `total`."""
    sizes = [1000] * storms
    spare = total - 1000 * storms
    while spare > 0:
        k = rng.randrange(storms)
        grow = min(spare, 5000 - sizes[k], rng.randint(1, 500))
        sizes[k] += grow
        spare -= grow
    return sizes


def open_statuses(n: int, wanted: int, latest_storm: int, rng: random.Random) -> dict[int, str]:
    """Incidents not resolved yet: most from the last week, a fifth forgotten months ago, the
    latest storm among them (a queue with a storm in it is the one the on-call reads)."""
    recent_from = max(1, n - n * RECENT_DAYS // SPAN_DAYS)
    recent = rng.sample(range(recent_from, n + 1), min(wanted * 4 // 5, n - recent_from + 1))
    older = rng.sample(range(1, recent_from), min(wanted - len(recent), recent_from - 1))
    chosen = set(recent) | set(older)
    if latest_storm and wanted and latest_storm not in chosen:
        chosen.discard(max(chosen))
        chosen.add(latest_storm)
    return {i: rng.choices(("open", "acknowledged", "mitigated"), (50, 35, 15))[0] for i in chosen}


VOCABULARY_SQL = """
CREATE TEMP TABLE place AS
SELECT c.ordinality::int - 1 AS cluster_no, j AS slot, (c.ordinality::int - 1) * %(per)s + j AS place_id,
       c.name AS cluster, m.name AS model, e.engine, e.word AS engine_word,
       e.engine || '-' || m.name AS deployment,
       CASE WHEN m.name LIKE '%%embed%%' THEN 'embeddings' WHEN c.name LIKE 'research%%' THEN 'research'
            ELSE 'llm-serving' END AS namespace
FROM unnest(%(clusters)s::text[]) WITH ORDINALITY c(name, ordinality)
CROSS JOIN generate_series(0, %(per)s - 1) j
JOIN LATERAL (SELECT (%(models)s::text[])[1 + ((c.ordinality::int - 1) * 7 + j) %% %(model_count)s] AS name) m
  ON true
JOIN LATERAL (SELECT (%(engines)s::text[])[1 + ((c.ordinality::int + j) %% %(engine_count)s)] AS engine,
                     (%(words)s::text[])[1 + ((c.ordinality::int + j) %% %(engine_count)s)] AS word) e
  ON true
"""

PLAN_SQL = """
CREATE TEMP TABLE plan AS
SELECT s.*, least(sc.steps, s.size) AS steps_used, p.cluster, p.model, p.engine, p.engine_word,
       p.deployment, p.namespace,
       CASE WHEN s.status = 'resolved' THEN s.ack_roll < 0.7 ELSE s.status <> 'open' END AS acknowledged,
       CASE WHEN s.status = 'resolved' THEN s.mitigate_roll < 0.2 ELSE s.status = 'mitigated' END AS mitigated
FROM (
    SELECT sh.id, sh.size, sh.status, sh.storm,
           sum(sh.size) OVER (ORDER BY sh.id) - sh.size + 1 AS first_alert,
           now() - %(span)s::interval + (sh.id - 1 + random()) * (%(span)s::interval / %(n)s) AS base,
           floor(random() * %(places)s)::int AS place_id,
           CASE WHEN sh.storm THEN (%(storm_scenarios)s::int[])[1 + floor(random() * %(storm_count)s)::int]
                ELSE floor(random() * %(scenarios)s)::int END AS scenario,
           CASE WHEN random() < 0.15 THEN 'critical' WHEN random() < 0.765 THEN 'warning' ELSE 'info' END
               AS severity,
           CASE WHEN sh.storm THEN 24 + floor(random() * 104)::int
                WHEN random() < 0.4 THEN 1 ELSE 2 + floor(random() * 7)::int END AS pods,
           floor(random() * 1000)::int AS pod_base,
           CASE WHEN sh.storm THEN 5400.0 / sh.size ELSE 20 + random() * 100 END AS spacing,
           random() AS ack_roll, random() AS mitigate_roll, 60 + random() * 1200 AS ack_after,
           random() < 0.25 AND sh.status = 'resolved' AS resolved_by_human,
           CASE WHEN random() < 0.4 THEN 1 + floor(random() * %(users)s)::int END AS assignee_no,
           random() < 0.02 AS severity_by_human,
           0.45 + random() * 0.54 AS confidence
    FROM shape sh
) s
JOIN (SELECT scenario, count(*)::int AS steps FROM step GROUP BY scenario) sc USING (scenario)
JOIN place p USING (place_id)
"""

# One row per alert: which incident, which place, which step of its cascade.
MEMBERS_SQL = """
CREATE TEMP TABLE member AS
SELECT p.first_alert + k AS id, p.id AS incident_id, k, (k * p.steps_used / p.size) AS step_no,
       p.deployment || '-' || substr(md5(p.deployment), 1, 10) || '-'
           || substr(md5(p.deployment || (p.pod_base + k %% p.pods)), 1, 5) AS pod,
       'gpu-node-' || p.cluster || '-' || lpad(((p.pod_base + k %% p.pods) %% 300)::text, 3, '0') AS node,
       p.base + make_interval(
           secs => k * p.spacing + CASE WHEN k > 0 THEN random() * p.spacing * 1.5 ELSE 0 END) AS starts_at,
       CASE WHEN p.status = 'resolved' OR random() < 0.2 THEN 300 + random() * 3300 END AS lasted
FROM plan p CROSS JOIN LATERAL generate_series(0, p.size - 1) k
"""

ALERTS_SQL = """
INSERT INTO incidents_alert (
    id, fingerprint, starts_at, ends_at, status, kind, alertname, labels, annotations, generator_url,
    received_at, layer, failure_mode, false_positive, first_delivery_id, integration_id, classified_by,
    correlated, correlation_key, onset, incident_id)
SELECT m.id, substr(md5(n.alertname || m.pod || p.cluster), 1, 16), m.starts_at,
       m.starts_at + make_interval(secs => m.lasted),
       CASE WHEN m.lasted IS NULL THEN 'firing' ELSE 'resolved' END, 'alert', n.alertname,
       jsonb_build_object(
           'alertname', n.alertname, 'cluster', p.cluster, 'namespace', p.namespace, 'pod', m.pod,
           'container', p.engine, 'model_name', p.model, 'node', m.node, 'job', p.engine || '-metrics',
           'instance', '10.' || (m.id %% 250) || '.' || (m.id / 250 %% 250) || '.7:8000',
           'severity', p.severity, 'layer', s.layer, 'failure_mode', s.failure_mode,
           'prometheus', 'monitoring/k8s', 'team', 'inference'),
       jsonb_build_object(
           'summary', n.alertname || ' on ' || m.pod,
           'description', s.failure_mode || ' on ' || p.model || ' (' || p.cluster || '), pod ' || m.pod
               || ' on ' || m.node || '.',
           'runbook_url', 'https://runbooks.example.internal/llm/' || lower(n.alertname)),
       'http://prometheus.' || p.cluster || '.internal:9090/graph?g0.expr=' || n.alertname || '&g0.tab=1',
       m.starts_at + make_interval(secs => 1 + m.id %% 29), s.layer, s.failure_mode, m.id %% 997 = 0,
       p.id, 1, 'labels', true, p.cluster, m.starts_at - make_interval(secs => m.id %% 120), p.id
FROM member m
JOIN plan p ON p.id = m.incident_id
JOIN step s ON s.scenario = p.scenario AND s.step = m.step_no
CROSS JOIN LATERAL (SELECT replace(s.alertname, '{E}', p.engine_word) AS alertname) n
"""

DELIVERIES_SQL = """
INSERT INTO incidents_delivery (
    id, integration_id, received_at, status, body, body_digest, size, headers, accepted, rejected,
    truncated_alerts, error, attempts, processed_at)
SELECT p.id, 1, p.base + interval '2 seconds', 'processed', ''::bytea, md5(p.id::text) || md5(p.id || 'b'),
       400 * least(p.size, 100), '{"Content-Type": "application/json", "User-Agent": "Alertmanager/0.27.0"}',
       least(p.size, 100), '[]', 0, '', 1, p.base + interval '2.2 seconds'
FROM plan p
"""

# What correlation writes per incident, from its members (times, layers, chain) and its plan.
INCIDENTS_SQL = """
INSERT INTO incidents_incident (
    id, title, status, severity, severity_by_human, correlation_key, started_at, last_alert_at,
    acknowledged_at, mitigated_at, resolved_at, resolved_by_human, reopened_by_human, assignee_id,
    degradation, scope, layers, failure_modes, root_alert_id, root_confidence, root_explanation, chain,
    chain_signature, ranking_held, merged_into_id, created_at, updated_at)
SELECT p.id, left(t.headline || ' on ' || p.deployment, 500), p.status, p.severity, p.severity_by_human,
       p.cluster, a.started_at, a.last_alert_at,
       CASE WHEN p.acknowledged THEN a.started_at + make_interval(secs => p.ack_after) END,
       CASE WHEN p.mitigated THEN a.started_at + make_interval(secs => p.ack_after * 3) END,
       CASE WHEN p.status = 'resolved' THEN greatest(a.ended_at, a.last_alert_at) + interval '1 minute' END,
       p.resolved_by_human, false, u.id,
       CASE WHEN p.storm AND p.status <> 'resolved' THEN 'L2' WHEN p.id %% 97 = 0 THEN 'L1' ELSE 'none' END,
       jsonb_build_object('cluster', p.cluster, 'namespace', p.namespace, 'deployment', p.deployment,
                          'model', p.model)
           || CASE WHEN p.pods = 1 THEN jsonb_build_object('pod', a.pod, 'node', a.node) ELSE '{}' END,
       a.layers, a.failure_modes, p.first_alert, round(p.confidence::numeric, 4),
       t.label || ' (' || t.root_name || ') on ' || p.deployment
           || ' from ' || to_char(a.started_at, 'HH24:MI:SS')
           || ' explains ' || (p.size - 1) || ' of the incident''s ' || p.size || ' alerts'
           || CASE WHEN t.second_name IS NOT NULL THEN ', through ' || t.second_name ELSE '' END || '.',
       a.chain, t.signature, false, NULL, a.started_at + interval '3 seconds',
       coalesce(greatest(a.ended_at, a.last_alert_at) + interval '1 minute', a.last_alert_at)
FROM plan p
JOIN (
    SELECT al.incident_id, min(al.starts_at) AS started_at, max(al.starts_at) AS last_alert_at,
           max(al.ends_at) AS ended_at, jsonb_agg(DISTINCT al.layer ORDER BY al.layer) AS layers,
           jsonb_agg(DISTINCT al.failure_mode ORDER BY al.failure_mode) AS failure_modes,
           jsonb_agg(al.id ORDER BY al.id) FILTER (WHERE al.id < pl.first_alert + %(chain_max)s) AS chain,
           min(al.labels ->> 'pod') AS pod, min(al.labels ->> 'node') AS node
    FROM incidents_alert al JOIN plan pl ON pl.id = al.incident_id GROUP BY al.incident_id
) a ON a.incident_id = p.id
CROSS JOIN LATERAL (
    SELECT string_agg(replace(s.alertname, '{E}', p.engine_word), ' → ' ORDER BY s.step)
               FILTER (WHERE s.step < 3)
               || CASE WHEN p.steps_used > 3 THEN ' → … (' || (p.steps_used - 3) || ' more)' ELSE '' END
               AS headline,
           replace(min(s.failure_mode) FILTER (WHERE s.step = 0), '_', ' ') AS label,
           replace(min(s.alertname) FILTER (WHERE s.step = 0), '{E}', p.engine_word) AS root_name,
           replace(min(s.alertname) FILTER (WHERE s.step = 1), '{E}', p.engine_word) AS second_name,
           -- incidents/signatures.py: the chain's (layer, failure_mode) pairs in causal order
           string_agg(s.layer || ':' || s.failure_mode, '>' ORDER BY s.step) AS signature
    FROM step s WHERE s.scenario = p.scenario AND s.step < p.steps_used
) t
LEFT JOIN auth_user u ON u.username = (%(users)s::text[])[p.assignee_no]
"""

# The engine's tree: each alert's cause is the first alert of the step before its own (the root's
# step: the root itself), so an incident of n alerts has n - 1 edges.
EDGES_SQL = """
INSERT INTO incidents_incidentedge (incident_id, cause_id, effect_id, rule, lag_seconds, relation)
SELECT m.incident_id, c.id, m.id, cs.failure_mode || '->' || es.failure_mode,
       round(extract(epoch FROM m.starts_at - c.starts_at)::numeric, 3),
       CASE WHEN c.pod = m.pod THEN 'same_pod' WHEN c.node = m.node THEN 'same_node' ELSE 'sibling' END
FROM member m
JOIN plan p ON p.id = m.incident_id
JOIN member c ON c.id = p.first_alert
    + ceil(greatest(m.step_no - 1, 0) * p.size::numeric / p.steps_used)::int
JOIN step cs ON cs.scenario = p.scenario AND cs.step = c.step_no
JOIN step es ON es.scenario = p.scenario AND es.step = m.step_no
WHERE m.k > 0
"""

CANDIDATES_SQL = """
INSERT INTO incidents_rootcandidate (incident_id, alert_id, rank, confidence, explanation)
SELECT i.id, p.first_alert + ceil(r * p.size::numeric / p.steps_used)::int, r,
       round((i.root_confidence * power(0.45, r))::numeric, 4),
       CASE WHEN r = 0 THEN i.root_explanation
            ELSE 'An effect of the root: explains ' || (p.size / (r + 2)) || ' alerts, fewer than the root.'
       END
FROM incidents_incident i
JOIN plan p ON p.id = i.id
CROSS JOIN LATERAL generate_series(0, least(p.steps_used, 2 + (i.id %% 2)) - 1) r
"""

ACTIONS_SQL = """
INSERT INTO incidents_incidentaction (incident_id, action, by_id, at, body, alert_id, recorded_at)
SELECT i.id, a.action, a.by_id, a.at, a.body, NULL, a.at
FROM incidents_incident i
JOIN plan p ON p.id = i.id
JOIN auth_user responder ON responder.username = (%(users)s::text[])[1 + i.id %% %(user_count)s]
CROSS JOIN LATERAL (VALUES
    ('acknowledge', responder.id, i.acknowledged_at, '{}'::jsonb),
    ('assign', responder.id, i.acknowledged_at + interval '30 seconds',
        jsonb_build_object('username', (SELECT username FROM auth_user WHERE id = i.assignee_id))),
    ('note', responder.id, i.started_at + make_interval(secs => 600 + p.ack_after),
        jsonb_build_object('text', 'Looking at ' || (i.scope ->> 'deployment')
            || ': drained the worst pod, watching TTFT. Runbook step 3 applies.')),
    ('severity', responder.id, i.started_at + make_interval(secs => 90 + p.ack_after),
        jsonb_build_object('level', i.severity)),
    ('mitigate', responder.id, i.mitigated_at, '{}'::jsonb),
    ('resolve', responder.id, i.resolved_at, '{}'::jsonb)
) a(action, by_id, at, body)
WHERE CASE a.action
    WHEN 'assign' THEN i.assignee_id IS NOT NULL AND i.acknowledged_at IS NOT NULL
    WHEN 'note' THEN i.id %% 5 < 2
    WHEN 'severity' THEN i.severity_by_human
    WHEN 'resolve' THEN i.resolved_by_human
    ELSE a.at IS NOT NULL
END
"""

SEQUENCE_SQL = (
    "SELECT setval(pg_get_serial_sequence(%s, 'id'), (SELECT coalesce(max(id), 0) + 1 FROM {}), false)"
)
SEQUENCE_TABLES = (
    "incidents_alert",
    "incidents_incident",
    "incidents_delivery",
    "incidents_integration",
    "incidents_incidentedge",
    "incidents_rootcandidate",
    "incidents_incidentaction",
)


def psql_admin(sql: str) -> None:
    with psycopg.connect(f"{SERVER}/postgres", autocommit=True) as conn:
        conn.execute(sql)


def recreate(database: str) -> None:
    psql_admin(f'DROP DATABASE IF EXISTS "{database}" WITH (FORCE)')
    psql_admin(f'CREATE DATABASE "{database}"')


def migrate(database: str) -> None:
    env = {**os.environ, "DATABASE_URL": f"{SERVER}/{database}"}
    subprocess.run(
        [sys.executable, "manage.py", "migrate", "--noinput", "-v0"], cwd=ROOT, env=env, check=True
    )


@contextmanager
def timed(label: str) -> Iterator[None]:
    began = time.monotonic()
    yield
    print(f"  {label:<28} {time.monotonic() - began:6.1f} s", flush=True)


def vocabulary(conn: psycopg.Connection) -> None:
    engines, words = zip(*ENGINES, strict=True)
    conn.execute(
        VOCABULARY_SQL,
        {
            "clusters": CLUSTERS,
            "models": MODELS,
            "model_count": len(MODELS),
            "per": MODELS_PER_CLUSTER,
            "engines": list(engines),
            "words": list(words),
            "engine_count": len(ENGINES),
        },
    )
    conn.execute(
        "CREATE TEMP TABLE step (scenario int, step int, alertname text, layer text, failure_mode text)"
    )
    with conn.cursor().copy("COPY step FROM STDIN") as copy:
        for number, steps in enumerate(SCENARIOS):
            for position, (alertname, layer, mode) in enumerate(steps):
                copy.write_row((number, position, alertname, layer, mode))


def people(conn: psycopg.Connection) -> None:
    """Responders to act and be assigned, and the one integration every alert came through."""
    conn.execute(
        "INSERT INTO auth_user (password, is_superuser, username, first_name, last_name, email, is_staff, "
        "is_active, date_joined) SELECT '!', false, u, '', '', u || '@example.internal', false, true, "
        "now() - interval '400 days' FROM unnest(%s::text[]) u",
        [list(USERS)],
    )
    conn.execute(
        "INSERT INTO incidents_integration (id, kind, name, token_digest, rate_limit, is_active, created_at) "
        "VALUES (1, 'alertmanager', 'fleet-alertmanager', md5('bench') || md5('pages'), NULL, true, "
        "now() - interval '400 days')"
    )


def plan(conn: psycopg.Connection, args: argparse.Namespace) -> None:
    conn.execute("CREATE TEMP TABLE shape (id int, size int, status text, storm bool)")
    with conn.cursor().copy("COPY shape FROM STDIN") as copy:
        for row in shape(args):
            copy.write_row(row)
    conn.execute("SELECT setseed(%s)", [(args.seed % 1000) / 1000])
    conn.execute(
        PLAN_SQL,
        {
            "span": f"{SPAN_DAYS} days",
            "n": args.incidents,
            "places": len(CLUSTERS) * MODELS_PER_CLUSTER,
            "storm_scenarios": list(STORM_SCENARIOS),
            "storm_count": len(STORM_SCENARIOS),
            "scenarios": len(SCENARIOS),
            "users": len(USERS),
        },
    )
    conn.execute("CREATE INDEX ON plan (id)")
    conn.execute("ANALYZE plan")


def fill(conn: psycopg.Connection, args: argparse.Namespace) -> None:
    # Session settings only: the rows are the same, they are just written with fewer waits.
    conn.execute("SET synchronous_commit = off")
    conn.execute("SET work_mem = '256MB'")
    conn.execute("SET maintenance_work_mem = '1GB'")
    users = {"users": list(USERS), "user_count": len(USERS)}
    with timed("vocabulary, people, plan"):
        vocabulary(conn)
        people(conn)
        plan(conn, args)
    chain = {"chain_max": args.chain_max or 2**31 - 1}
    steps = [
        ("members", [MEMBERS_SQL, "CREATE INDEX ON member (id)", "ANALYZE member"], {}),
        ("alerts", [ALERTS_SQL], {}),
        ("deliveries", [DELIVERIES_SQL], {}),
        ("incidents", [INCIDENTS_SQL], users | chain),
        ("edges", [EDGES_SQL], {}),
        ("root candidates", [CANDIDATES_SQL], {}),
        ("actions", [ACTIONS_SQL], users),
    ]
    for label, statements, params in steps:
        with timed(label):
            for sql in statements:
                conn.execute(sql, params)
    for table in SEQUENCE_TABLES:
        conn.execute(SEQUENCE_SQL.format(table), [table])


COUNTS = {
    "incidents": "SELECT count(*) FROM incidents_incident",
    "not resolved": "SELECT count(*) FROM incidents_incident WHERE status <> 'resolved'",
    "alerts": "SELECT count(*) FROM incidents_alert",
    "edges": "SELECT count(*) FROM incidents_incidentedge",
    "root candidates": "SELECT count(*) FROM incidents_rootcandidate",
    "actions": "SELECT count(*) FROM incidents_incidentaction",
    "longest chain": "SELECT max(jsonb_array_length(chain)) FROM incidents_incident",
}


def scalar(conn: psycopg.Connection, sql: str):
    row = conn.execute(sql).fetchone()
    return row[0] if row else None


def counts(conn: psycopg.Connection) -> str:
    size = scalar(conn, "SELECT pg_size_pretty(pg_database_size(current_database()))")
    return ", ".join(f"{scalar(conn, sql):,} {name}" for name, sql in COUNTS.items()) + f", {size}"


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--database", default="rootline_bench_pages")
    parser.add_argument("--incidents", type=int, default=100_000)
    parser.add_argument("--alerts", type=int, default=1_000_000)
    parser.add_argument("--open", type=int, default=300, help="incidents not resolved")
    parser.add_argument("--storms", type=int, default=0, help="storm incidents; 0: as many as --alerts needs")
    parser.add_argument(
        "--chain-max",
        type=int,
        default=0,
        help="an incident's chain names at most this many of its alerts; 0: all, as the engine writes it",
    )
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args()
    began = time.monotonic()
    with timed("drop, create, migrate"):
        recreate(args.database)
        migrate(args.database)
    with psycopg.connect(f"{SERVER}/{args.database}") as conn:
        fill(conn, args)
        with timed("commit"):
            conn.commit()  # the deferred foreign-key checks run here
    with psycopg.connect(f"{SERVER}/{args.database}", autocommit=True) as conn:
        with timed("vacuum analyze"):
            conn.execute("VACUUM ANALYZE")
        print(f"{args.database}: {counts(conn)} ({time.monotonic() - began:.0f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
