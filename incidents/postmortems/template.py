"""A postmortem template: Markdown with named placeholders, cut into sections at its `## ` headings.

`{{ name }}` (spaces optional) is replaced by the draft's text for that name (PLACEHOLDERS lists
them, docs/postmortems.md says what each holds). What comes before the first `## ` heading is the
section `summary` (titled by the `# ` heading, if any); each `## Heading` starts a section keyed by
its words (`## Root cause` -> `root-cause`). A template naming a placeholder that does not exist is
refused when Rootline starts, with the name and the line.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured

PACKAGED = Path(__file__).with_name("default_template.md")
PLACEHOLDER = re.compile(r"\{\{\s*([A-Za-z_][A-Za-z0-9_]*)\s*\}\}")
PLACEHOLDERS = {
    "title": "the incident's title",
    "summary": "one paragraph: what broke, where, for how long, what the root was",
    "affected_interfaces": "models, routes, deployments and clusters the alerts name",
    "duration": "onset to resolve, with detect, acknowledge and mitigate times, and the SLI's recovery",
    "user_impact": "requests failed and shed, shares outside the objectives, tokens not served, GPU-hours",
    "figures_table": "every figure with its value, source and query",
    "direct_trigger": "the root alert with its explanation, linked",
    "system_defect": "the matrix's system-defect cells",
    "process_gap": "the matrix's process-gap cells",
    "matrix_table": "the root-cause matrix (layer x direct cause, system defect, process gap)",
    "remediation_table": "Action | Owner | Due | How it is verified",
    "timeline": "the timeline with onset, detect, acknowledge, mitigate and resolve marked, and the changes",
    "evidence": "each evidence series kept: its query, range and peak, with a link to its chart",
    "incidents": "the incidents this postmortem covers, linked",
}


@dataclass(frozen=True)
class SectionTemplate:
    key: str
    title: str
    body: str  # the Markdown of the section, heading included, placeholders unfilled


def load_template(path: str | None = None) -> list[SectionTemplate]:
    """The team's template (ROOTLINE_POSTMORTEM_TEMPLATE) or the packaged one, cut into sections."""
    chosen = path if path is not None else settings.POSTMORTEM_TEMPLATE
    source = Path(chosen) if chosen else PACKAGED
    try:
        text = source.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ImproperlyConfigured(
            f"ROOTLINE_POSTMORTEM_TEMPLATE {str(source)!r} cannot be read: {exc}"
        ) from exc
    check_placeholders(text, str(source))
    return sections_of(text)


def check_placeholders(text: str, where: str) -> None:
    for number, line in enumerate(text.splitlines(), 1):
        for found in PLACEHOLDER.finditer(line):
            if found.group(1) not in PLACEHOLDERS:
                raise ImproperlyConfigured(
                    f"postmortem template {where}, line {number}: unknown placeholder "
                    f"{{{{ {found.group(1)} }}}}; known: {', '.join(sorted(PLACEHOLDERS))}"
                )


def sections_of(text: str) -> list[SectionTemplate]:
    sections: list[SectionTemplate] = []
    key, title, lines = "summary", "Summary", list[str]()
    for line in text.splitlines():
        if line.startswith("## "):
            if "".join(lines).strip() or sections or key != "summary":
                sections.append(SectionTemplate(key, title, "\n".join(lines).strip() + "\n"))
            title = line[3:].strip()
            key, lines = _unique(_key(title), sections), [line]
            continue
        if line.startswith("# ") and key == "summary" and not sections:
            title = PLACEHOLDER.sub("", line[2:]).strip(" :") or "Summary"
        lines.append(line)
    sections.append(SectionTemplate(key, title, "\n".join(lines).strip() + "\n"))
    return sections


def fill(body: str, values: dict[str, str]) -> str:
    return PLACEHOLDER.sub(lambda found: values.get(found.group(1), ""), body)


def _key(title: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", title.lower()).strip("-") or "section"


def _unique(key: str, sections: list[SectionTemplate]) -> str:
    taken = {s.key for s in sections} | {"summary"}
    if key not in taken:
        return key
    number = 2
    while f"{key}-{number}" in taken:
        number += 1
    return f"{key}-{number}"
