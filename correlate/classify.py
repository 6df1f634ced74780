"""Layer and failure mode of an alert: explicit labels, then the alert name, then metric names.

Teams label alerts in their own words and name them in their own style, so explicit labels are
read through synonyms, names are split into words before matching, and the rule expression
(generatorURL) and annotations are a fallback for names that say nothing.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING
from urllib.parse import parse_qsl, urlsplit

from correlate.catalog import Catalog, Matcher, load_catalog
from correlate.events import Alert

# The expression parser: what every match of a pattern contains. Python 3.11 keeps it as
# re._parser and re._constants (sre_parse and sre_constants are deprecated aliases of them);
# typeshed describes it under the old names only.
if TYPE_CHECKING:
    import sre_constants as _sre_constants
    import sre_parse as _sre_parser
else:
    from re import _constants as _sre_constants
    from re import _parser as _sre_parser

SLO_MARKER = "@slo"
# Labels naming the SLO a generated burn-rate alert is about (Sloth's `sloth_slo`, Pyrra's `slo`):
# the alert's own name ("SlothErrorBudgetBurnRate") says only that a budget burns.
SLO_NAME_LABELS = ("sloth_slo", "slo", "slo_name")
TEXT_ANNOTATIONS = ("summary", "description", "message", "title", "details")
_WORD = re.compile(r"[A-Z]+(?=[A-Z][a-z])|[A-Z]?[a-z]+|[A-Z]+|\d+[a-z]*")
_PERCENTILE = re.compile(r"([A-Z])([pP]\d{2,3})")
_NAN = re.compile(r"NaN(?=s?(?:[^a-z]|$))")
_JSON_EXPR = re.compile(r'"expr"\s*:\s*"((?:[^"\\]|\\.)*)"')
_SEPARATORS = re.compile(r"[\s_\-.:/|,;()\[\]{}=\"'<>!?]+")


@dataclass(frozen=True)
class Classification:
    layer: str
    failure_mode: str
    source: str
    depth: int = 0


def name_words(name: str) -> str:
    """'LLMContainerOOMKilled' -> 'llm container oom killed', so patterns read like words."""
    words: list[str] = []
    name = _PERCENTILE.sub(r"\1 \2", name)
    if "NaN" in name:  # 'NaNDetected' is 'nan detected', not 'na n detected'
        name = _NAN.sub("Nan", name)
    for chunk in _SEPARATORS.split(name):
        words.extend(w.lower() for w in _WORD.findall(chunk))
    return " ".join(words)


def rule_expressions(generator_url: str) -> str:
    """The PromQL of a generatorURL, URL-decoded; '' if none.

    Prometheus and Mimir/Thanos rulers link `/graph?g0.expr=...`; vmalert is often set to link a
    Grafana Explore page instead, whose `left=`/`panes=` JSON holds the queries' `"expr"`.
    """
    if not generator_url or "expr" not in generator_url:
        return ""
    try:
        pairs = parse_qsl(urlsplit(generator_url).query, keep_blank_values=False)
    except ValueError:
        return ""
    found = [v for k, v in pairs if k.endswith(".expr") or k == "expr"]
    if not found:
        for _, value in pairs:
            if '"expr"' in value:
                found.extend(_json_string(raw) for raw in _JSON_EXPR.findall(value))
    return "\n".join(found)


def _json_string(raw: str) -> str:
    try:
        return json.loads(f'"{raw}"')
    except ValueError:
        return raw


class Classifier:
    """Classifies alerts against one catalog; results are cached by what they depend on."""

    def __init__(self, catalog: Catalog | None = None) -> None:
        self.catalog = catalog or load_catalog()
        self._cache: dict[tuple[object, ...], Classification] = {}
        # Most alerts are decided by their name (and explicit labels) without reading the rule
        # URL or annotations, whose text often names the pod: those answers are cached by name.
        self._by_name: dict[tuple[object, ...], Classification] = {}
        self._read_text = False  # whether the classification under way read the rule URL or annotations
        self._names = _Patterns(self.catalog.matchers, "names")
        self._metrics = _Patterns(self.catalog.matchers, "metrics")
        # Which modes each layer's alerts can show (a GPU's memory can run out as a KV pool can).
        self._layer_modes = frozenset(
            [(m.layer, m.mode) for m in self.catalog.matchers]
            + [(info.layer, mode) for mode, info in self.catalog.modes.items()]
        )
        self._relevant_labels = frozenset(
            self.catalog.layer_keys
            + self.catalog.mode_keys
            + self.catalog.change_marker_labels
            + SLO_NAME_LABELS
        )

    def classify(self, alert: Alert) -> Classification:
        relevant = self._relevant_labels
        explicit = tuple((k, v) for k, v in alert.labels.items() if k in relevant)
        name_key = (alert.alertname, explicit)
        cached = self._by_name.get(name_key)
        if cached is not None:
            return cached
        cache_key = (alert.alertname, explicit, alert.generator_url, tuple(alert.annotations.items()))
        cached = self._cache.get(cache_key)
        if cached is None:
            self._read_text = False
            cached = self._classify(alert)
            if len(self._cache) > 50_000:
                self._cache.clear()
                self._by_name.clear()
            self._cache[cache_key] = cached
            if not self._read_text:
                self._by_name[name_key] = cached
        return cached

    def _classify(self, alert: Alert) -> Classification:
        catalog = self.catalog
        if self._is_change(alert.labels):
            return Classification("process", "change", "change-marker", catalog.mode_depth("change"))
        inferred = self._infer(alert)
        explicit_layer = self._explicit_layer(alert.labels)
        explicit_mode = self._explicit_mode(alert) or self._named_slo(alert.labels)
        if explicit_mode:
            if self._labels_contradict(explicit_mode, explicit_layer, inferred):
                # The team's two labels disagree and the name or rule sides with the layer label:
                # the mode label is the odd one out (a copied rule template's leftover).
                return Classification(
                    explicit_layer, inferred.failure_mode, f"over-label:{inferred.source}", inferred.depth
                )
            agrees = inferred.failure_mode == explicit_mode
            depth = inferred.depth if agrees else catalog.mode_depth(explicit_mode)
            # The name or rule it overruled stays in the source, for the explanation.
            source = (
                "labels" if agrees or inferred.failure_mode == "other" else f"labels-over:{inferred.source}"
            )
            if explicit_layer:
                return Classification(explicit_layer, explicit_mode, source, depth)
            layer = inferred.layer if agrees else catalog.mode_layer(explicit_mode)
            return Classification(layer, explicit_mode, source, depth)
        if explicit_layer:
            return Classification(
                explicit_layer, inferred.failure_mode, f"labels+{inferred.source}", inferred.depth
            )
        return inferred

    def _labels_contradict(self, explicit_mode: str, explicit_layer: str, inferred: Classification) -> bool:
        """Whether the explicit mode label is outvoted: the layer label contradicts it and the
        alert's name or rule names a mode of that layer."""
        return bool(
            explicit_layer
            and inferred.failure_mode not in ("other", explicit_mode)
            and inferred.layer == explicit_layer
            and (explicit_layer, explicit_mode) not in self._layer_modes
        )

    def _is_change(self, labels: Mapping[str, str]) -> bool:
        catalog = self.catalog
        if any(labels.get(k, "").strip().lower() == "change" for k in catalog.mode_keys):
            return True
        return any(
            labels.get(k, "").strip().lower() in catalog.change_marker_values
            for k in catalog.change_marker_labels
        )

    def _explicit_layer(self, labels: Mapping[str, str]) -> str:
        catalog = self.catalog
        for key in catalog.layer_keys:
            raw = labels.get(key)
            if raw is None:
                continue
            value = raw.strip().lower()
            if value in catalog.defer_values:
                continue
            value = catalog.layer_synonyms.get(value, value)
            if value in catalog.layers and value != "unknown":
                return value
        return ""

    def _explicit_mode(self, alert: Alert) -> str:
        catalog = self.catalog
        for key in catalog.mode_keys:
            raw = alert.labels.get(key)
            if raw is None:
                continue
            value = raw.strip().lower()
            if value in catalog.defer_values:
                continue
            value = catalog.mode_synonyms.get(value, value)
            if value == SLO_MARKER:
                return self._slo_mode(alert)
            if value in catalog.modes and value != "other":
                return value
            matched = self._match_names(name_words(raw))
            if matched and matched.mode != "other":
                return matched.mode
        return ""

    def _named_slo(self, labels: Mapping[str, str]) -> str:
        """The SLO mode an SLO generator's label names ('tpot-p99' -> slo_tpot), or ''."""
        for key in SLO_NAME_LABELS:
            value = labels.get(key)
            if value:
                words = name_words(value)
                for mode, pattern in self.catalog.slo_names:
                    if pattern.search(words):
                        return mode
        return ""

    def _slo_mode(self, alert: Alert) -> str:
        """Which SLO an alert labelled as one is about: a latency SLO its rule measures, else what
        its name or rule says broke (an SLO-flavoured label on an OOM or an Xid is the team's
        paging class, not a breach), else the SLO its name or rule mentions, else TTFT."""
        self._read_text = True
        name = name_words(alert.alertname)
        expr = rule_expressions(alert.generator_url).lower()
        for mode, pattern in self.catalog.slo_names:
            if mode.startswith("slo_") and pattern.search(expr):
                return mode
        inferred = self._infer(alert).failure_mode
        if inferred != "other":
            return inferred
        for text in (name, expr):
            for mode, pattern in self.catalog.slo_names:
                if pattern.search(text):
                    return mode
        return "slo_ttft"

    def _infer(self, alert: Alert) -> Classification:
        words = name_words(alert.alertname)
        matcher = self._match_names(words) if words else None
        if matcher:
            return Classification(matcher.layer, matcher.mode, f"name:{matcher.id}", matcher.depth)
        self._read_text = True
        expr = rule_expressions(alert.generator_url)
        for origin, text in (("expr", expr), ("annotations", self._annotation_expressions(alert))):
            matcher = self._match_metrics(text) if text else None
            if matcher:
                return Classification(matcher.layer, matcher.mode, f"{origin}:{matcher.id}", matcher.depth)
        prose = " ".join(name_words(alert.annotations.get(k, "")) for k in TEXT_ANNOTATIONS)
        matcher = self._match_names(prose) if prose.strip() else None
        if matcher:
            return Classification(matcher.layer, matcher.mode, f"text:{matcher.id}", matcher.depth)
        return Classification("unknown", "other", "default", self.catalog.mode_depth("other"))

    @staticmethod
    def _annotation_expressions(alert: Alert) -> str:
        return "\n".join(str(v) for v in alert.annotations.values())

    def _match_names(self, words: str) -> Matcher | None:
        return self._names.first(words)

    def _match_metrics(self, text: str) -> Matcher | None:
        return self._metrics.first(text)


