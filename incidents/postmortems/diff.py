"""What changed between two revisions of a postmortem, section by section, as the page shows it:
difflib's side-by-side table (every line escaped by difflib; no style of its own, the page's
stylesheet colours it), with only the sections that differ."""

from __future__ import annotations

import difflib
from typing import Any

from django.utils.safestring import SafeString, mark_safe

from incidents.models import PostmortemRevision

CONTEXT_LINES = 2


def revision_diff(older: PostmortemRevision, newer: PostmortemRevision) -> list[dict[str, Any]]:
    """[{key, title, changed, added, removed, table}] for every section of either revision."""
    before = {s["key"]: s for s in older.sections}
    after = {s["key"]: s for s in newer.sections}
    keys = list(dict.fromkeys([*before, *after]))
    out = []
    for key in keys:
        a = before.get(key, {}).get("markdown", "").splitlines()
        b = after.get(key, {}).get("markdown", "").splitlines()
        title = (after.get(key) or before.get(key) or {}).get("title", key)
        if a == b:
            out.append({"key": key, "title": title, "changed": False, "added": 0, "removed": 0, "table": ""})
            continue
        delta = list(difflib.unified_diff(a, b, lineterm="", n=0))
        out.append(
            {
                "key": key,
                "title": title,
                "changed": True,
                "added": sum(1 for line in delta if line.startswith("+") and not line.startswith("+++")),
                "removed": sum(1 for line in delta if line.startswith("-") and not line.startswith("---")),
                "table": _table(a, b, older.number, newer.number),
            }
        )
    return out


def _table(a: list[str], b: list[str], old: int, new: int) -> SafeString:
    table = difflib.HtmlDiff(wrapcolumn=70).make_table(
        a, b, f"revision {old}", f"revision {new}", context=True, numlines=CONTEXT_LINES
    )
    return mark_safe(table)  # noqa: S308 - difflib escapes every line it puts in the table
