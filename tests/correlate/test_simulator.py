"""The scenario simulator: determinism, seed variation, and files that parse as their real
counterparts do (Alertmanager v4 bodies, PagerDuty change events, OpenMetrics for promtool)."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from datetime import datetime, timedelta
from pathlib import Path

import pytest

from correlate import simulator
from correlate.events import event_fingerprint
from correlate.simulator.__main__ import main as cli_main
from correlate.simulator.core import am_fingerprint

START = "2026-03-14T00:00:00Z"
SEED = int(os.environ.get("SIMULATOR_SEED", "1"))
SCENARIOS = simulator.scenario_names()
RFC3339 = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d{1,9})?Z$")


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> dict[str, Path]:
    out = {}
    for name in SCENARIOS:
        d = tmp_path_factory.mktemp(name)
        simulator.simulate(name, START, SEED, str(d))
        out[name] = d
    return out


def _bodies(d: Path) -> list[dict]:
    return [json.loads(line) for line in (d / "alerts.jsonl").read_text().splitlines()]


def _jsonl(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line]


def _occurrences(d: Path) -> dict[tuple[str, str], dict]:
    occ = {}
    for body in _bodies(d):
        for a in body["alerts"]:
            occ.setdefault((a["fingerprint"], a["startsAt"]), a)
    return occ


def _parse(ts: str) -> datetime:
    return datetime.fromisoformat(ts.replace("Z", "+00:00"))


def test_list_names_every_scenario(capsys) -> None:
    assert cli_main(["--list"]) == 0
    listed = [line.split("\t")[0] for line in capsys.readouterr().out.splitlines()]
    assert listed == SCENARIOS
    assert {"march-oom", "fleet-day", "frag-oom", "gpu-xid-crash", "rollout-crashloop"} <= set(listed)


def test_cli_module_runs_as_a_script(tmp_path) -> None:
    repo = Path(__file__).resolve().parents[2]
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "correlate.simulator",
            "--scenario",
            "hot-instance",
            "--start",
            START,
            "--seed",
            "4",
            "--out",
            str(tmp_path),
        ],
        cwd=repo,
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 0, proc.stderr
    assert sorted(os.listdir(tmp_path)) == sorted(simulator.OUTPUT_FILES)


def test_output_does_not_depend_on_the_interpreter_hash_seed(tmp_path) -> None:
    repo = Path(__file__).resolve().parents[2]
    for hash_seed in ("0", "4242"):
        env = dict(os.environ, PYTHONHASHSEED=hash_seed)
        subprocess.run(
            [
                sys.executable,
                "-m",
                "correlate.simulator",
                "--scenario",
                "fleet-day",
                "--start",
                START,
                "--seed",
                "3",
                "--out",
                str(tmp_path / hash_seed),
            ],
            cwd=repo,
            env=env,
            check=True,
            capture_output=True,
        )
    for f in simulator.OUTPUT_FILES:
        assert (tmp_path / "0" / f).read_bytes() == (tmp_path / "4242" / f).read_bytes(), f


def test_cli_rejects_an_unreadable_start(tmp_path, capsys) -> None:
    with pytest.raises(SystemExit) as exc:
        cli_main(["--scenario", "frag-oom", "--start", "yesterday", "--out", str(tmp_path)])
    assert exc.value.code == 2


def test_management_command_only_delegates_to_the_simulator() -> None:
    import ast

    path = Path(__file__).resolve().parents[2] / "incidents" / "management" / "commands" / "simulate.py"
    tree = ast.parse(path.read_text())
    modules = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            modules.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            modules.add(node.module or "")
    assert modules <= {
        "__future__",
        "typing",
        "django.core.management",
        "django.core.management.base",
        "correlate",
    }
    assert any(isinstance(n, ast.ClassDef) and n.name == "Command" for n in tree.body)


def test_manage_py_simulate_lists_the_scenarios() -> None:
    repo = Path(__file__).resolve().parents[2]
    if not (repo / "manage.py").exists():
        pytest.skip("the Django project is not there yet")
    proc = subprocess.run(
        [sys.executable, "manage.py", "simulate", "--list"],
        cwd=repo,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert [line.split("\t")[0] for line in proc.stdout.splitlines()] == SCENARIOS


@pytest.mark.parametrize("name", ["fleet-day", "march-oom", "gpu-xid-crash"])
def test_same_seed_gives_identical_bytes(tmp_path, name) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    simulator.simulate(name, START, 7, str(a))
    simulator.simulate(name, START, 7, str(b))
    for f in simulator.OUTPUT_FILES:
        assert (a / f).read_bytes() == (b / f).read_bytes(), f


def test_another_seed_varies_names_and_times(tmp_path) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    simulator.simulate("fleet-day", START, 1, str(a))
    simulator.simulate("fleet-day", START, 2, str(b))
    occ_a, occ_b = _occurrences(a), _occurrences(b)

    def values(occ, key):
        return {o["labels"].get(key) for o in occ.values()} - {None}

    for key in ("cluster", "namespace", "pod", "model_name"):
        assert values(occ_a, key) != values(occ_b, key), key
    assert {k[1] for k in occ_a} != {k[1] for k in occ_b}
    assert not set(occ_a) & set(occ_b)


@pytest.mark.parametrize("name", SCENARIOS)
def test_alert_bodies_are_alertmanager_v4(runs, name) -> None:
    bodies = _bodies(runs[name])
    assert bodies
    for body in bodies:
        assert list(body) == [
            "receiver",
            "status",
            "alerts",
            "groupLabels",
            "commonLabels",
            "commonAnnotations",
            "externalURL",
            "version",
            "groupKey",
            "truncatedAlerts",
        ]
        assert body["version"] == "4" and body["truncatedAlerts"] == 0
        assert body["groupKey"].startswith("{}") and ":{" in body["groupKey"]
        statuses = {a["status"] for a in body["alerts"]}
        assert body["status"] == ("firing" if "firing" in statuses else "resolved")
        for a in body["alerts"]:
            assert a["fingerprint"] == am_fingerprint(a["labels"])
            assert RFC3339.match(a["startsAt"]) and RFC3339.match(a["endsAt"])
            assert all(isinstance(v, str) for v in a["labels"].values())
            if a["status"] == "firing":
                assert a["endsAt"] == "0001-01-01T00:00:00Z"
            else:
                assert _parse(a["endsAt"]) > _parse(a["startsAt"])
            assert "/graph?g0.expr=" in a["generatorURL"] and a["generatorURL"].endswith("&g0.tab=1")
            for k, v in body["commonLabels"].items():
                assert a["labels"][k] == v
            for k, v in body["groupLabels"].items():
                assert a["labels"][k] == v
            assert not any(re.search(r"inc-\d", v) for v in a["labels"].values())
    raw = (runs[name] / "alerts.jsonl").read_text()
    assert ">" not in raw and "<" not in raw  # Go's encoder escapes them


@pytest.mark.parametrize("name", SCENARIOS)
def test_truth_names_only_delivered_alerts_and_sent_changes(runs, name) -> None:
    d = runs[name]
    truth = json.loads((d / "truth.json").read_text())
    occ = _occurrences(d)
    changes = {
        (
            event_fingerprint(source=c["payload"]["source"], summary=c["payload"]["summary"]),
            c["payload"]["timestamp"],
        )
        for c in _jsonl(d / "changes.jsonl")
    }
    seen = []
    assert truth["incidents"]
    for inc in truth["incidents"]:
        keys = [(m["fingerprint"], m["starts_at"]) for m in inc["alerts"]]
        root = (inc["root"]["fingerprint"], inc["root"]["starts_at"])
        assert root in keys
        seen.extend(keys)
    seen.extend((m["fingerprint"], m["starts_at"]) for m in truth["noise"])
    assert len(seen) == len(set(seen)), "an occurrence belongs to one incident or to noise"
    for key in seen:
        assert key in occ or key in changes, key
    assert set(occ) <= set(seen), "every delivered occurrence is labelled"
    assert changes <= set(seen)


@pytest.mark.parametrize("name", SCENARIOS)
def test_change_events_are_pagerduty_change_events(runs, name) -> None:
    for c in _jsonl(runs[name] / "changes.jsonl"):
        assert set(c) == {"routing_key", "payload", "links"} and len(c["routing_key"]) == 32
        p = c["payload"]
        assert set(p) == {"summary", "timestamp", "source", "custom_details"}
        _parse(p["timestamp"])
        assert p["custom_details"]["change_type"] in {
            "rollout",
            "rollback",
            "config",
            "threshold_edit",
            "deploy",
        }
        assert all(isinstance(v, str) for v in p["custom_details"].values())
        assert {"cluster", "author"} <= set(p["custom_details"])
        for link in c["links"]:
            assert link["href"].startswith("https://")


@pytest.mark.parametrize("name", SCENARIOS)
def test_actions_name_firing_delivered_occurrences(runs, name) -> None:
    d = runs[name]
    occ = _occurrences(d)
    known = {
        "acknowledge",
        "assign",
        "note",
        "severity",
        "resolve",
        "reopen",
        "mitigate",
        "merge",
        "split",
        "exclude_alert",
        "false_positive",
        "degrade",
    }
    actions = _jsonl(d / "actions.jsonl")
    assert actions
    ends = {
        (x["fingerprint"], x["startsAt"]): _parse(x["endsAt"])
        for b in _bodies(d)
        for x in b["alerts"]
        if x["status"] == "resolved"
    }
    last = None
    for a in actions:
        assert a["action"] in known and a["by"]
        assert RFC3339.match(a["at"])
        at = _parse(a["at"])
        assert last is None or at >= last
        last = at
        key = (a["fingerprint"], a["starts_at"])
        assert key in occ
        assert at >= _parse(a["starts_at"])
        if a["action"] not in {"resolve", "mitigate", "note"}:
            assert at < ends.get(key, at + timedelta(seconds=1)), (a, "names an occurrence firing at `at`")
        if a["action"] == "merge":
            assert (a["into_fingerprint"], a["into_starts_at"]) in occ
        if a["action"] == "split":
            assert all(k in occ for k in zip(a["fingerprints"], a["starts_ats"], strict=True))
        if a["action"] == "degrade":
            assert a["level"] in {"L1", "L2", "L3", "none"}


@pytest.mark.parametrize("name", SCENARIOS)
def test_metrics_are_openmetrics_in_seconds(runs, name) -> None:
    text = (runs[name] / "metrics.om").read_text()
    assert text.endswith("# EOF\n")
    # march-oom samples every 15 s; with the request outcomes of its deployment it is about 9 MB
    assert len(text) < 10_000_000 or name == "fleet-day"
    truth = json.loads((runs[name] / "truth.json").read_text())
    first = min(_parse(m["starts_at"]) for i in truth["incidents"] for m in i["alerts"]).timestamp()
    families = []
    for line in text.splitlines()[:-1]:
        if line.startswith("# TYPE "):
            families.append(line.split()[2])
            continue
        if line.startswith("#"):
            continue
        ts = float(line.rsplit(" ", 1)[1])
        assert first - 3 * 3600 < ts < first + 8 * 3600
    assert len(families) == len(set(families)), "each family is written once, contiguously"
    for fam in families:
        assert not fam.endswith("_total")
    for line in text.splitlines():
        if line.startswith("# TYPE ") and line.endswith(" counter"):
            fam = line.split()[2]
            assert f"\n{fam}_total{{" in text, f"counter {fam} has _total samples"


@pytest.mark.parametrize("name", ["march-oom", "fleet-day", "gpu-xid-crash", "rollout-crashloop"])
def test_promtool_accepts_metrics(runs, tmp_path, name) -> None:
    promtool = os.environ.get("PROMTOOL_BIN") or shutil.which("promtool") or "/usr/bin/promtool"
    if not os.path.exists(promtool):
        if os.environ.get("REQUIRE_SERVICES") == "1":
            pytest.fail("promtool not found")
        pytest.skip("promtool not installed")
    proc = subprocess.run(
        [
            promtool,
            "tsdb",
            "create-blocks-from",
            "openmetrics",
            str(runs[name] / "metrics.om"),
            str(tmp_path / "data"),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert list((tmp_path / "data").iterdir())
