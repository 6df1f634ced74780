"""The catalog as data: layers, failure modes, matchers, causal rules, bands, remediations.

It lives in YAML (the packaged `catalog.yaml`, extended by a team's file named by
ROOTLINE_CATALOG or passed explicitly) so that teams adapt classification and causality to
their own alert names without touching code. docs/catalog.md documents the format.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import timedelta
from functools import lru_cache
from pathlib import Path
from typing import Any

import yaml

from correlate.catalog_merge import _WHERE, _tag_remediations, merge_catalog_documents

CATALOG_ENV = "ROOTLINE_CATALOG"
PACKAGED_CATALOG = Path(__file__).with_name("catalog.yaml")
LAYERS = ("hardware", "engine", "serving", "platform", "process", "unknown")
FAILURE_MODES = (
    "oom",
    "preemption",
    "timeout",
    "kv_fragmentation",
    "hot_instance",
    "numeric",
    "slo_ttft",
    "slo_tpot",
    "slo_itl",
    "queueing",
    "spec_decode",
    "restart",
    "error_rate",
    "gpu_error",
    "target_down",
    "change",
    "other",
    "node_not_ready",
)
ANY_MODE = "*"
SCOPE_RELATIONS = (
    "same_pod",
    "same_gpu",
    "same_node",
    "same_group",
    "same_deployment",
    "sibling",
    "same_model",
    "gateway",
    "same_namespace",
    "same_cluster",
    "in_change_scope",
    "co_located",
    "unplaced",
)
# The root-cause matrix's columns (correlate/matrix.py reads them from here).
MATRIX_COLUMNS = ("direct_cause", "system_defect", "process_gap")
# Remediation horizons, soonest first: within 24 hours, a week, a month (not Prometheus durations).
HORIZONS = ("24h", "1w", "1m")


class CatalogError(ValueError):
    """A catalog file that cannot be used; the message names the file and the entry."""


@dataclass(frozen=True)
class ModeInfo:
    name: str
    layer: str
    depth: int
    label: str
    # Where two alerts of this mode are one trouble (None: `settings.same_mode_scope`).
    same_mode_scope: frozenset[str] | None = None


@dataclass(frozen=True)
class Matcher:
    id: str
    mode: str
    layer: str
    names: tuple[re.Pattern[str], ...]
    metrics: tuple[re.Pattern[str], ...]
    depth: int
    # How long the condition the alert watches exists before its own metric can show it (a
    # rollout is "not progressing" only after the Deployment's progress deadline): added to
    # the alert's estimated onset, beyond its rule's window.
    onset_lead: timedelta = timedelta(0)


@dataclass(frozen=True)
class Rule:
    id: str
    cause: str
    effect: str
    max_lag: timedelta
    scope: frozenset[str]


@dataclass(frozen=True)
class Band:
    name: str
    title: str
    direction: str
    unit: str
    red: float
    yellow: float | None
    series: tuple[str, ...]


@dataclass(frozen=True)
class Settings:
    same_mode_window: timedelta = timedelta(minutes=15)
    same_mode_scope: frozenset[str] = frozenset({"same_pod", "same_gpu", "same_node", "sibling", "gateway"})
    tight_scope_window: timedelta = timedelta(minutes=5)
    onset_slack: timedelta = timedelta(minutes=2)
    quiet_after_resolve: timedelta = timedelta(minutes=10)
    max_idle: timedelta = timedelta(minutes=45)
    max_span: timedelta = timedelta(hours=3)
    max_candidates: int = 5
    topology_grace: timedelta = timedelta(minutes=10)
    same_mode_reorder: timedelta = timedelta(minutes=10)


@dataclass(frozen=True)
class ChangeKinds:
    """How a change event is read: an alert-rule edit, a remediation, or an ordinary change."""

    rule_edit: re.Pattern[str]
    remediation: re.Pattern[str]
    rule_edit_window: timedelta
    rule_edit_causal_within: timedelta

    def kind_of(self, text: str) -> str:
        if self.rule_edit.search(text):
            return "rule_edit"
        if self.remediation.search(text):
            return "remediation"
        return "change"


@dataclass(frozen=True)
class Remediation:
    """A remediation template for one failure mode and matrix column.

    `check` is a PromQL instant expression that holds when its result is non-empty (for
    `check_for`, a Prometheus duration kept as written, `check_for_seconds` its value).
    """

    mode: str
    column: str
    title: str
    horizon: str
    verification: str
    check: str | None = None
    check_for: str = "0s"
    check_for_seconds: float = 0.0


@dataclass(frozen=True)
class Catalog:
    layers: tuple[str, ...]
    modes: Mapping[str, ModeInfo]
    layer_keys: tuple[str, ...]
    mode_keys: tuple[str, ...]
    defer_values: frozenset[str]
    layer_synonyms: Mapping[str, str]
    mode_synonyms: Mapping[str, str]
    slo_names: tuple[tuple[str, re.Pattern[str]], ...]
    change_marker_labels: tuple[str, ...]
    change_marker_values: frozenset[str]
    matchers: tuple[Matcher, ...]
    rules: tuple[Rule, ...]
    settings: Settings
    bands: Mapping[str, Band]
    changes: ChangeKinds = None  # type: ignore[assignment]
    sources: tuple[str, ...] = ()
    rules_by_pair: Mapping[tuple[str, str], tuple[Rule, ...]] = field(default_factory=dict)
    remediations: tuple[Remediation, ...] = ()
    remediations_by_cell: Mapping[tuple[str, str], tuple[Remediation, ...]] = field(default_factory=dict)

    def rules_for(self, cause: str, effect: str) -> tuple[Rule, ...]:
        return self.rules_by_pair.get((cause, effect), ()) + self.rules_by_pair.get((cause, ANY_MODE), ())

    def remediations_for(self, mode: str, column: str) -> tuple[Remediation, ...]:
        """Soonest horizon first, then in catalog order; a mode the catalog has none for gives ()."""
        if column not in MATRIX_COLUMNS:
            raise ValueError(f"unknown matrix column {column!r}; known: {', '.join(MATRIX_COLUMNS)}")
        return self.remediations_by_cell.get((mode, column), ())

    @property
    def max_rule_lag(self) -> timedelta:
        return max((rule.max_lag for rule in self.rules), default=timedelta(0))

    def mode_layer(self, mode: str) -> str:
        info = self.modes.get(mode)
        return info.layer if info else "unknown"

    def mode_depth(self, mode: str) -> int:
        info = self.modes.get(mode)
        return info.depth if info else 0


def parse_duration(value: Any) -> timedelta:
    """Durations are written as Prometheus writes them (90s, 15m, 1h30m) or as bare seconds."""
    if isinstance(value, (int, float)):
        return timedelta(seconds=float(value))
    text = str(value).strip().lower()
    parts = re.findall(r"(\d+(?:\.\d+)?)\s*(ms|s|m|h|d|w)", text)
    if not parts or "".join(n + u for n, u in parts) != text.replace(" ", ""):
        raise CatalogError(f"not a duration: {value!r}")
    unit_seconds = {"ms": 0.001, "s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}
    return timedelta(seconds=sum(float(n) * unit_seconds[u] for n, u in parts))


def packaged_catalog_text() -> str:
    return PACKAGED_CATALOG.read_text(encoding="utf-8")


def load_catalog(path: str | os.PathLike[str] | None = None, *, use_env: bool = True) -> Catalog:
    """The packaged catalog, extended by ROOTLINE_CATALOG (when `use_env`), then by `path`.

    Cached by the file names and their modification times so that the app can call it per
    request without re-reading YAML, yet sees a team's edit.
    """
    overrides: list[str] = []
    env_path = os.environ.get(CATALOG_ENV, "").strip() if use_env else ""
    if env_path:
        overrides.append(env_path)
    if path:
        overrides.append(os.fspath(path))
    stamps = tuple((p, _mtime(p)) for p in overrides)
    return _load_cached(stamps)


def catalog_from_mappings(*layers: Mapping[str, Any]) -> Catalog:
    """Build a catalog from already-parsed YAML documents (packaged first), for tests and tools."""
    merged: dict[str, Any] = {}
    for number, layer in enumerate(layers, 1):
        merged = merge_catalog_documents(merged, _tag_remediations(layer, f"<mappings #{number}>"))
    return _build(merged, sources=("<mappings>",))


def _mtime(path: str) -> float:
    try:
        return Path(path).stat().st_mtime
    except OSError as exc:
        raise CatalogError(f"{path}: cannot read catalog override: {exc.strerror}") from exc


@lru_cache(maxsize=16)
def _load_cached(stamps: tuple[tuple[str, float], ...]) -> Catalog:
    packaged = "catalog.yaml (packaged)"
    merged = _tag_remediations(_parse_yaml(packaged_catalog_text(), packaged), packaged)
    sources = ["packaged"]
    for path, _ in stamps:
        text = Path(path).read_text(encoding="utf-8")
        merged = merge_catalog_documents(merged, _tag_remediations(_parse_yaml(text, path), path))
        sources.append(path)
    return _build(merged, sources=tuple(sources))


# libyaml's loader where PyYAML was built with it (its wheels are): it reads the packaged catalog
# far faster than the pure-Python loader, in every process that correlates, collects evidence or
# serves a page.
_SAFE_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def _parse_yaml(text: str, origin: str) -> dict[str, Any]:
    try:
        data = yaml.load(text, Loader=_SAFE_LOADER) or {}
    except yaml.YAMLError as exc:
        raise CatalogError(f"{origin}: invalid YAML: {exc}") from exc
    if not isinstance(data, dict):
        raise CatalogError(f"{origin}: a catalog is a mapping at the top level")
    return data


def _compile(pattern: str, where: str) -> re.Pattern[str]:
    try:
        return re.compile(pattern, re.IGNORECASE)
    except re.error as exc:
        raise CatalogError(f"{where}: bad regular expression {pattern!r}: {exc}") from exc


def _build(doc: Mapping[str, Any], *, sources: tuple[str, ...]) -> Catalog:
    layers = tuple(doc.get("layers") or LAYERS)
    modes = _build_modes(doc.get("modes") or {}, layers)
    synonyms = doc.get("synonyms") or {}
    matchers = tuple(_build_matcher(m, modes, layers) for m in doc.get("matchers") or ())
    rules = tuple(_build_rule(r, modes) for r in doc.get("rules") or ())
    by_pair: dict[tuple[str, str], tuple[Rule, ...]] = {}
    for rule in rules:
        by_pair[(rule.cause, rule.effect)] = by_pair.get((rule.cause, rule.effect), ()) + (rule,)
    markers = doc.get("change_markers") or {}
    remediations = _build_remediations(doc.get("remediations"), modes)
    by_cell: dict[tuple[str, str], tuple[Remediation, ...]] = {}
    for item in sorted(remediations, key=lambda r: HORIZONS.index(r.horizon)):
        by_cell[(item.mode, item.column)] = by_cell.get((item.mode, item.column), ()) + (item,)
    return Catalog(
        layers=layers,
        modes=modes,
        layer_keys=tuple(synonyms.get("layer_keys") or ("layer",)),
        mode_keys=tuple(synonyms.get("failure_mode_keys") or ("failure_mode",)),
        defer_values=frozenset(
            str(v).lower() for v in synonyms.get("defer") or ("unknown", "none", "other", "")
        ),
        layer_synonyms={str(k).lower(): str(v) for k, v in (synonyms.get("layer") or {}).items()},
        mode_synonyms={str(k).lower(): str(v) for k, v in (synonyms.get("failure_mode") or {}).items()},
        slo_names=tuple((e["mode"], _compile(e["pattern"], "slo_names")) for e in doc.get("slo_names") or ()),
        change_marker_labels=tuple(markers.get("labels") or ()),
        change_marker_values=frozenset(str(v).lower() for v in markers.get("values") or ()),
        matchers=matchers,
        rules=rules,
        settings=_build_settings(doc.get("settings") or {}),
        bands={name: _build_band(name, b) for name, b in (doc.get("bands") or {}).items()},
        changes=_build_changes(doc.get("changes") or {}),
        sources=sources,
        rules_by_pair=by_pair,
        remediations=remediations,
        remediations_by_cell=by_cell,
    )


def _build_modes(raw: Mapping[str, Any], layers: tuple[str, ...]) -> dict[str, ModeInfo]:
    modes = {name: ModeInfo(name, "unknown", 0, name.replace("_", " ")) for name in FAILURE_MODES}
    for name, spec in raw.items():
        spec = spec or {}
        layer = spec.get("layer", modes.get(name, ModeInfo(name, "unknown", 0, name)).layer)
        if layer not in layers:
            raise CatalogError(f"modes.{name}: unknown layer {layer!r}")
        modes[name] = ModeInfo(
            name,
            layer,
            int(spec.get("depth", 0)),
            str(spec.get("label", name)),
            _relations(spec["same_mode_scope"], f"modes.{name}.same_mode_scope", causal=False)
            if spec.get("same_mode_scope") is not None
            else None,
        )
    return modes


def _relations(raw: Any, where: str, causal: bool = True) -> frozenset[str]:
    names = [raw] if isinstance(raw, str) else list(raw or ())
    unknown = [name for name in names if name not in SCOPE_RELATIONS]
    if unknown:
        raise CatalogError(
            f"{where}: unknown relation(s) {', '.join(map(str, unknown))}; "
            f"known: {', '.join(SCOPE_RELATIONS)}"
        )
    if not causal and "unplaced" in names:
        # The scan meets such pairs only as a fault and a later effect (correlate/partition.py).
        raise CatalogError(f"{where}: 'unplaced' links a causal rule's cause to its effect only")
    return frozenset(names)


def _build_matcher(raw: Mapping[str, Any], modes: Mapping[str, ModeInfo], layers: tuple[str, ...]) -> Matcher:
    matcher_id = str(raw.get("id") or raw.get("mode") or "?")
    mode = raw.get("mode")
    if not isinstance(mode, str) or mode not in modes:
        raise CatalogError(f"matchers.{matcher_id}: unknown failure mode {mode!r}")
    layer = raw.get("layer") or modes[mode].layer
    if layer not in layers:
        raise CatalogError(f"matchers.{matcher_id}: unknown layer {layer!r}")
    where = f"matchers.{matcher_id}"
    return Matcher(
        id=matcher_id,
        mode=mode,
        layer=layer,
        names=tuple(_compile(p, where) for p in raw.get("names") or ()),
        metrics=tuple(_compile(p, where) for p in raw.get("metrics") or ()),
        depth=int(raw.get("depth", modes[mode].depth)),
        onset_lead=parse_duration(raw["onset_lead"]) if raw.get("onset_lead") is not None else timedelta(0),
    )


def _build_rule(raw: Mapping[str, Any], modes: Mapping[str, ModeInfo]) -> Rule:
    rule_id = str(raw.get("id") or f"{raw.get('cause')}->{raw.get('effect')}")
    for end in ("cause", "effect"):
        if raw.get(end) not in modes and not (end == "effect" and raw.get(end) == ANY_MODE):
            raise CatalogError(f"rules.{rule_id}: unknown {end} mode {raw.get(end)!r}")
    scope = _relations(raw.get("scope") or ("same_cluster",), f"rules.{rule_id}.scope")
    return Rule(rule_id, raw["cause"], raw["effect"], parse_duration(raw.get("max_lag", "30m")), scope)


def _build_settings(raw: Mapping[str, Any]) -> Settings:
    defaults = Settings()
    values: dict[str, Any] = {}
    for name in defaults.__dataclass_fields__:
        if name not in raw:
            continue
        current = getattr(defaults, name)
        if isinstance(current, timedelta):
            values[name] = parse_duration(raw[name])
        elif isinstance(current, frozenset):
            values[name] = frozenset(raw[name])
        else:
            values[name] = type(current)(raw[name])
    return Settings(**values)


def _build_changes(raw: Mapping[str, Any]) -> ChangeKinds:
    return ChangeKinds(
        rule_edit=_compile(raw.get("rule_edit", r"threshold|alert(ing)? ?rule"), "changes.rule_edit"),
        remediation=_compile(raw.get("remediation", r"rollback|revert"), "changes.remediation"),
        rule_edit_window=parse_duration(raw.get("rule_edit_window", "2h")),
        rule_edit_causal_within=parse_duration(raw.get("rule_edit_causal_within", "10m")),
    )


def _build_band(name: str, raw: Mapping[str, Any]) -> Band:
    if "red" not in raw:
        raise CatalogError(f"bands.{name}: a band needs at least a red threshold")
    direction = raw.get("direction", "above")
    if direction not in ("above", "below"):
        raise CatalogError(f"bands.{name}: direction is 'above' or 'below', not {direction!r}")
    return Band(
        name=name,
        title=str(raw.get("title", name)),
        direction=direction,
        unit=str(raw.get("unit", "")),
        red=float(raw["red"]),
        yellow=float(raw["yellow"]) if raw.get("yellow") is not None else None,
        series=tuple(raw.get("series") or ()),
    )


_REMEDIATION_FIELDS = ("mode", "column", "title", "horizon", "verification", "check", "check_for")
_DURATION_UNITS = ("w", "d", "h", "m", "s", "ms")  # the order Prometheus requires, largest first
_BRACKETS = {")": "(", "]": "[", "}": "{"}


def _build_remediations(raw: Any, modes: Mapping[str, ModeInfo]) -> tuple[Remediation, ...]:
    if raw is None:
        return ()
    if not isinstance(raw, list):
        raise CatalogError("remediations: a list of {mode, column, title, horizon, verification, ...}")
    return tuple(_build_remediation(entry, index, modes) for index, entry in enumerate(raw))


def _build_remediation(raw: Any, index: int, modes: Mapping[str, ModeInfo]) -> Remediation:
    where = f"remediations[{index}]"
    if not isinstance(raw, Mapping):
        raise CatalogError(f"{where}: an entry is a mapping, not {raw!r}")
    where = str(raw.get(_WHERE, where))
    unknown = sorted(str(k) for k in raw if k not in (*_REMEDIATION_FIELDS, _WHERE, "disabled"))
    if unknown:
        raise CatalogError(f"{where}: unknown field {unknown[0]!r}; known: {', '.join(_REMEDIATION_FIELDS)}")
    mode, column, horizon = raw.get("mode"), raw.get("column"), raw.get("horizon")
    if not isinstance(mode, str) or mode not in modes:
        raise CatalogError(f"{where}.mode: unknown failure mode {mode!r}")
    if column not in MATRIX_COLUMNS:
        raise CatalogError(f"{where}.column: unknown column {column!r}; known: {', '.join(MATRIX_COLUMNS)}")
    if horizon not in HORIZONS:
        raise CatalogError(f"{where}.horizon: {horizon!r} is not one of {', '.join(HORIZONS)}")
    title, verification = _text(raw, "title", where), _text(raw, "verification", where)
    check = raw.get("check")
    if check is not None:
        check = _text(raw, "check", where).strip()
        problem = promql_bracket_problem(check)
        if problem:
            raise CatalogError(f"{where}.check: {problem} in {check!r}")
    check_for = raw.get("check_for", "0s")
    if "check_for" in raw and check is None:
        raise CatalogError(f"{where}.check_for: a check_for needs a check")
    return Remediation(
        mode=mode,
        column=str(column),
        title=title,
        horizon=str(horizon),
        verification=verification,
        check=check,
        check_for=str(check_for),
        check_for_seconds=_prometheus_duration(check_for, f"{where}.check_for").total_seconds(),
    )


def _text(raw: Mapping[str, Any], name: str, where: str) -> str:
    value = raw.get(name)
    if not isinstance(value, str) or not value.strip():
        raise CatalogError(f"{where}.{name}: a non-empty string is required, not {value!r}")
    return value.strip()


def _prometheus_duration(value: Any, where: str) -> timedelta:
    """Stricter than `parse_duration`: written as Prometheus accepts it in a rule's `for`."""
    text = value if isinstance(value, str) else ""
    parts = re.findall(r"(\d+)(ms|s|m|h|d|w)", text)
    ranks = [_DURATION_UNITS.index(unit) for _, unit in parts]
    if not parts or "".join(n + u for n, u in parts) != text or ranks != sorted(set(ranks)):
        raise CatalogError(f"{where}: not a Prometheus duration (like 90s, 15m, 1h30m): {value!r}")
    try:
        return parse_duration(text)
    except CatalogError as exc:
        raise CatalogError(f"{where}: {exc}") from exc


def promql_bracket_problem(expr: str) -> str | None:
    """What is unbalanced in a PromQL expression (brackets, quotes), or None: a sanity check where
    promtool is not at hand, not a parser."""
    stack: list[str] = []
    quote = ""
    escaped = False
    for char in expr:
        if quote:
            if escaped:
                escaped = False
            elif char == "\\" and quote != "`":
                escaped = True
            elif char == quote:
                quote = ""
        elif char in "\"'`":
            quote = char
        elif char in "([{":
            stack.append(char)
        elif char in _BRACKETS:
            if not stack or stack.pop() != _BRACKETS[char]:
                return f"unbalanced {char!r}"
    if quote:
        return f"unclosed {quote} string"
    if stack:
        return f"unclosed {stack[-1]!r}"
    return None
