"""The review as Markdown (its first heading names the ISO week) and as CSV tables, in UTC."""

from __future__ import annotations

import csv
import io
import zipfile
from collections.abc import Callable
from typing import Any

from incidents.markdown import markdown_escaped as md

DURATION_WORDS = (
    ("detect_s", "Detect"),
    ("acknowledge_s", "Acknowledge"),
    ("mitigate_s", "Mitigate"),
    ("resolve_s", "Resolve"),
)
REMEDIATION_WORDS = (
    ("due", "Due this week"), ("overdue", "Overdue"), ("completed_on_time", "Completed on time"),
    ("verified", "Verified by their data"), ("regressed", "Regressed"),
)  # fmt: skip


def seconds_words(seconds: float | None) -> str:
    if seconds is None:
        return "–"
    seconds = round(seconds)
    if seconds < 90:
        return f"{seconds} s"
    minutes = round(seconds / 60)
    return f"{minutes} min" if minutes < 120 else f"{minutes // 60} h {minutes % 60:02d} min"


def share_words(value: float | None, digits: int = 2) -> str:
    return "–" if value is None else f"{value * 100:.{digits}f}%"


def day(moment: str | None) -> str:
    return (moment or "")[:16].replace("T", " ")


# Markdown -------------------------------------------------------------------------------------


def review_markdown(review: dict[str, Any]) -> str:
    state = "complete" if review["complete"] else f"open: figures so far, as of {day(review['as_of'])} UTC"
    lines = [
        f"# Weekly reliability review {review['week']}",
        "",
        f"{day(review['start'])} to {day(review['end'])} UTC ({state}).",
        "",
        *objectives_markdown(review),
        *incidents_markdown(review),
        *repeats_markdown(review),
        *ignored_markdown(review),
        *fixes_markdown(review),
        *trend_markdown(review),
    ]
    return "\n".join(lines).rstrip() + "\n"


def table(head: list[str], rows: list[list[str]]) -> list[str]:
    if not rows:
        return ["None.", ""]
    return [
        "| " + " | ".join(head) + " |",
        "| " + " | ".join("---" for _ in head) + " |",
        *("| " + " | ".join(row) + " |" for row in rows),
        "",
    ]


def incident_ref(incident: dict[str, Any]) -> str:
    return f"#{incident['id']} {md(incident.get('title') or '')}".strip()


def objectives_markdown(review: dict[str, Any]) -> list[str]:
    rows = [
        [
            md(row["model"]),
            row["label"],
            target_words(row),
            share_words(row["attainment"], 3),
            share_words(row["budget_burned"], 1),
            ", ".join(
                f"{incident_ref(i)} ({share_words(i['budget_burned'], 1)})" for i in row["incidents"][:3]
            )
            or "–",
        ]
        for row in review["objectives"]
    ]
    note = (
        [f"No objectives: {md(review['objectives_reason'])}.", ""] if review.get("objectives_reason") else []
    )
    head = ["Model", "Objective", "Target", "Attainment", "Budget burned", "Burned most by"]
    return ["## Objectives", "", *(note or table(head, rows))]


def target_words(row: dict[str, Any]) -> str:
    if row["sli"] == "availability":
        return share_words(row["target"], 2)
    return f"≤ {row['target'] * 1000:g} ms in {share_words(row['window_share'], 0)} of 5-min windows"


def incidents_markdown(review: dict[str, Any]) -> list[str]:
    incidents = review["incidents"]
    lines = [
        "## Incidents",
        "",
        f"{incidents['count']} incidents: " + counts_words(incidents["by_severity"]) + ".",
        "",
    ]
    lines += table(
        ["Time to", "Median", "p90", "Incidents"],
        [
            [
                words,
                seconds_words(incidents["durations"][key]["median"]),
                seconds_words(incidents["durations"][key]["p90"]),
                str(incidents["durations"][key]["n"]),
            ]
            for key, words in DURATION_WORDS
        ],
    )
    for key, words in (
        ("by_failure_mode", "Root cause"),
        ("by_layer", "Layer"),
        ("by_cluster", "Cluster"),
        ("by_model", "Model"),
    ):
        lines += [f"**By {words.lower()}:** {counts_words(incidents[key], escape=True)}", ""]
    return lines


def counts_words(counts: dict[str, int], *, escape: bool = False) -> str:
    return ", ".join(f"{md(k) if escape else k} {v}" for k, v in counts.items()) or "none"


