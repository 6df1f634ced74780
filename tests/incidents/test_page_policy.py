"""Every page carries the Content-Security-Policy, frame denial and a referrer policy, and holds
no inline script or style the policy would refuse (the browser walk is tests/e2e/test_csp.py);
plotly.js's own style rules are served as a stylesheet of ours."""

from __future__ import annotations

import re

import plotly
import pytest
from django.contrib.auth.models import User

from incidents.plotly_assets import GLOBAL_STYLE_ID, plotly_styles

pytestmark = pytest.mark.django_db

INLINE_SCRIPT = re.compile(r"<script(?![^>]*\bsrc=)(?![^>]*type=\"application/json\")[^>]*>", re.I)
INLINE_STYLE = re.compile(r"<style\b|\sstyle=\"|\son[a-z]+=\"", re.I)


def pages(incident) -> list[str]:
    from incidents.services.postmortems import postmortem_draft
    from incidents.services.remediation import remediation_create

    postmortem_draft(incident=incident, user=None, via="system")
    remediation_create(incident=incident, user=None, via="system", body={"title": "x", "check": "up"})
    return [
        "/",
        "/?status=all",
        "/alerts/",
        f"/incidents/{incident.pk}/",
        f"/incidents/{incident.pk}/evidence/",
        "/runbooks/LLMKVFragmentationHigh/",
        f"/incidents/{incident.pk}/postmortem/",
        f"/incidents/{incident.pk}/postmortem/print/",
        f"/incidents/{incident.pk}/postmortem/diff/",
        "/postmortems/",
        "/remediations/?tab=all",
        "/review/",
    ]


def test_each_page_has_the_policy_and_no_inline_script_or_style(incident, client):
    client.force_login(User.objects.create_superuser("boss", "boss@localhost", "x"))
    for path in [*pages(incident), "/accounts/login/"]:
        answer = client.get(path)
        assert answer.status_code == 200, path
        policy = answer.headers["Content-Security-Policy"]
        assert "script-src 'self'" in policy and "style-src 'self'" in policy
        assert "'unsafe-inline'" not in policy and "frame-ancestors 'none'" in policy
        assert answer.headers["X-Frame-Options"] == "DENY"
        assert answer.headers["Referrer-Policy"] == "same-origin"
        html = answer.content.decode()
        assert not INLINE_SCRIPT.search(html), (path, INLINE_SCRIPT.search(html))
        assert not INLINE_STYLE.search(html), (path, INLINE_STYLE.search(html))


def test_plotly_style_rules_are_a_stylesheet_and_the_evidence_page_holds_their_ids(incident, client):
    css, inserted = plotly_styles()
    assert ".js-plotly-plot .plotly .modebar" in css and css.count("{") >= 40
    answer = client.get(f"/assets/plotly-{plotly.__version__}.css")
    assert answer.status_code == 200 and answer["Content-Type"].startswith("text/css")
    assert answer.content.decode() == css
    assert client.get("/assets/plotly-0.0.0.css").status_code == 404
    client.force_login(User.objects.create_user("viewer"))
    html = client.get(f"/incidents/{incident.pk}/evidence/").content.decode()
    for element_id in (GLOBAL_STYLE_ID, *inserted):
        assert f'id="{element_id}"' in html
