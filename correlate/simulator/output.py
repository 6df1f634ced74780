"""A built story as its five files: Alertmanager's deliveries of the alerts (`alerts.jsonl`, with
at-least-once redeliveries), the change events, the people's actions resolved to times and
retargeted at alerts that fire then (`actions.jsonl`), the ground truth and the metrics
(`metrics.om`). `Story.build` calls `build_files`."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, TypeGuard

from . import alertmanager as am
from .core import MINUTE, NS, go_time, rng_for
from .openmetrics import render
from .records import Change, Incident

if TYPE_CHECKING:
    from .story import Story

SHEDDING_LEVELS = {"L2", "L3"}
FOREVER = 2**63 - 1
RETARGETABLE = {"acknowledge", "assign", "note", "severity", "degrade", "mitigate", "resolve", "reopen"}


def build_files(story: Story) -> dict[str, str]:
    """The five files by name; keeps the deliveries and when each occurrence was first delivered
    (and first delivered firing) on the story."""
    alerts_end = max([o.ends or o.starts for o in story.occs] + [c.at for c in story.changes])
    deliveries = am.simulate(story.am_configs, story.occs, alerts_end + 45 * MINUTE)
    first_seen: dict[tuple[str, str], int] = {}
    for d in deliveries:
        for a in d.body["alerts"]:
            first_seen.setdefault((a["fingerprint"], a["startsAt"]), d.at)
    story.first_firing = {}
    for d in deliveries:
        for a in d.body["alerts"]:
            if a["status"] == "firing":
                story.first_firing.setdefault((a["fingerprint"], a["startsAt"]), d.at)
    delivered = {o.key for o in story.occs if o.key in first_seen}
    lines = []
    dup = rng_for(story.key, "redelivery")
    for d in deliveries:
        line = am.dumps_go(d.body) + "\n"
        lines.append(line)
        # at-least-once: an HA peer sending before gossip settles, or a retry after a lost 2xx
        if dup.random() < (0.12 if d.body["receiver"] not in ("rootline", "rootline-pager") else 0.04):
            lines.append(line)
    files = {"alerts.jsonl": "".join(lines)}
    changes = sorted(story.changes, key=lambda c: (c.at, c.seq))
    files["changes.jsonl"] = "".join(json.dumps(c.body, ensure_ascii=False) + "\n" for c in changes)
    actions = _actions(story, first_seen)
    files["actions.jsonl"] = "".join(json.dumps(r, ensure_ascii=False) + "\n" for _, _, r in actions)
    files["truth.json"] = _truth(story, delivered)
    _outcomes(story, actions)
    files["metrics.om"] = _metrics(story)
    story.deliveries = deliveries
    story.first_seen = first_seen
    return files


def _ref(item: am.Occurrence | Change) -> dict[str, str]:
    return {"fingerprint": item.fingerprint, "starts_at": item.starts_at}


def _truth(story: Story, delivered: set) -> str:
    def ok(item: am.Occurrence | Change) -> bool:
        return isinstance(item, Change) or item.key in delivered

    def when(item: am.Occurrence | Change) -> int:
        return item.at if isinstance(item, Change) else item.starts

    incidents = []
    for inc in story.incidents:
        members = sorted((m for m in inc.members if ok(m)), key=when)
        if not members:
            continue
        root = inc.root if inc.root is not None and ok(inc.root) else members[0]
        incidents.append(
            {
                "id": inc.id,
                "root": _ref(root),
                "alerts": [_ref(m) for m in members],
                "family": inc.family,
            }
        )
    noise = [_ref(m) for m in sorted((m for m in story.noise if ok(m)), key=when)]
    return json.dumps({"incidents": incidents, "noise": noise}, indent=1) + "\n"


def _actions(story: Story, first_seen: dict) -> list[tuple[int, int, dict[str, object]]]:
    """actions.jsonl's rows in order, each with its time."""
    rows = []
    for n, it in enumerate(story.intents):
        occ = it.occ
        if isinstance(occ, am.Occurrence) and occ.key not in first_seen:
            continue
        if it.at is not None:
            at = it.at
        else:
            base = first_seen.get(occ.key, occ.starts) if isinstance(occ, am.Occurrence) else occ.at
            at = base + int((it.after_s or 0) * NS)
        at -= at % 1_000_000
        if it.action in RETARGETABLE and isinstance(occ, am.Occurrence):
            occ, at = _firing_member(story, occ, at, first_seen, it.action in ("resolve", "mitigate"))
        elif isinstance(occ, am.Occurrence) and occ.ends is not None and at >= occ.ends:
            # a judgement on one alert is made while it still fires, or not at all
            seen = story.first_firing.get(occ.key)
            if seen is None or seen + 20 * NS >= occ.ends:
                continue
            at = seen + 20 * NS
            at -= at % 1_000_000
        row: dict[str, object] = {"at": go_time(at), "by": it.by, "action": it.action}
        row.update(_ref(occ))
        for k, v in it.fields.items():
            if k == "into":
                row["into_fingerprint"] = v.fingerprint
                row["into_starts_at"] = v.starts_at
            elif k == "alerts":
                row["fingerprints"] = [o.fingerprint for o in v]
                row["starts_ats"] = [o.starts_at for o in v]
            else:
                row[k] = v
        rows.append((at, n, row))
    rows.sort(key=lambda r: (r[0], r[1]))
    return rows