class _Patterns:
    """The catalog's matchers with their patterns of one kind ("names" or "metrics"): the first
    matcher, in catalog order, with a pattern found in a text.

    Each pattern keeps the longest run of plain ASCII characters every match of it contains
    (`required_literal`); ASCII text without that run cannot match, so the search is skipped.
    An alert whose name says nothing is matched against all ~390 patterns, three times (its rule,
    annotations and prose), and its prose usually names its pod, so no cache answers it: searching
    every pattern is the cost, and checking the runs first skips most searches. Texts that come
    again (names, rule expressions) are answered from a small memo."""

    MEMO_SIZE = 10_000

    def __init__(self, matchers: Sequence[Matcher], kind: str) -> None:
        self.entries = [
            (matcher, tuple((required_literal(p), p) for p in getattr(matcher, kind)))
            for matcher in matchers
            if getattr(matcher, kind)
        ]
        self.memo: dict[str, Matcher | None] = {}

    def first(self, text: str) -> Matcher | None:
        if text in self.memo:
            return self.memo[text]
        found = self._search(text)
        if len(self.memo) >= self.MEMO_SIZE:
            self.memo.clear()
        self.memo[text] = found
        return found

    def _search(self, text: str) -> Matcher | None:
        lower = text.lower() if text.isascii() else None  # non-ASCII text: case folding is not lower()
        for matcher, patterns in self.entries:
            for literal, pattern in patterns:
                if literal and lower is not None and literal not in lower:
                    continue
                if pattern.search(text):
                    return matcher
        return None


def required_literal(pattern: re.Pattern[str]) -> str:
    """The longest run (2 characters at least) of plain ASCII characters at the top level of
    `pattern`, lower-cased: every match contains it, in whatever case the flags allow. '' when
    there is none (a top-level alternation, say) or the pattern cannot be read."""
    try:
        items = _sre_parser.parse(pattern.pattern, pattern.flags)
    except Exception:  # noqa: BLE001 - an internal parser's surprise only costs the shortcut
        return ""
    best = run = ""
    for op, value in items.data:
        if op is _sre_constants.LITERAL and isinstance(value, int) and value < 128:  # its code point
            run += chr(value)
            if len(run) > len(best):
                best = run
        else:
            run = ""
    return best.lower() if len(best) >= 2 else ""


def classify(alert: Alert, catalog: Catalog | None = None) -> Classification:
    """One-off classification; the engine keeps a Classifier to reuse its cache."""
    return Classifier(catalog).classify(alert)
