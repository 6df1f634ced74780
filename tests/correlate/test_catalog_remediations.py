"""The catalog's remediation templates: one or more per failure mode and matrix column, the March
plan's horizons, checks that Prometheus parses and that name only series someone exports."""

from __future__ import annotations

import os
import re
import subprocess
import textwrap
from pathlib import Path

import pytest
import yaml

from correlate.catalog import (
    HORIZONS,
    MATRIX_COLUMNS,
    CatalogError,
    Remediation,
    catalog_from_mappings,
    load_catalog,
    promql_bracket_problem,
)
from correlate.matrix import COLUMNS
from tests.conftest import ROOT, missing, require_binary

REQUIRED_MODES = (
    "kv_fragmentation",
    "oom",
    "preemption",
    "timeout",
    "hot_instance",
    "numeric",
    "spec_decode",
    "restart",
    "gpu_error",
    "queueing",
    "slo_ttft",
    "slo_tpot",
    "slo_itl",
    "error_rate",
    "node_not_ready",
    "target_down",
    "change",
)
MARCH_MODES = ("kv_fragmentation", "oom", "restart", "slo_ttft", "queueing", "change")
# Where a check's metric names must come from: the research notes on real exporters (a copy in
# docs/reference/, with their sources; ROOTLINE_METRICS_REFERENCE names another), the shipped
# rules pack (`manage.py rules export`, kept equal to rules/*.yml by tests/rules) and the
# simulator's rules.
REFERENCE = Path(
    os.environ.get(
        "ROOTLINE_METRICS_REFERENCE", str(ROOT / "docs" / "reference" / "llm-metrics-and-payloads.md")
    )
)
PACK = sorted((ROOT / "rules").glob("*.yml")) + [ROOT / "correlate" / "simulator" / "rules.py"]
PROMQL_WORDS = {"by", "without", "on", "ignoring", "group_left", "group_right", "and", "or", "unless", "bool"}
PROMQL_WORDS |= {"offset", "inf", "nan"}


def packaged() -> tuple[Remediation, ...]:
    return load_catalog(use_env=False).remediations


def checked() -> list[Remediation]:
    return [r for r in packaged() if r.check]


def only(mode: str, column: str, horizon: str, *, with_check: bool = True, word: str = "") -> Remediation:
    [found] = [
        r
        for r in load_catalog(use_env=False).remediations_for(mode, column)
        if r.horizon == horizon and bool(r.check) == with_check and word in r.title.lower()
    ]
    return found


def test_matrix_columns_are_the_catalogs():
    assert COLUMNS is MATRIX_COLUMNS == ("direct_cause", "system_defect", "process_gap")


@pytest.mark.parametrize("column", MATRIX_COLUMNS)
def test_every_failure_mode_has_a_remediation_in_every_matrix_column(column):
    catalog = load_catalog(use_env=False)
    assert set(REQUIRED_MODES) <= set(catalog.modes)
    bare = [mode for mode in catalog.modes if not catalog.remediations_for(mode, column)]
    assert not bare, f"no {column} remediation for {bare}"


def test_the_march_incidents_modes_give_items_in_all_three_horizons():
    catalog = load_catalog(use_env=False)
    items = [
        r for mode in MARCH_MODES for column in MATRIX_COLUMNS for r in catalog.remediations_for(mode, column)
    ]
    assert {r.horizon for r in items} == set(HORIZONS)
    for horizon in HORIZONS:
        assert {r.column for r in items if r.horizon == horizon} >= {"system_defect", "process_gap"}


def test_the_march_plan_is_in_the_catalog_with_its_checks():
    monitoring = only("kv_fragmentation", "system_defect", "24h")
    assert monitoring.check and monitoring.check.startswith("count(llm_kv_cache_fragmentation_ratio")
    assert monitoring.check.endswith("> 0")
    rollback = only("kv_fragmentation", "process_gap", "24h", with_check=False, word="roll back")
    assert "threshold" in rollback.title
    dynamic = only("kv_fragmentation", "system_defect", "1w")
    assert "dynamic" in dynamic.title.lower() and dynamic.check
    assert "[7d]" in dynamic.check and dynamic.check.endswith("< 0.25")
    assert (
        "change management" in only("kv_fragmentation", "process_gap", "1w", with_check=False).title.lower()
    )
    assert "defragmenter" in only("kv_fragmentation", "system_defect", "1m").title.lower()
    assert "drill" in only("kv_fragmentation", "process_gap", "1m", with_check=False).title.lower()


