"""Every runbook_url of the pack answers a page, behind the login, with the Markdown rendered safely."""

from __future__ import annotations

from urllib.parse import urlsplit

import pytest
from django.contrib.auth.models import User
from django.urls import reverse
from django.utils.html import escape

from incidents.markdown import markdown_html

pytestmark = pytest.mark.django_db


@pytest.fixture
def viewer(client):
    client.force_login(User.objects.create_user("viewer"))
    return client


def test_every_runbook_url_of_the_pack_gets_a_page(viewer, alerts):
    for alert in alerts:
        path = urlsplit(alert.runbook_url).path
        assert path == reverse("runbook", args=[alert.name])
        response = viewer.get(path)
        assert response.status_code == 200, path
        body = response.content.decode()
        assert f"<h1>{alert.name}</h1>" in body
        assert "<h2>How to confirm</h2>" in body and "<h2>Degradation level</h2>" in body
        assert escape(alert.expr.split()[0]) in body


def test_runbook_page_shows_the_thresholds_in_effect(viewer, settings, tmp_path):
    team = tmp_path / "team.yaml"
    team.write_text("bands:\n  kv_fragmentation: {red: 0.3}\n")
    settings.CATALOG_PATH = str(team)
    body = viewer.get("/runbooks/LLMKVFragmentationHigh/").content.decode()
    assert "&gt; 0.3" in body
    assert "KV external fragmentation" in body


def test_runbooks_need_a_login(client):
    response = client.get("/runbooks/LLMVllmKVCacheUsageHigh/")
    assert response.status_code == 302 and response["Location"].startswith("/accounts/login/")


@pytest.mark.parametrize("name", ["NoSuchAlert", "..%2F..%2Fsettings", "LLMVllm.md"])
def test_unknown_runbooks_are_404(viewer, name):
    assert viewer.get(f"/runbooks/{name}/").status_code == 404


def test_markdown_is_rendered_without_raw_html():
    html = str(
        markdown_html(
            "# Title <b>x</b>\n\nText with <script>alert(1)</script> and **bold** and `a<b`.\n\n"
            "- [safe](https://example.com/x)\n- [bad](javascript:alert(1))\n"
            "- <img src=x onerror=alert(2)>\n\n"
            '```promql\nup{job="<x>"} == 0\n```\n\n| a | b |\n|---|---|\n| 1 | 2 |\n'
        )
    )
    assert "<script>" not in html and "<b>" not in html and "<img" not in html
    assert "&lt;script&gt;" in html and "<strong>bold</strong>" in html and "<code>a&lt;b</code>" in html
    assert '<a href="https://example.com/x" rel="noopener noreferrer">safe</a>' in html
    assert 'href="javascript' not in html
    assert '<pre><code class="language-promql">up{job="&lt;x&gt;"} == 0' in html
    assert "<td>1</td>" in html