def repeats_markdown(review: dict[str, Any]) -> list[str]:
    rows = [
        [
            incident_ref(r),
            md(r["signature_words"]),
            md(r["place"]),
            str(r["seen_before"]),
            day(r["first_seen"]),
        ]
        for r in review["repeats"]
    ]
    roots = [
        [
            f"{md(r['failure_mode'])} ({md(r['layer'])})",
            str(r["count"]),
            f"{r['weeks_seen_before']} of 8",
            ", ".join(md(name) for name in r["root_alerts"]) or "–",
        ]
        for r in review.get("recurring_roots", [])
    ]
    return [
        "## What repeats",
        "",
        *table(["Incident", "Chain", "Where", "Seen before", "First seen"], rows),
        "**Top recurring root causes**",
        "",
        *table(["Root cause", "This week", "Weeks before", "Root alerts"], roots),
    ]


def ignored_markdown(review: dict[str, Any]) -> list[str]:
    ignored = [
        [
            md(r["alertname"]),
            day(r["starts_at"]),
            md(r["judged_by"] or "–"),
            incident_ref(r["incident"]),
            f"{md(r['followed_by'])} {seconds_words(r['lead_s'])} later",
        ]
        for r in review["ignored_warnings"]
    ]
    noisy = [
        [
            md(r["alertname"]),
            str(r["firings"]),
            share_words(r["in_incident_share"], 0),
            "yes" if r["never_in_incident"] else "no",
        ]
        for r in review["noisy_rules"]
    ]
    bare = [[md(r["alertname"]), str(r["firings"])] for r in review.get("without_runbook", [])]
    return [
        "## What is ignored",
        "",
        "**Warnings judged false positive before an incident**",
        "",
        *table(["Alert", "Fired", "Judged by", "Incident", "Followed by"], ignored),
        "**Noisy rules**",
        "",
        *table(["Alert", "Firings", "In an incident", "Never in one"], noisy),
        "**Alerts with no runbook**",
        "",
        *table(["Alert", "Firings"], bare),
    ]


def fixes_markdown(review: dict[str, Any]) -> list[str]:
    lines = ["## Fixes", ""]
    for key, words in REMEDIATION_WORDS:
        items = review["remediation"][key]
        lines += [f"**{words}** ({len(items)})", ""]
        lines += table(
            ["Item", "Owner", "Due", "Status", "Incident"],
            [
                [
                    f"#{i['id']} {md(i['title'])}",
                    md(i["owner"] or "–"),
                    day(i["due_at"]),
                    i["status"],
                    incident_ref(i["incident"]),
                ]
                for i in items
            ],
        )
    for key, words in (
        ("due", "Postmortems due this week"),
        ("unpublished", "Postmortems due and unpublished"),
    ):
        rows = review["postmortems"][key]
        count = review["postmortems"]["unpublished_count"] if key == "unpublished" else len(rows)
        lines += [f"**{words}** ({count})", ""]
        lines += table(
            ["Incident", "Due", "Postmortem"],
            [
                [
                    incident_ref(r["incident"]),
                    day(r["due_at"]),
                    (r["postmortem"] or {}).get("status", "not started"),
                ]
                for r in rows
            ],
        )
    return lines


def trend_markdown(review: dict[str, Any]) -> list[str]:
    rows = [
        [
            row["week"],
            str(row["incidents"]["count"]),
            seconds_words(row["incidents"]["durations"]["resolve_s"]["median"]),
            worst_burn(row),
        ]
        for row in review["trend"]
    ]
    return [
        "## Trend (the 8 weeks before)",
        "",
        *table(["Week", "Incidents", "Median time to resolve", "Worst budget burn"], rows),
    ]


def worst_burn(row: dict[str, Any]) -> str:
    burned = [(o["budget_burned"], o) for o in row["objectives"] if o.get("budget_burned") is not None]
    if not burned:
        return "–"
    value, worst = max(burned, key=lambda pair: pair[0])
    return f"{share_words(value, 1)} ({md(worst['model'])}, {worst['sli']})"


# CSV --------------------------------------------------------------------------------------------


def _objectives(review: dict[str, Any]) -> list[dict[str, Any]]:
    return [
        {
            k: row.get(k)
            for k in (
                "model",
                "sli",
                "target",
                "attainment",
                "budget_burned",
                "windows",
                "windows_missed",
                "requests",
                "failed",
            )
        }
        | {"incidents": " ".join(str(i["id"]) for i in row["incidents"])}
        for row in review["objectives"]
    ]