def test_remediations_for_gives_the_soonest_horizon_first_and_refuses_an_unknown_column():
    catalog = load_catalog(use_env=False)
    for mode in catalog.modes:
        for column in MATRIX_COLUMNS:
            found = catalog.remediations_for(mode, column)
            assert [HORIZONS.index(r.horizon) for r in found] == sorted(
                HORIZONS.index(r.horizon) for r in found
            )
    assert catalog.remediations_for("melted", "direct_cause") == ()
    with pytest.raises(ValueError, match="unknown matrix column"):
        catalog.remediations_for("oom", "root_cause")


def test_each_remediation_is_a_title_and_a_one_sentence_verification():
    for item in packaged():
        assert item.title and not item.title.endswith(".")
        assert (
            item.verification.endswith(".") and len(re.findall(r"[.!?](?:\s|$)", item.verification)) == 1
        ), item
        assert item.check_for_seconds >= 0 and (item.check or item.check_for == "0s")


def test_every_check_is_balanced():
    assert checked()
    for item in checked():
        assert promql_bracket_problem(item.check or "") is None, item.check


def _rule_file(items: list[Remediation]) -> dict:
    rules = [
        {"alert": f"Remediation{i}", "expr": item.check, "for": item.check_for}
        for i, item in enumerate(items)
    ]
    return {"groups": [{"name": "rootline-remediation-checks", "rules": rules}]}


