"""The review page on the known week (tests/review/history.py), reviewed on 2026-12-02: its
figures, every incident, item and postmortem linked, the weeks around it, its charts' data, a
bad week's 400 and what senders wrote shown as text."""

from __future__ import annotations

import json
import re

import pytest
from django.contrib.auth.models import User

from incidents import review_views
from incidents.models import Alert, Incident
from incidents.review.charts import review_charts
from incidents.review.report import review
from incidents.review.weeks import Week
from incidents.services.review import review_freeze
from tests.review import history
from tests.review.objective_series import import_objective_series

pytestmark = pytest.mark.django_db

HOSTILE = "<script>alert(1)</script>"


@pytest.fixture
def seeded(monkeypatch):
    monkeypatch.setattr(review_views, "now", lambda: history.NOW)
    return history.seed()


@pytest.fixture
def viewer(client):
    client.force_login(User.objects.create_user("viewer"))
    return client


def section(html: str, name: str) -> str:
    """The page's `<section id=name>`."""
    found = re.search(rf'<section id="{name}".*?</section>', html, re.S)
    assert found, name
    return found.group(0)


def chart_data(html: str, name: str) -> dict:
    found = re.search(rf'<script id="chart-{name}-data" type="application/json">(.*?)</script>', html, re.S)
    assert found, name
    return json.loads(found.group(1))


def get(client, path: str, status: int = 200) -> str:
    answer = client.get(path)
    assert answer.status_code == status, (path, answer.status_code)
    return answer.content.decode()


def test_the_page_shows_the_weeks_figures_in_their_order(seeded, viewer):
    html = get(viewer, "/review/?week=2026-W47")
    assert "<h1>Weekly reliability review 2026-W47</h1>" in html
    assert "Mon 16 Nov 2026 00:00 to Mon 23 Nov 2026 00:00 UTC" in html and ">complete<" in html
    assert "not frozen: computed now" in html
    positions = [html.index(f'<section id="{name}"') for name in
                 ("objectives", "incidents", "repeats", "ignored", "fixes", "trend")]  # fmt: skip
    assert positions == sorted(positions)
    incidents = section(html, "incidents")
    assert "<strong>8 incidents</strong>" in incidents
    assert '<span class="pill sev-critical">2 critical</span>' in incidents
    assert '<span class="pill sev-info">5 info</span>' in incidents
    # Resolve: median 5400 s, p90 6840 s; detect p90 180 s.
    assert re.search(
        r"<td>Resolve</td><td class=\"num\">90 min</td><td class=\"num\">114 min</td>", incidents
    )
    assert re.search(r"<td>Detect</td><td class=\"num\">0 s</td><td class=\"num\">3 min</td>", incidents)
    for name in ("prod-eu", "llama-70b", "kv fragmentation", "queueing"):
        assert name in incidents
    for key in ("a", "b", "c"):
        assert f'href="/incidents/{seeded[key].pk}/"' in incidents
    assert f'href="/incidents/{seeded["d"].pk}/"' not in incidents  # the next week's


def test_week_navigation_and_the_exports(seeded, viewer):
    html = get(viewer, "/review/?week=2026-W47")
    assert 'href="?week=2026-W46" rel="prev"' in html and 'href="?week=2026-W48" rel="next"' in html
    assert 'href="?week=2026-W49"' in html  # this week, on 2026-12-02
    for path in ("/api/v1/review.md", "/api/v1/review.csv", "/api/v1/review/"):
        assert f'href="{path}?week=2026-W47"' in html
    assert 'value="2026-W47"' in html  # the week picker


def test_without_a_week_the_page_is_the_last_complete_one(seeded, viewer):
    html = get(viewer, "/review/")
    assert "<h1>Weekly reliability review 2026-W48</h1>" in html and ">complete<" in html


def test_the_open_week_says_its_figures_are_so_far_and_links_no_week_after(seeded, viewer):
    html = get(viewer, "/review/?week=2026-W49")
    assert "figures so far, as of Wed 2 Dec 09:00 UTC" in html
    assert 'rel="next"' not in html


def test_a_frozen_week_says_so(seeded, viewer):
    review_freeze(week=Week.parse("2026-W47"), now=history.NOW)
    html = get(viewer, "/review/?week=2026-W47")
    assert ">frozen<" in html and "at 2026-12-02 09:00 UTC" in html


