"""The shipped pack passes `promtool check rules` and its unit tests (real exposition samples)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import yaml

from incidents.runbooks import RULES_DIR
from tests.conftest import require_binary

RULE_FILES = sorted(RULES_DIR.glob("*.yml"))
TEST_FILES = sorted((RULES_DIR / "tests").glob("*.yml"))


def promtool(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([require_binary("promtool"), *args], capture_output=True, text=True, timeout=120)


def test_promtool_check_rules_accepts_every_rule_file():
    assert RULE_FILES, "rules/ holds no rule files"
    result = promtool("check", "rules", *map(str, RULE_FILES))
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.count("SUCCESS") == len(RULE_FILES)


def test_promtool_unit_tests_pass():
    assert {p.name for p in TEST_FILES} == {p.name for p in RULE_FILES}, (
        "one promtool test file per rule file"
    )
    result = promtool("test", "rules", *map(str, TEST_FILES))
    assert result.returncode == 0, result.stdout + result.stderr


def test_every_alert_is_exercised_firing_by_a_unit_test(alerts):
    fired: set[str] = set()
    for path in TEST_FILES:
        for group in yaml.safe_load(path.read_text())["tests"]:
            for case in group.get("alert_rule_test", []):
                if case.get("exp_alerts"):
                    fired.add(case["alertname"])
    assert sorted({a.name for a in alerts} - fired) == []


def test_unit_tests_fail_when_a_threshold_moves(tmp_path: Path):
    """The unit tests pin the thresholds: with the fragmentation line moved from 0.25 to 0.30, the
    pod at 28% must no longer fire, and promtool must say so."""
    source = (RULES_DIR / "kv-fragmentation.yml").read_text()
    assert "> 0.25" in source
    (tmp_path / "kv-fragmentation.yml").write_text(source.replace("> 0.25", "> 0.3"))
    (tmp_path / "tests").mkdir()
    shutil.copy(RULES_DIR / "tests" / "kv-fragmentation.yml", tmp_path / "tests")
    result = promtool("test", "rules", str(tmp_path / "tests" / "kv-fragmentation.yml"))
    assert result.returncode != 0
    assert "LLMKVFragmentationHigh" in result.stdout + result.stderr