def test_every_check_parses_with_promtool(tmp_path):
    promtool = require_binary("promtool")
    path = tmp_path / "checks.yml"
    path.write_text(yaml.safe_dump(_rule_file(checked()), sort_keys=False))
    result = subprocess.run(
        [promtool, "check", "rules", str(path)], capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert f"SUCCESS: {len(checked())} rules found" in result.stdout


def metric_names(expr: str) -> set[str]:
    """The series a PromQL expression selects: words that are not functions, keywords, label names
    (in matchers and grouping clauses), strings or durations."""
    text = re.sub(r'"(?:[^"\\]|\\.)*"|\'(?:[^\'\\]|\\.)*\'|`[^`]*`', '""', expr)
    text = re.sub(r"\{[^}]*\}|\[[^\]]*\]", " ", text)
    text = re.sub(r"\b(?:by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)", " ", text)
    words = re.findall(r"(?<![\w:.])([A-Za-z_:][\w:]*)(?![\w:])(?!\s*\()", text)
    return {word for word in words if word.lower() not in PROMQL_WORDS}


def test_metric_names_are_read_from_a_check():
    expr = (
        'max(max_over_time((sum by (ns, le) (rate(vllm:x_bucket{a="b(c"}[5m])) or 0 * foo_total)[7d:5m]))'
        " / on () group_left (node) bar unless count(baz) > 0.25"
    )
    assert metric_names(expr) == {"vllm:x_bucket", "foo_total", "bar", "baz"}


def test_every_metric_in_a_check_is_one_an_exporter_or_the_rules_pack_emits():
    corpus = "\n".join(path.read_text(encoding="utf-8") for path in PACK)
    if REFERENCE.exists():
        corpus += REFERENCE.read_text(encoding="utf-8")

    def known(name: str) -> bool:
        bases = {name, re.sub(r"_(bucket|sum|count)$", "", name)}
        return any(re.search(rf"(?<![\w:]){re.escape(base)}(?![\w:])", corpus) for base in bases)

    unknown = sorted(
        {name for item in checked() for name in metric_names(item.check or "") if not known(name)}
    )
    if unknown and not REFERENCE.exists():
        missing(f"{REFERENCE} (set ROOTLINE_METRICS_REFERENCE) to look up {unknown}")
    assert not unknown, f"checks name series no exporter or rule emits: {unknown}"


def _promtool_test(tmp_path: Path, items: list[Remediation], cases: list[dict]) -> None:
    promtool = require_binary("promtool")
    (tmp_path / "checks.yml").write_text(yaml.safe_dump(_rule_file(items), sort_keys=False))
    tests = [
        {
            "interval": "5m",
            "input_series": [{"series": s, "values": v} for s, v in case["series"].items()],
            "alert_rule_test": [
                {
                    "eval_time": case["at"],
                    "alertname": f"Remediation{items.index(item)}",
                    "exp_alerts": [{}] * holds,
                }
                for item, holds in case["expect"]
            ],
        }
        for case in cases
    ]
    (tmp_path / "test.yml").write_text(
        yaml.safe_dump(
            {"rule_files": ["checks.yml"], "evaluation_interval": "1h", "tests": tests}, sort_keys=False
        )
    )
    result = subprocess.run(
        [promtool, "test", "rules", "test.yml"], cwd=tmp_path, capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_the_march_fragmentation_checks_hold_only_when_the_remediation_worked(tmp_path):
    """A check holds when its result is non-empty: monitored once the series has existed for its
    `check_for`, the week's check broken by one spike over 0.25 that the day's check has forgotten,
    the defragmenter's by one firing kv_fragmentation alert in the fortnight (not by a pending one,
    nor by another mode's), and never where no KV pool is watched."""
    reclaimed = only("kv_fragmentation", "direct_cause", "24h")
    monitored = only("kv_fragmentation", "system_defect", "24h")
    dynamic = only("kv_fragmentation", "system_defect", "1w")
    defragmented = only("kv_fragmentation", "system_defect", "1m")
    items = [reclaimed, monitored, dynamic, defragmented]
    frag = 'llm_kv_cache_fragmentation_ratio{pod="a"}'
    usage = 'llmops:sglang_kv_cache_usage:ratio{namespace="llm",pod="a",model_name="m"}'
    fired = 'ALERTS{alertname="LLMVllmPreemptingWithFreeKV",alertstate="%s",failure_mode="%s",pod="a"}'
    once = "_x2000 1 _x2100"
    week, fortnight = "169h", "337h"
    _promtool_test(
        tmp_path,
        items,
        [
            {"series": {'up{job="vllm"}': "1x40"}, "at": "2h", "expect": [(monitored, 0), (reclaimed, 0)]},
            {"series": {frag: "0.1x40"}, "at": "30m", "expect": [(monitored, 0)]},
            {"series": {frag: "0.1x40"}, "at": "2h", "expect": [(monitored, 1), (reclaimed, 1)]},
            {"series": {frag: "0.2x2100"}, "at": week, "expect": [(dynamic, 1), (reclaimed, 1)]},
            {"series": {frag: "0.2x1000 0.3 0.2x1100"}, "at": week, "expect": [(dynamic, 0), (reclaimed, 1)]},
            {"series": {usage: "0.5x4100"}, "at": fortnight, "expect": [(defragmented, 1)]},
            {
                "series": {fired % ("firing", "kv_fragmentation"): once},
                "at": fortnight,
                "expect": [(defragmented, 0)],
            },
            {
                "series": {usage: "0.5x4100", fired % ("firing", "kv_fragmentation"): once},
                "at": fortnight,
                "expect": [(defragmented, 0)],
            },
            {
                "series": {
                    usage: "0.5x4100",
                    fired % ("pending", "kv_fragmentation"): once,
                    fired % ("firing", "preemption"): once,
                },
                "at": fortnight,
                "expect": [(defragmented, 1)],
            },
        ],
    )


def test_the_bracket_check_finds_unbalanced_brackets_and_quotes():
    assert promql_bracket_problem('sum(rate(x{a="}"}[5m]))') is None
    assert promql_bracket_problem("sum(rate(x[5m])") == "unclosed '('"
    assert promql_bracket_problem("max(x[5m)]") == "unbalanced ')'"
    assert promql_bracket_problem('x{a="b}') == 'unclosed " string'


GOOD = {"mode": "oom", "column": "direct_cause", "title": "T", "horizon": "24h", "verification": "V."}


@pytest.mark.parametrize(
    "change, where, message",
    [
        ({"mode": "melted"}, "remediations[1].mode", "unknown failure mode 'melted'"),
        ({"column": "root_cause"}, "remediations[1].column", "unknown column 'root_cause'"),
        ({"horizon": "2w"}, "remediations[1].horizon", "'2w' is not one of 24h, 1w, 1m"),
        ({"horizon": None}, "remediations[1].horizon", "None is not one of"),
        ({"check": "x > 0", "check_for": "1.5h"}, "remediations[1].check_for", "not a Prometheus duration"),
        ({"check": "x > 0", "check_for": "30m1h"}, "remediations[1].check_for", "not a Prometheus duration"),
        ({"check": "x > 0", "check_for": 300}, "remediations[1].check_for", "not a Prometheus duration"),
        ({"check": "x > 0", "check_for": "5y"}, "remediations[1].check_for", "not a Prometheus duration"),
        ({"check_for": "1h"}, "remediations[1].check_for", "needs a check"),
        ({"check": "sum(rate(x[5m])"}, "remediations[1].check", "unclosed '('"),
        ({"check": "  "}, "remediations[1].check", "non-empty string"),
        ({"title": ""}, "remediations[1].title", "non-empty string"),
        ({"verification": None}, "remediations[1].verification", "non-empty string"),
        ({"check-for": "1h"}, "remediations[1]", "unknown field 'check-for'"),
    ],
)
def test_a_bad_remediation_in_a_team_file_is_refused_with_its_file_and_path(tmp_path, change, where, message):
    team = tmp_path / "team.yaml"
    team.write_text(yaml.safe_dump({"remediations": [GOOD | {"title": "Fine"}, GOOD | change]}))
    with pytest.raises(CatalogError) as caught:
        load_catalog(team, use_env=False)
    assert f"{team}: {where}" in str(caught.value) and message in str(caught.value)


def test_a_remediations_section_that_is_not_a_list_is_refused(tmp_path):
    team = tmp_path / "team.yaml"
    for text in ("remediations: {mode: oom}\n", "replace: [remediations]\nremediations: {mode: oom}\n"):
        team.write_text(text)
        with pytest.raises(CatalogError, match="remediations: a list"):
            load_catalog(team, use_env=False)
    with pytest.raises(CatalogError, match=r"<mappings #2>: remediations\[0\].mode: unknown failure mode"):
        catalog_from_mappings({}, {"remediations": [GOOD | {"mode": "melted"}]})


def test_a_team_file_named_by_env_adds_replaces_and_disables_remediations(tmp_path, monkeypatch):
    packaged_count = len(packaged())
    team = tmp_path / "team.yaml"
    team.write_text(
        textwrap.dedent("""
        modes:
          kv_swap: {layer: engine, depth: 71, label: "KV swap thrash"}
        remediations:
          - mode: kv_swap
            column: system_defect
            horizon: 1w
            title: Pin the swap space per model
            verification: No swap thrash alert has fired for 7 days.
            check: max(max_over_time(llmops:vllm_preemptions:rate5m[7d])) < 0.05
            check_for: 1h30m
          - mode: oom
            column: direct_cause
            horizon: 24h
            title: >-
              Restore GPU memory headroom on the affected replicas
              (shed or reroute long requests, add replicas)
            verification: Our stricter line held for the last 6 hours.
            check: min(min_over_time(DCGM_FI_DEV_FB_FREE[6h])) > 4096
          - mode: slo_tpot
            column: process_gap
            horizon: 1m
            title: Add TPOT to the canary gate and to the monthly SLO review
            disabled: true
    """)
    )
    monkeypatch.setenv("ROOTLINE_CATALOG", str(team))
    catalog = load_catalog()
    [added] = catalog.remediations_for("kv_swap", "system_defect")
    assert (added.check_for, added.check_for_seconds) == ("1h30m", 5400.0)
    [oom] = [r for r in catalog.remediations_for("oom", "direct_cause") if r.horizon == "24h"]
    assert oom.check and oom.check.endswith("> 4096") and oom.verification.startswith("Our stricter")
    assert not catalog.remediations_for("slo_tpot", "process_gap")
    assert len(catalog.remediations) == packaged_count  # one added, one replaced, one removed


def test_replace_drops_the_packaged_remediations(tmp_path):
    team = tmp_path / "team.yaml"
    team.write_text(yaml.safe_dump({"replace": ["remediations"], "remediations": [GOOD]}))
    catalog = load_catalog(team, use_env=False)
    assert [r.title for r in catalog.remediations] == ["T"]
    assert catalog.remediations_for("oom", "direct_cause")[0].check is None