def test_repeats_link_their_earlier_incidents_and_recurring_roots(seeded, viewer):
    repeats = section(get(viewer, "/review/?week=2026-W47"), "repeats")
    a, earlier = seeded["a"], seeded["earlier"]
    assert f'<a href="/incidents/{a.pk}/">#{a.pk} frag then OOM</a>' in repeats
    assert f'<a href="/incidents/{earlier.pk}/">#{earlier.pk} frag then OOM (earlier)</a>' in repeats
    assert "kv_fragmentation (engine) → oom (platform)" in repeats and "vllm-llama" in repeats
    assert "1 time, first 2 Nov 2026" in repeats
    assert '<span class="mono">KVCacheFragmentationHigh</span>' in repeats  # a recurring root's alert
    assert "2 of 8" in repeats  # unknown roots in W45 and W46


def test_what_is_ignored(seeded, viewer):
    html = get(viewer, "/review/?week=2026-W47")
    ignored = section(html, "ignored")
    warning = ignored.split("<h3>Noisy rules</h3>")[0]
    assert "KVCacheFragmentationHigh" in warning and "ana" in warning
    assert f'href="/incidents/{seeded["a"].pk}/"' in warning
    assert '<span class="mono">LLMContainerOOMKilled</span> 20 min later' in warning
    noisy, bare = ignored.split("<h3>Noisy rules</h3>")[1].split("<h3>Alerts without a runbook</h3>")
    assert 'NoisyThing</strong> <span class="pill rejected">never in an incident</span>' in noisy
    assert "NoisyThing" in bare and "TeamLinkedRule" not in bare
    chart = chart_data(html, "noisy")
    assert chart["data"][0]["y"][0] == "NoisyThing"  # the most firings on top
    assert chart["data"][1]["x"][0] == 3  # none of them in an incident


def test_fixes_link_their_items_and_postmortems(seeded, viewer):
    fixes = section(get(viewer, "/review/?week=2026-W47"), "fixes")
    overdue = fixes.split('id="fix-overdue"')[1].split('id="fix-completed_on_time"')[0]
    item = seeded["due_open"]
    assert f'<a href="/remediations/?tab=all#item-{item.pk}">raise the pool</a>' in overdue
    assert "overdue by 4 d" in overdue
    assert f"#item-{seeded['regressed'].pk}" in overdue
    g = seeded["g"]
    due = fixes.split('id="postmortems-due"')[1].split('id="postmortems-unpublished"')[0]
    assert f'<a href="/incidents/{g.pk}/postmortem/">draft</a>' in due
    unpublished = fixes.split('id="postmortems-unpublished"')[1]
    assert f'<a href="/incidents/{seeded["earlier"].pk}/postmortem/">not started</a>' in unpublished
    assert 'Postmortems due and unpublished <span class="muted">(2)</span>' in fixes


def test_the_trend_table_and_the_charts_data(seeded, viewer):
    html = get(viewer, "/review/?week=2026-W47")
    trend = section(html, "trend")
    assert trend.count('<a href="?week=2026-W') == 8 and "<strong>2026-W47</strong>" in trend
    incidents = chart_data(html, "incidents")
    assert [trace["name"] for trace in incidents["data"]] == ["critical", "warning", "info"]
    assert incidents["data"][0]["x"][-1] == "2026-W47" and len(incidents["data"][0]["x"]) == 9
    assert incidents["data"][0]["y"][-3:] == [1, 2, 2]  # W45 earlier; W46 G and H; W47 A and C
    resolve = chart_data(html, "resolve")
    assert resolve["layout"]["yaxis"]["title"]["text"] == "min" and resolve["data"][0]["y"][-1] == 90
    assert 'id="chart-burn"' not in html  # no objective series anywhere


def test_without_objective_series_the_page_says_why(seeded, viewer):
    objectives = section(get(viewer, "/review/?week=2026-W47"), "objectives")
    assert "No objective figures for this week: PROMETHEUS_URL is not set" in objectives


