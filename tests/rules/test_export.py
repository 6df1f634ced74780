"""`rules export` fills the thresholds from the catalog bands; the shipped files are a default export."""

from __future__ import annotations

import subprocess
from pathlib import Path

import yaml
from django.core.management import call_command

from correlate.catalog import load_catalog
from incidents.runbooks import RULES_DIR, RUNBOOKS_DIR, SHIPPED_BASE_URL, render_pack, render_runbooks
from tests.conftest import require_binary


def exported_rules(directory: Path) -> dict[str, dict]:
    rules = {}
    for path in directory.glob("*.yml"):
        for group in yaml.safe_load(path.read_text())["groups"]:
            for rule in group["rules"]:
                rules[rule.get("alert") or rule["record"]] = rule
    return rules


def test_shipped_rule_files_equal_a_default_export(packaged_catalog):
    expected = render_pack(catalog=packaged_catalog, base_url=SHIPPED_BASE_URL)
    shipped = {p.name: p.read_text(encoding="utf-8") for p in RULES_DIR.glob("*.yml")}
    assert sorted(shipped) == sorted(expected)
    for name, text in expected.items():
        assert shipped[name] == text, f"rules/{name} drifted: run `manage.py rules export --dir rules`"


def test_shipped_runbooks_equal_the_generated_ones(packaged_catalog, alerts):
    expected = render_runbooks(catalog=packaged_catalog)
    shipped = {p.name: p.read_text(encoding="utf-8") for p in RUNBOOKS_DIR.glob("*.md")}
    assert sorted(expected) == sorted(f"{a.name}.md" for a in alerts)
    assert sorted(shipped) == sorted(expected)
    for name, text in expected.items():
        assert shipped[name] == text, (
            f"docs/runbooks/{name} drifted: run `manage.py rules runbooks --dir docs/runbooks`"
        )


def test_export_uses_the_team_catalog_thresholds_and_base_url(tmp_path, settings):
    team = tmp_path / "team.yaml"
    team.write_text(
        "bands:\n  kv_fragmentation: {red: 0.3}\n  kv_pool_usage: {yellow: 0.75, red: 0.9}\n"
        "  ttft_p99: {red: 1.5}\n"
    )
    settings.CATALOG_PATH = str(team)
    settings.BASE_URL = "https://rootline.example.com"
    out = tmp_path / "pack"
    call_command("rules", "export", "--dir", str(out))

    assert sorted(p.name for p in out.glob("*.yml")) == sorted(p.name for p in RULES_DIR.glob("*.yml"))
    rules = exported_rules(out)
    assert rules["LLMKVFragmentationHigh"]["expr"].endswith("> 0.3")
    assert "< 0.7" in rules["LLMVllmPreemptingWithFreeKV"]["expr"]
    assert rules["LLMVllmKVCacheUsageHigh"]["expr"] == "llmops:vllm_kv_cache_usage:ratio > 0.75"
    assert rules["LLMSglangKVCacheUsageCritical"]["expr"].endswith("> 0.9")
    assert rules["LLMVllmTTFTHigh"]["expr"].endswith("> 1.5")
    assert rules["LLMTritonTTFTHigh"]["expr"].endswith("> 1500")
    assert "above 0.3 for 5 minutes" in rules["LLMKVFragmentationHigh"]["annotations"]["description"]
    assert (
        rules["LLMKVFragmentationHigh"]["annotations"]["runbook_url"]
        == "https://rootline.example.com/runbooks/LLMKVFragmentationHigh/"
    )
    shipped = exported_rules(RULES_DIR)
    assert shipped["LLMKVFragmentationHigh"]["expr"].endswith("> 0.25")
    assert rules["LLMVllmQueueWaitHigh"] == shipped["LLMVllmQueueWaitHigh"] | {
        "annotations": {
            **shipped["LLMVllmQueueWaitHigh"]["annotations"],
            "runbook_url": "https://rootline.example.com/runbooks/LLMVllmQueueWaitHigh/",
        }
    }

    result = subprocess.run(
        [require_binary("promtool"), "check", "rules", *map(str, sorted(out.glob("*.yml")))],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_export_refuses_a_catalog_without_a_band_the_pack_needs(tmp_path, settings):
    import pytest
    from django.core.management import CommandError

    team = tmp_path / "team.yaml"
    team.write_text("replace: [bands]\nbands:\n  ttft_p99: {red: 2.0}\n")
    settings.CATALOG_PATH = str(team)
    with pytest.raises(CommandError, match="the catalog has no band"):
        call_command("rules", "export", "--dir", str(tmp_path / "pack"))
    assert load_catalog(str(team), use_env=False).bands.keys() == {"ttft_p99"}