def _firing_member(
    story: Story, occ: am.Occurrence, at: int, first_seen: dict, closing: bool
) -> tuple[am.Occurrence, int]:
    """The occurrence an incident-level action names, and when: one of the incident's alerts
    delivered and firing at `at` (the intended one, else the root, else the earliest); when
    none fires yet, the responder acts just after the next one shows up."""

    def firing(o: am.Occurrence | Change | None, t: int) -> TypeGuard[am.Occurrence]:
        """Whether `o` is an alert delivered and firing at `t`."""
        if not isinstance(o, am.Occurrence):
            return False
        seen = story.first_firing.get(o.key)
        return seen is not None and seen <= t and (o.ends is None or o.ends > t)

    if firing(occ, at):
        return occ, at
    inc = next((i for i in story.incidents if occ in i.members), None)
    if inc is None:
        return occ, at
    if firing(inc.root, at):
        return inc.root, at
    alerts = [m for m in inc.members if isinstance(m, am.Occurrence)]
    live = sorted((m for m in alerts if firing(m, at)), key=lambda m: (m.starts, m.seq))
    if live:
        return live[0], at
    if not closing:
        upcoming = sorted(
            (story.first_firing[m.key], m.seq, m)
            for m in alerts
            if m.key in story.first_firing and story.first_firing[m.key] > at
        )
        for seen, _, m in upcoming:
            later = seen + 15 * NS
            if m.ends is None or m.ends > later:
                return m, later - later % 1_000_000
    done = [m for m in alerts if m.key in first_seen and first_seen[m.key] <= at]
    return (max(done, key=lambda m: (m.ends or m.starts, m.seq)), at) if done else (occ, at)


def _outcomes(story: Story, actions: list[tuple[int, int, dict[str, object]]]) -> None:
    """Which deployments get request-outcome series (those of the incidents) and when each one's
    gateway sheds load: from a `degrade` to L2 or L3 (the ladder keeps L2's rejections at L3)
    until a lower level or the incident's `resolve`, as actions.jsonl has them."""
    incident_of: dict[tuple[str, str], Incident] = {}
    deps_of: dict[str, set[str]] = {}
    for inc in story.incidents:
        deps_of[inc.id] = set()
        for m in inc.members:
            incident_of.setdefault((m.fingerprint, m.starts_at), inc)
            if isinstance(m, am.Occurrence) and m.dep is not None:
                deps_of[inc.id].add(m.dep.name)
    since: dict[str, int] = {}
    spans: dict[str, list[tuple[int, int]]] = {}
    for at, _, row in actions:
        acted_on = incident_of.get((str(row["fingerprint"]), str(row["starts_at"])))
        if acted_on is None or row["action"] not in ("degrade", "resolve"):
            continue
        shedding = row["action"] == "degrade" and row.get("level") in SHEDDING_LEVELS
        if shedding and acted_on.id not in since:
            since[acted_on.id] = at
        elif not shedding and acted_on.id in since:
            spans.setdefault(acted_on.id, []).append((since.pop(acted_on.id), at))
    for inc_id, start in since.items():
        spans.setdefault(inc_id, []).append((start, FOREVER))
    story.tel.outcomes = set().union(*deps_of.values())
    story.tel.shedding.clear()
    for inc_id, deps in deps_of.items():
        for name in sorted(deps):
            story.tel.shedding[name].extend(spans.get(inc_id, ()))


def _metrics(story: Story) -> str:
    times = [o.starts for o in story.occs]
    ends = [o.ends or o.starts for o in story.occs]
    w0 = min(times) - 60 * MINUTE
    w1 = max(ends) + 15 * MINUTE
    marks: dict[str, list[int]] = {k: list(v) for k, v in story.dense_marks.items()}
    for o in story.occs:
        dep = o.dep
        if dep is not None:
            marks.setdefault(dep.name, []).append(o.starts)
    for name, dep in story.touched.items():
        occ_times = [o.starts for o in story.occs if o.dep is dep]
        occ_ends = [o.ends or o.starts for o in story.occs if o.dep is dep]
        lo = min(occ_times or story.scope_times.get(name) or [w0])
        hi = max(occ_ends or story.scope_times.get(name) or [w1])
        story.tel.windows[name] = (max(w0, lo - 60 * MINUTE), min(w1, hi + 15 * MINUTE))
        if story.sparse_s:
            story.tel.dense[name] = sorted((t - 9 * MINUTE, t + 4 * MINUTE) for t in marks.get(name, []))
    for node, _ in story.disk_nodes:
        story.tel.windows[node.name] = (w0, w1)
    deps = list(story.touched.values())
    return render(story.tel, deps, story.disk_nodes, story.step_s, story.ksm_ips, story.sparse_s)