def test_objectives_from_an_imported_export(seeded, viewer, tmp_path):
    import_objective_series(tmp_path)
    html = get(viewer, "/review/?week=2026-W47")
    objectives = section(html, "objectives")
    rows = re.findall(r"<tr>.*?</tr>", objectives, re.S)
    ttft = next(row for row in rows if "p99 time to first token" in row)
    assert "≤ 2000 ms in 99% of 5-min windows" in ttft and "98.859%" in ttft
    assert "23 of 2,016 windows missed" in ttft
    assert '<span class="pill firing">114.1%</span>' in ttft and ">missed<" in ttft
    a = seeded["a"]
    assert (
        f'<a href="/incidents/{a.pk}/">#{a.pk} frag then OOM</a> <span class="muted">114.1% of the budget'
        in ttft
    )
    tpot = next(row for row in rows if "p99 time per output token" in row)
    assert ">met<" in tpot and "no incident was open when it missed" in tpot
    availability = next(row for row in rows if '<td data-label="Objective">availability' in row)
    assert "of 6,048,000 requests failed" in availability
    burn = chart_data(html, "burn")
    lines = {trace["name"]: trace["y"] for trace in burn["data"]}
    assert lines["llama-70b · TTFT p99"][-3:] == [54.6, 19.8, 114.1]
    assert [shape["y0"] for shape in burn["layout"]["shapes"] if shape["name"] == "limit"] == [100]
    trend = section(html, "trend")
    assert "<td>133.9% (llama-70b, availability)</td>" in trend and "54.6% (llama-70b, TTFT p99)" in trend


@pytest.mark.parametrize(
    "week, says",
    [
        ("2026-W99", "2026 has no week 99"),
        ("junk", "expected an ISO week like 2026-W49, got &#x27;junk&#x27;"),
        ("9999-W52", "9999 is outside the years a review covers"),
        ("0001-W01", "1 is outside the years a review covers"),
    ],
)
def test_a_bad_week_is_a_400_that_says_what_is_wrong(seeded, viewer, week, says):
    html = get(viewer, f"/review/?week={week}", status=400)
    assert '<p class="flash error" role="alert">No such week: ' in html and says in html
    assert 'href="?week=2026-W48"' in html  # the last complete week, a click away
    assert viewer.get(f"/api/v1/review/?week={week}").status_code == 400


def test_what_senders_wrote_is_shown_as_text(seeded, viewer):
    hostile = Incident.objects.create(
        title=HOSTILE,
        started_at=history.at(4, 2),
        severity="critical",
        scope={"cluster": HOSTILE, "model": HOSTILE},
    )
    for where in (hostile, None):  # alone each time: a noisy rule
        history.alert(where, HOSTILE, history.at(4, 2), cluster=HOSTILE, model_name=HOSTILE)
    assert Alert.objects.filter(alertname=HOSTILE).count() == 2
    html = get(viewer, f"/review/?week=2026-W47&x={HOSTILE}")
    assert HOSTILE not in html
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in section(html, "incidents")
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in section(html, "ignored")
    noisy = chart_data(html, "noisy")
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in noisy["data"][0]["y"]  # plotly reads HTML in names
    junk = get(viewer, f"/review/?week={HOSTILE}", status=400)
    assert HOSTILE not in junk and "&lt;script&gt;" in junk


def test_the_signed_out_are_sent_to_sign_in(client):
    answer = client.get("/review/?week=2026-W47")
    assert answer.status_code == 302 and answer["Location"].startswith("/accounts/login/")


def test_the_charts_are_none_where_nothing_is_to_be_drawn(seeded):
    figures = review(Week.parse("2026-W40"), history.NOW)
    charts = review_charts(figures)
    assert charts == {"incidents": None, "burn": None, "resolve": None, "noisy": None}
    charts = review_charts(review(Week.parse("2026-W47"), history.NOW))
    assert all(chart["layout"]["dragmode"] is False for chart in charts.values() if chart)  # a finger scrolls


def test_the_pages_queries_do_not_grow_with_the_weeks_incidents(seeded, viewer):
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    def queries() -> int:
        with CaptureQueriesContext(connection) as captured:
            get(viewer, "/review/?week=2026-W47")
        return len(captured)

    queries()  # the first also keeps the time zone of the person in their session
    before = queries()
    for n in range(20):
        more = Incident.objects.create(
            title=f"more {n}",
            started_at=history.at(2, 3, n),
            severity="warning",
            scope={"cluster": "prod-eu"},
        )
        history.alert(more, f"Rule{n}", history.at(2, 3, n), cluster="prod-eu")
    assert queries() == before
