"""Merging catalog documents: the packaged catalog, then a team's files over it. Pure mappings in,
a mapping out (`correlate.catalog` builds and checks the catalog from it)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

# The key each remediation entry carries to name its file and index in an error after the merge.
_WHERE = "_where"


def _tag_remediations(doc: Mapping[str, Any], origin: str) -> Mapping[str, Any]:
    """Each remediation entry remembers its file and index, so that an error names both after the
    documents are merged (the other sections' entries are named by their ids)."""
    entries = doc.get("remediations")
    if not isinstance(entries, list):
        return doc
    tagged = [
        {**entry, _WHERE: f"{origin}: remediations[{index}]"} if isinstance(entry, Mapping) else entry
        for index, entry in enumerate(entries)
    ]
    return {**doc, "remediations": tagged}


def merge_catalog_documents(base: Mapping[str, Any], override: Mapping[str, Any]) -> dict[str, Any]:
    """Team entries win: matchers and rules by id (new matchers go first), mappings merge deeply.

    `replace: [section, ...]` in the override drops the packaged section instead of merging;
    `disabled: true` on a matcher or rule removes the packaged entry of that id. Remediations are
    appended, keyed by (mode, column, title): the same key replaces fields or, disabled, removes.
    """
    replaced = set(override.get("replace") or ())
    merged: dict[str, Any] = {k: v for k, v in base.items()}
    for key, value in override.items():
        if key == "replace":
            continue
        if key in replaced or key not in merged:
            listed = key in ("matchers", "rules") or (key == "remediations" and isinstance(value, list))
            merged[key] = _without_disabled(value) if listed else value
        elif key == "remediations":
            merged[key] = _merge_remediations(merged[key], value)
        elif key == "matchers":
            merged[key] = _merge_by_id(merged[key], value, new_first=True)
        elif key == "rules":
            merged[key] = _merge_by_id(merged[key], value, new_first=False)
        elif key in ("slo_names",):
            merged[key] = list(value) + list(merged[key])
        elif key == "layers":
            merged[key] = list(dict.fromkeys(list(merged[key]) + list(value)))
        elif isinstance(value, Mapping) and isinstance(merged[key], Mapping):
            merged[key] = _deep_merge(merged[key], value)
        else:
            merged[key] = value
    return merged


def _without_disabled(entries: Any) -> list[Any]:
    return [e for e in (entries or []) if not (isinstance(e, Mapping) and e.get("disabled"))]


def _merge_by_id(base: list[Any], override: list[Any], *, new_first: bool) -> list[Any]:
    result = list(base)
    index = {entry.get("id"): i for i, entry in enumerate(result)}
    fresh: list[Any] = []
    removed: set[int] = set()
    for entry in override or []:
        entry_id = entry.get("id")
        if entry_id in index:
            if entry.get("disabled"):
                removed.add(index[entry_id])
            else:
                result[index[entry_id]] = {**result[index[entry_id]], **entry}
        elif not entry.get("disabled"):
            fresh.append(entry)
    kept = [e for i, e in enumerate(result) if i not in removed]
    if new_first:
        before = [e for e in fresh if e.get("position") != "after"]
        after = [e for e in fresh if e.get("position") == "after"]
        return before + kept + after
    return kept + fresh


def _remediation_key(entry: Any) -> Any:
    if not isinstance(entry, Mapping):
        return id(entry)
    return (entry.get("mode"), entry.get("column"), entry.get("title"))


def _merge_remediations(base: Any, override: Any) -> Any:
    if not isinstance(base, list) or not isinstance(override, list):
        return override  # the builder refuses what is not a list
    result = list(base)
    index = {_remediation_key(entry): i for i, entry in enumerate(result)}
    removed: set[int] = set()
    for entry in override:
        key = _remediation_key(entry)
        disabled = isinstance(entry, Mapping) and entry.get("disabled")
        if key in index:
            if disabled:
                removed.add(index[key])
            else:
                result[index[key]] = {**result[index[key]], **entry}
        elif not disabled:
            index[key] = len(result)
            result.append(entry)
    return [e for i, e in enumerate(result) if i not in removed]


def _deep_merge(base: Mapping[str, Any], override: Mapping[str, Any]) -> dict[str, Any]:
    merged = dict(base)
    for key, value in override.items():
        if isinstance(value, Mapping) and isinstance(merged.get(key), Mapping):
            merged[key] = _deep_merge(merged[key], value)
        elif (
            isinstance(value, list)
            and isinstance(merged.get(key), list)
            and key in ("defer", "labels", "values")
        ):
            merged[key] = list(dict.fromkeys(list(merged[key]) + list(value)))
        else:
            merged[key] = value
    return merged
