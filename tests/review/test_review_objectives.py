"""Objectives of a known week, read from the rules pack's recordings imported into the local
store (what Prometheus would answer for them): attainment, budget burned, the worst of two
engines, the gateway before the engines for availability, per-model targets, and the incidents
charged with the budget."""

from __future__ import annotations

import pytest

from incidents.review.report import review
from incidents.review.weeks import Week
from incidents.services.local_series import local_series_import
from tests.review import history

pytestmark = pytest.mark.django_db
STEP = 300
START = int(history.MONDAY.timestamp())
SAMPLES = 7 * 24 * 12 + 1  # every 5 minutes, both of the week's edges included
BAD_FROM, BAD_TO = START + 10 * 3600, START + 11 * 3600  # Monday 10:00-11:00: incident A's hour


def samples(name: str, labels: str, value) -> list[str]:
    return [f"{name}{{{labels}}} {value(START + k * STEP)} {START + k * STEP}" for k in range(SAMPLES)]


@pytest.fixture
def recorded(tmp_path, settings):
    targets = tmp_path / "slo.yml"
    targets.write_text("models:\n  qwen-7b: {ttft_p99_s: 5}\n")
    settings.SLO_TARGETS = str(targets)
    bad = lambda t: BAD_FROM <= t < BAD_TO  # noqa: E731
    lines = [
        *samples("llmops:slo_ttft_p99_seconds:5m", 'model_name="llama-70b",slo_source="vllm"',
                 lambda t: 3.0 if bad(t) else 1.0),
        # A second engine serving the model misses one window on Tuesday 03:00 on its own.
        *samples("llmops:slo_ttft_p99_seconds:5m", 'model_name="llama-70b",slo_source="sglang"',
                 lambda t: 2.5 if t == START + 27 * 3600 else 0.5),
        # 3 s all week: under qwen-7b's own 5 s target.
        *samples("llmops:slo_ttft_p99_seconds:5m", 'model_name="qwen-7b",slo_source="vllm"', lambda t: 3.0),
        *samples("llmops:slo_requests:rate5m", 'model_name="llama-70b",slo_source="gateway"', lambda t: 10.0),
        *samples("llmops:slo_request_errors:rate5m", 'model_name="llama-70b",slo_source="gateway"',
                 lambda t: 0.1 if bad(t) else 0.0),
        # The engines' own counts are not what clients saw: read only without the gateway.
        *samples("llmops:slo_requests:rate5m", 'model_name="llama-70b",slo_source="vllm"', lambda t: 12.0),
        *samples("llmops:slo_request_errors:rate5m", 'model_name="llama-70b",slo_source="vllm"',
                 lambda t: 5.0),
        "# EOF",
    ]  # fmt: skip
    path = tmp_path / "slo.om"
    path.write_text("\n".join(lines) + "\n")
    local_series_import(path=path)


@pytest.fixture
def objectives(recorded):
    seeded = history.seed()
    rows = review(Week.parse(history.WEEK), history.NOW)["objectives"]
    return seeded, {(row["model"], row["sli"]): row for row in rows}


def test_latency_attainment_is_the_share_of_windows_that_held(objectives):
    seeded, rows = objectives
    ttft = rows[("llama-70b", "ttft_p99")]
    assert ttft["windows"] == 2016  # the week's 5-minute windows
    assert ttft["windows_missed"] == 13  # A's hour (12) and the other engine's window on Tuesday
    assert ttft["attainment"] == pytest.approx(1 - 13 / 2016, abs=1e-6)
    assert ttft["budget_burned"] == pytest.approx(13 / (2016 * 0.01), abs=1e-6)
    assert ttft["met"] is True and ttft["target"] == 2.0
    (charged,) = ttft["incidents"]
    assert charged["id"] == seeded["a"].pk and charged["charged"] == 12
    assert charged["budget_burned"] == pytest.approx(12 / 20.16, abs=1e-6)


def test_a_models_own_target_applies(objectives):
    _, rows = objectives
    qwen = rows[("qwen-7b", "ttft_p99")]
    assert qwen["target"] == 5.0 and qwen["windows_missed"] == 0 and qwen["attainment"] == 1.0
    assert qwen["budget_burned"] == 0.0 and qwen["incidents"] == []


def test_availability_is_read_from_the_gateway_where_it_reports_the_model(objectives):
    seeded, rows = objectives
    availability = rows[("llama-70b", "availability")]
    requests, failed = 10.0 * STEP * 2016, 0.1 * STEP * 12
    assert availability["requests"] == round(requests) and availability["failed"] == round(failed)
    assert availability["attainment"] == pytest.approx(1 - failed / requests, abs=1e-6)
    assert availability["budget_burned"] == pytest.approx(failed / (requests * 0.001), abs=1e-6)
    assert [i["id"] for i in availability["incidents"]] == [seeded["a"].pk]
    assert ("qwen-7b", "availability") not in rows and ("llama-70b", "tpot_p99") not in rows  # no data


def test_the_markdown_and_csv_carry_the_same_figures(recorded, client):
    client.force_login(history.seed()["ana"])  # signed in, no role: a viewer
    markdown = client.get(f"/api/v1/review.md?week={history.WEEK}").content.decode()
    assert markdown.startswith(f"# Weekly reliability review {history.WEEK}\n")
    assert (
        "| llama-70b | p99 time to first token | ≤ 2000 ms in 99% of 5-min windows | 99.355% | 64.5% |"
        in markdown
    )
    csv = client.get(f"/api/v1/review.csv?week={history.WEEK}&table=objectives")
    assert csv["Content-Type"].startswith("text/csv")
    header, *lines = csv.content.decode().splitlines()
    assert header.split(",")[:5] == ["model", "sli", "target", "attainment", "budget_burned"]
    assert any(line.startswith("llama-70b,availability,0.999,") for line in lines)