def _incidents(review: dict[str, Any]) -> list[dict[str, Any]]:
    return [
        {k: i.get(k) for k in ("id", "title", "severity", "started_at")}
        for i in review.get("incident_list", [])
    ]


def _breakdowns(review: dict[str, Any]) -> list[dict[str, Any]]:
    return [
        {"by": key.removeprefix("by_"), "value": value, "incidents": count}
        for key in ("by_severity", "by_failure_mode", "by_layer", "by_cluster", "by_model")
        for value, count in review["incidents"][key].items()
    ]


def _durations(review: dict[str, Any]) -> list[dict[str, Any]]:
    return [{"duration": key, **review["incidents"]["durations"][key]} for key, _ in DURATION_WORDS]


def _repeats(review: dict[str, Any]) -> list[dict[str, Any]]:
    return [
        {
            "id": r["id"],
            "title": r["title"],
            "signature": r["signature"],
            "place": r["place"],
            "seen_before": r["seen_before"],
            "first_seen": r["first_seen"],
            "earlier": " ".join(str(e["id"]) for e in r["earlier"]),
        }
        for r in review["repeats"]
    ]


def _ignored(review: dict[str, Any]) -> list[dict[str, Any]]:
    return [
        {
            "alert_id": r["alert_id"],
            "alertname": r["alertname"],
            "starts_at": r["starts_at"],
            "judged_by": r["judged_by"],
            "incident": r["incident"]["id"],
            "followed_by": r["followed_by"],
            "lead_s": r["lead_s"],
        }
        for r in review["ignored_warnings"]
    ]


def _remediation(review: dict[str, Any]) -> list[dict[str, Any]]:
    return [
        {
            "group": group,
            "id": i["id"],
            "title": i["title"],
            "owner": i["owner"],
            "status": i["status"],
            "due_at": i["due_at"],
            "done_at": i["done_at"],
            "verified_at": i["verified_at"],
            "incident": i["incident"]["id"],
        }
        for group, _ in REMEDIATION_WORDS
        for i in review["remediation"][group]
    ]


def _postmortems(review: dict[str, Any]) -> list[dict[str, Any]]:
    return [
        {
            "group": group,
            "incident": r["incident"]["id"],
            "title": r["incident"]["title"],
            "due_at": r["due_at"],
            "postmortem": (r["postmortem"] or {}).get("id"),
            "status": (r["postmortem"] or {}).get("status", "not started"),
        }
        for group in ("due", "unpublished")
        for r in review["postmortems"][group]
    ]


def _trend(review: dict[str, Any]) -> list[dict[str, Any]]:
    return [
        {
            "week": row["week"],
            "incidents": row["incidents"]["count"],
            "resolve_median_s": row["incidents"]["durations"]["resolve_s"]["median"],
            "resolve_p90_s": row["incidents"]["durations"]["resolve_s"]["p90"],
            "repeats": row["repeats"],
        }
        for row in review["trend"]
    ]


TABLES: dict[str, Callable[[dict[str, Any]], list[dict[str, Any]]]] = {
    "objectives": _objectives,
    "incidents": _incidents,
    "breakdowns": _breakdowns,
    "durations": _durations,
    "repeats": _repeats,
    "ignored_warnings": _ignored,
    "noisy_rules": lambda review: review["noisy_rules"],
    "without_runbook": lambda review: review.get("without_runbook", []),
    "remediation": _remediation,
    "postmortems": _postmortems,
    "trend": _trend,
}


def table_csv(review: dict[str, Any], name: str) -> str:
    rows = TABLES[name](review)
    out = io.StringIO()
    columns = list(rows[0]) if rows else []
    writer = csv.DictWriter(out, fieldnames=columns, lineterminator="\r\n")
    writer.writeheader()
    for row in rows:
        writer.writerow({k: spreadsheet_safe(v) for k, v in row.items()})
    return out.getvalue()


def spreadsheet_safe(value: Any) -> Any:
    """A cell a sender wrote never starts a spreadsheet formula."""
    if isinstance(value, str) and value[:1] in ("=", "+", "-", "@", "\t", "\r"):
        return "'" + value
    return "" if value is None else value


def tables_zip(review: dict[str, Any]) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        for name in TABLES:
            archive.writestr(f"review-{review['week']}-{name}.csv", table_csv(review, name))
    return buffer.getvalue()
