"""The machine's draft of a postmortem: the template's placeholders filled from facts.

Facts are what Rootline stored: the incidents, their alerts, chain and root, the timeline and
durations rebuilt from alerts, threshold crossings and people's actions, the root-cause matrix
(human edits over suggestions), the evidence series, and the impact figures computed from
metrics (`figures.py`). Every sentence that states a fact links the timeline item, alert or
evidence chart it rests on; a section with nothing to say says so; nothing is left blank.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.conf import settings

from correlate.matrix import COLUMNS
from correlate.timeline import Durations, Item
from incidents.evidence import queries
from incidents.markdown import markdown_escaped as _md
from incidents.models import Alert, Incident
from incidents.postmortems import figures as figs
from incidents.postmortems.template import PLACEHOLDER, fill, load_template
from incidents.slo import objectives_for
from incidents.timeline import Evidence, incident_evidence, incident_matrix

NOTHING = "_Nothing recorded._"
COLUMN_WORDS = {
    "direct_cause": "Direct cause",
    "system_defect": "System defect",
    "process_gap": "Process gap",
}
KEY_MOMENTS = ("onset", "detected", "acknowledged", "mitigated", "resolved")


@dataclass(frozen=True)
class Facts:
    incidents: list[Incident]
    evidence: Evidence
    durations: Durations
    matrix: list[dict[str, Any]]
    figures: list[dict[str, Any]]
    alerts: dict[int, Alert]


def gather_facts(incidents: Sequence[Incident]) -> Facts:
    """Everything the draft reads, for the first incident (the one the postmortem is about) and
    the names and links of the others it covers."""
    lead = incidents[0]
    evidence = incident_evidence(lead)
    durations = evidence.durations()
    alerts = {a.pk: a for a in Alert.objects.filter(incident__in=list(incidents)).order_by("starts_at", "id")}
    scope = queries.incident_scope(a.labels for a in alerts.values() if a.kind == Alert.Kind.ALERT)
    model = next(iter(sorted(scope.models)), None) or (lead.scope or {}).get("model")
    objectives = objectives_for(model)
    reader = figs.Reader()
    try:
        figures = figs.incident_figures(
            durations=durations,
            resolved_at=lead.resolved_at,
            recovery=figs.sli_recovery(_evidence_series(evidence), lead.failure_modes or [], objectives),
            interfaces=affected_interfaces(alerts.values()),
            scope=scope,
            objectives=objectives,
            reader=reader,
        )
    finally:
        reader.close()
    return Facts(
        list(incidents), evidence, durations, incident_matrix(lead, evidence=evidence), figures, alerts
    )


def draft_sections(facts: Facts, template_path: str | None = None) -> list[dict[str, Any]]:
    """The sections of the draft, in template order: {key, title, markdown, facts} (`facts`: the
    placeholder values each section was filled with, so an edit can later be told stale)."""
    values = placeholder_values(facts)
    out = []
    for section in load_template(template_path):
        used = sorted({found.group(1) for found in PLACEHOLDER.finditer(section.body)} & set(values))
        out.append(
            {
                "key": section.key,
                "title": section.title,
                "markdown": fill(section.body, values).strip() + "\n",
                "facts": {name: values[name] for name in used},
                "edited_by": None,
                "edited_at": None,
                "stale": False,
            }
        )
    return out


def placeholder_values(facts: Facts) -> dict[str, str]:
    lead = facts.incidents[0]
    by_key = {f["key"]: f for f in facts.figures}
    return {
        "title": lead.title or f"incident #{lead.pk}",
        "summary": summary(facts, by_key),
        "affected_interfaces": _value_words(by_key["affected_interfaces"]),
        "duration": duration_words(by_key),
        "user_impact": impact_words(by_key),
        "figures_table": figures_table(facts.figures),
        "direct_trigger": direct_trigger(facts),
        "system_defect": matrix_column(facts, "system_defect"),
        "process_gap": matrix_column(facts, "process_gap"),
        "matrix_table": matrix_table(facts),
        "remediation_table": remediation_table(facts),
        "timeline": timeline_table(facts),
        "evidence": evidence_list(facts),
        "incidents": ", ".join(_incident_link(i) for i in facts.incidents),
    }


# Links --------------------------------------------------------------------------------------


def _base() -> str:
    return settings.BASE_URL


def _incident_link(incident: Incident) -> str:
    return f"[#{incident.pk}]({_base()}/incidents/{incident.pk}/)"


def _item_link(incident: Incident, kind: str, ref: object, text: str) -> str:
    return f"[{_md(text)}]({_base()}/incidents/{incident.pk}/evidence/#{kind}-{ref})"


def _alert_link(incident: Incident, alert: Alert | None, alert_id: int) -> str:
    name = alert.alertname if alert else f"alert {alert_id}"
    return f"[{_md(name)}]({_base()}/incidents/{incident.pk}/#alert-{alert_id})"


# The Impact section -------------------------------------------------------------------------


def affected_interfaces(alerts) -> dict[str, list[str]]:
    found: dict[str, set[str]] = {"models": set(), "routes": set(), "deployments": set(), "clusters": set()}
    for alert in alerts:
        labels = alert.labels or {}
        place = queries.scope_of(labels)
        for kind, value in (
            ("models", place.model),
            ("deployments", place.deployment),
            ("clusters", labels.get("cluster", "")),
            (
                "routes",
                labels.get("envoy_cluster_name") or labels.get("route") or labels.get("httproute", ""),
            ),
        ):
            if value:
                found[kind].add(str(value))
    return {kind: sorted(values) for kind, values in found.items()}


def _seconds_words(seconds: float) -> str:
    seconds = int(round(seconds))
    if seconds < 90:
        return f"{seconds} s"
    minutes = round(seconds / 60)
    if minutes < 120:
        return f"{minutes} min"
    return f"{minutes // 60} h {minutes % 60} min"


def _value_words(figure: dict[str, Any]) -> str:
    if not figure["available"]:
        return f"not available ({figure['reason']})"
    value, unit = figure["value"], figure["unit"]
    if unit == "s":
        return _seconds_words(float(value))
    if unit == "ratio":
        return f"{float(value) * 100:.1f}%" + (" (approximate)" if figure.get("approximate") else "")
    if isinstance(value, int | float) and unit:
        number = f"{value:,.0f}" if float(value) >= 100 else f"{value:g}"
        return f"{number} {unit}" + (" (approximate)" if figure.get("approximate") else "")
    return _md(str(value))


def duration_words(by_key: dict[str, dict[str, Any]]) -> str:
    parts = [f"{_value_words(by_key['duration_s'])} from onset to resolve"]
    for key, words in (
        ("detect_s", "detected"),
        ("acknowledge_s", "acknowledged"),
        ("mitigate_s", "mitigated"),
    ):
        if by_key[key]["available"]:
            parts.append(f"{words} after {_value_words(by_key[key])}")
    recovery = by_key["sli_recovery_s"]
    parts.append(
        f"the SLI took {_value_words(recovery)} to recover"
        if recovery["available"]
        else f"SLI recovery not available ({recovery['reason']})"
    )
    return "; ".join(parts) + "."


def impact_words(by_key: dict[str, dict[str, Any]]) -> str:
    rows = [
        ("requests_failed", "requests failed"),
        ("requests_shed", "requests shed"),
        ("share_over_ttft_objective", "of requests over the TTFT objective"),
        ("share_over_tpot_objective", "of tokens over the TPOT objective"),
        ("share_over_itl_objective", "of tokens over the ITL jitter objective"),
        ("tokens_not_served", "tokens not served"),
        ("gpu_hours_lost", "GPU-hours lost to restarts"),
    ]
    known = [f"{_bare(_value_words(by_key[key]))} {words}" for key, words in rows if by_key[key]["available"]]
    missing = [words.removeprefix("of ") for key, words in rows if not by_key[key]["available"]]
    text = "; ".join(known) + "." if known else "no impact figure could be computed from the metrics kept."
    if missing:
        text += f" Not available: {', '.join(missing)} (see the figures below for why)."
    return text[0].upper() + text[1:]


def _bare(words: str) -> str:
    """'1,204 requests' -> '1,204': the sentence names what was counted after the number."""
    for unit in (" requests", " tokens", " GPU-hours"):
        words = words.replace(unit, "")
    return words


def figures_table(figures: list[dict[str, Any]]) -> str:
    lines = ["| Figure | Value | Source | Query |", "| --- | --- | --- | --- |"]
    for f in figures:
        value = _value_words(f) if f["available"] else f"not available: {_md(f['reason'])}"
        query = f"`{f['query'].replace('`', '')}`" if f["query"] else "—"
        span = f["range"]
        where = (
            f" over {span['start']} to {span['end']} step {span['step']:g} s" if f["query"] and span else ""
        )
        cell, shown = query.replace("|", "\\|"), value.replace("|", "/")
        lines.append(f"| {f['label']} | {shown} | {f['source']}{where} | {cell} |")
    return "\n".join(lines)


def summary(facts: Facts, by_key: dict[str, dict[str, Any]]) -> str:
    lead = facts.incidents[0]
    root = lead.root_alert
    where = _value_words(by_key["affected_interfaces"])
    lasted = _value_words(by_key["duration_s"]) if by_key["duration_s"]["available"] else "an unknown time"
    cause = (
        f"rooted at {_alert_link(lead, root, root.pk)} ({root.failure_mode})"
        if root
        else "with no root found"
    )
    covered = (
        f" It covers incidents {', '.join(_incident_link(i) for i in facts.incidents)}."
        if len(facts.incidents) > 1
        else ""
    )
    return (
        f"{lead.severity.capitalize()} incident {_incident_link(lead)} on {where}, {cause}, lasted {lasted}."
        f"{covered}"
    )


# The Root cause section -----------------------------------------------------------------------


def direct_trigger(facts: Facts) -> str:
    lead = facts.incidents[0]
    root = lead.root_alert
    if root is None:
        return "no root was found: the incident's alerts share scope and time but no causal rule links them."
    link = _alert_link(lead, root, root.pk)
    return f"{link} ({root.layer}, {root.failure_mode}): {_md(lead.root_explanation)}"


def _cell_text(facts: Facts, cell: dict[str, Any]) -> str:
    lead = facts.incidents[0]
    cited = [ref for ref in cell.get("evidence", []) if ref.get("kind") != "catalog"]
    links = [_item_link(lead, ref["kind"], ref["id"], f"{ref['kind']} {ref['id']}") for ref in cited]
    text = _md(cell.get("text", ""))
    return f"{text} ({', '.join(links)})" if links else text


def matrix_column(facts: Facts, column: str) -> str:
    parts = [
        f"{row['layer']}: {_cell_text(facts, row[column])}" for row in facts.matrix if row[column].get("text")
    ]
    if not parts:
        return "nothing in the evidence points to one; the authors fill this in."
    return "; ".join(parts) + "."


def matrix_table(facts: Facts) -> str:
    if not facts.matrix:
        return "The root-cause matrix is empty: nothing in the evidence suggested a cell."
    lines = [
        "| Layer | " + " | ".join(COLUMN_WORDS[c] for c in COLUMNS) + " |",
        "| --- " * (len(COLUMNS) + 1) + "|",
    ]
    for row in facts.matrix:
        cells = [_cell_text(facts, row[c]).replace("|", "\\|") or "—" for c in COLUMNS]
        lines.append(f"| {row['layer']} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def remediation_table(facts: Facts) -> str:
    return remediation_rows(facts.incidents)


def remediation_rows(incidents: Sequence[Incident]) -> str:
    """The accepted remediation items of these incidents (suggestions and rejected ones left out)."""
    from incidents.models import RemediationItem

    header = "| Action | Owner | Due | How it is verified |\n| --- | --- | --- | --- |"
    items = (
        RemediationItem.objects.filter(incidents__in=list(incidents), suggested=False)
        .exclude(status=RemediationItem.Status.WONT_DO)
        .select_related("owner")
        .distinct()
        .order_by("due_at", "id")
    )
    rows = []
    for item in items:
        owner = item.owner.get_username() if item.owner else "—"
        how = _md(item.verification or "—")
        if item.check_expr:
            how += f" (check `{item.check_expr.replace('`', '')}`" + (
                f" for {item.check_for})" if item.check_for not in ("", "0s") else ")"
            )
        status = f" ({item.status.replace('_', ' ')})" if item.status != "open" else ""
        rows.append(
            f"| {_md(item.title)}{status} | {_md(owner)} | {item.due_at:%Y-%m-%d} | {how.replace('|', '/')} |"
        )
    if not rows:
        rows = ["| _No remediation item yet: accept the suggestions on the remediation page._ | — | — | — |"]
    return header + "\n" + "\n".join(rows)


# Timeline and evidence ----------------------------------------------------------------------


def key_moments(durations: Durations, incident: Incident) -> list[tuple[datetime, str]]:
    moments = [
        (durations.onset, "onset"),
        (durations.detected_at, "detected"),
        (incident.acknowledged_at, "acknowledged"),
        (incident.mitigated_at, "mitigated"),
        (incident.resolved_at, "resolved"),
    ]
    return [(at, name) for at, name in moments if at is not None]


def timeline_table(facts: Facts) -> str:
    lead = facts.incidents[0]
    items: list[Item] = facts.evidence.timeline()
    moments = key_moments(facts.durations, lead)
    if not items and not moments:
        return NOTHING
    rows: list[tuple[datetime, int, str]] = []
    for at, name in moments:
        rows.append((at, 0, f"| {_clock(at)} | **{name.upper()}** | | |"))
    for item in items:
        if item.kind == "alert_resolved":
            continue
        kind, ref = item.ref
        what = _item_link(lead, kind, ref, item.title)
        detail = _md(item.detail)[:240]
        rows.append(
            (item.at, 1, f"| {_clock(item.at)} | {item.kind.replace('_', ' ')} | {what} | {detail} |")
        )
    rows.sort(key=lambda r: (r[0], r[1]))
    return "| At (UTC) | What | Item | Detail |\n| --- | --- | --- | --- |\n" + "\n".join(r[2] for r in rows)


def evidence_list(facts: Facts) -> str:
    lead = facts.incidents[0]
    series = [s for s in facts.evidence.series if s.points]
    gaps = facts.evidence.gaps
    if not series and not gaps:
        return (
            "No evidence series were kept for this incident (no Prometheus and no imported metrics answered)."
        )
    lines = [
        f"Charts: [{_base()}/incidents/{lead.pk}/evidence/]({_base()}/incidents/{lead.pk}/evidence/)",
        "",
    ]
    by_signal: dict[str, list] = {}
    for s in series:
        by_signal.setdefault(s.signal, []).append(s)
    for signal, group in sorted(by_signal.items()):
        peak_at, peak = max(((t, v) for s in group for t, v in s.points), key=lambda p: p[1])
        query = group[0].query.replace("`", "")
        lines.append(
            f"- **{signal}** ({len(group)} series), peak {peak:.4g} at {_clock(_dt(peak_at))}: `{query}`"
        )
    for gap in gaps:
        lines.append(f"- **{gap.signal}**: missing since {_clock(gap.since)}: {_md(gap.error)[:200]}")
    return "\n".join(lines)


def _evidence_series(
    evidence: Evidence,
) -> list[tuple[str, str, Sequence[tuple[float, float]], dict[str, Any]]]:
    out = []
    for s in evidence.series:
        if not s.points:
            continue
        times = [t for t, _ in s.points]
        step = min((b - a for a, b in zip(times, times[1:], strict=False) if b > a), default=60.0)
        span = figs.Window(times[0], times[-1], step).as_dict()
        out.append((s.signal, s.query, s.points, span))
    return out


def _clock(at: datetime) -> str:
    return at.strftime("%Y-%m-%d %H:%M:%S")


def _dt(seconds: float) -> datetime:
    from datetime import UTC

    return datetime.fromtimestamp(seconds, UTC)
