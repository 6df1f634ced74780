"""Every page under the Content-Security-Policy in a real browser: each answers with the policy,
and none makes the browser refuse a script, a style or a frame (the evidence page's Plotly charts
drawn, the admin's pages, the sign-in page before signing in)."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import User

from incidents.models import Alert
from tests.e2e.test_triage import sign_in
from tests.evidence_api.march import metrics_importable, replay, simulate, store_evidence_from_om

pytestmark = [pytest.mark.services, pytest.mark.django_db(transaction=True)]

# Reports each violation the browser sees, whatever the console says about it.
LISTEN = """
window.__violations = [];
document.addEventListener("securitypolicyviolation", function (event) {
  window.__violations.push(event.violatedDirective + " " + (event.blockedURI || "inline"));
});
"""


def violations_on(page, url: str, seen: list[str]) -> list[str]:
    response = page.goto(url)
    assert response is not None and response.status < 400, (url, response and response.status)
    policy = response.headers.get("content-security-policy", "")
    assert "script-src 'self'" in policy and "frame-ancestors 'none'" in policy, url
    assert response.headers.get("x-frame-options") == "DENY" and response.headers.get("referrer-policy")
    page.wait_for_load_state("networkidle")
    return [f"{url}: {v}" for v in page.evaluate("window.__violations")] + [f"{url}: {m}" for m in seen]


def test_no_page_breaks_the_content_security_policy(
    live_server, page, make_integration, django_capture_on_commit_callbacks, tmp_path
):
    folder = simulate(tmp_path, 1)
    with_collector = metrics_importable()
    incident = replay(folder, make_integration, django_capture_on_commit_callbacks, metrics=with_collector)
    if not with_collector:
        store_evidence_from_om(incident, folder / "metrics.om")
    User.objects.create_superuser("boss", "boss@localhost", "reliable 42")
    from incidents.services.postmortems import postmortem_draft

    postmortem_draft(incident=incident, user=None, via="system")
    alert = Alert.objects.filter(incident=incident).first()
    assert alert is not None
    console: list[str] = []
    page.on(
        "console",
        lambda message: console.append(message.text) if "Content Security Policy" in message.text else None,
    )
    page.on("pageerror", lambda error: console.append(f"page error: {error}"))
    page.add_init_script(LISTEN)

    found = violations_on(page, f"{live_server.url}/accounts/login/", console)
    sign_in(page, live_server, "boss", "reliable 42")
    for path in (
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
        "/accounts/password_change/",
        "/admin/",
        "/admin/incidents/auditrecord/",
        f"/admin/incidents/alert/{alert.pk}/change/",
        "/admin/incidents/integration/add/",
    ):
        found += violations_on(page, f"{live_server.url}{path}", console)
        if "evidence" in path:
            page.wait_for_selector(".js-plotly-plot .main-svg", timeout=15_000)
            assert page.locator(".js-plotly-plot").count() >= 3
            found += [f"{path}: {v}" for v in page.evaluate("window.__violations")]
        console.clear()
    assert not found, found
