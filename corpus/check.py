#!/usr/bin/env python3
"""Checks corpus/fleets/ independently of generate.py (stdlib only).

- every line of alerts.jsonl / changes.jsonl is valid JSON with the expected shape;
- fingerprints are recomputed from the labels (FNV-1a 64, prometheus/common), change ids from
  sha256(source \\x1f summary \\x1f component);
- firing alerts have endsAt 0001-01-01T00:00:00Z, resolved ones a real endsAt after startsAt;
- commonLabels / commonAnnotations / groupLabels agree with the alerts of each body;
- every truth entry names an occurrence or change present in the fleet, and every occurrence and
  change is in exactly one truth entry (an incident's alerts, or noise); roots are members;
- sizes: 10-400 occurrences per fleet, every file under 2 MB.

    python3 corpus/check.py
"""

import glob
import hashlib
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
BODY_KEYS = [
    "receiver",
    "status",
    "alerts",
    "groupLabels",
    "commonLabels",
    "commonAnnotations",
    "externalURL",
    "version",
    "groupKey",
    "truncatedAlerts",
]
ALERT_KEYS = ["status", "labels", "annotations", "startsAt", "endsAt", "generatorURL", "fingerprint"]


def fnv_fingerprint(labels):
    h = 0xCBF29CE484222325
    for k in sorted(labels):
        for part in (k, labels[k]):
            for b in part.encode():
                h = ((h ^ b) * 0x100000001B3) % (1 << 64)
            h = ((h ^ 0xFF) * 0x100000001B3) % (1 << 64)
    return format(h, "016x")


def check_fleet(d):
    errs = []
    name = os.path.basename(d)
    occ = {}
    states = {}
    for path in glob.glob(os.path.join(d, "*")):
        if os.path.getsize(path) >= 2 * 1024 * 1024:
            errs.append(f"{path} over 2 MB")
    with open(os.path.join(d, "alerts.jsonl")) as fh:
        for n, line in enumerate(fh, 1):
            try:
                b = json.loads(line)
            except ValueError as e:
                errs.append("alerts.jsonl:%d invalid JSON: %s" % (n, e))
                continue
            for k in BODY_KEYS:
                if k not in b:
                    errs.append("alerts.jsonl:%d missing %s" % (n, k))
            if b.get("version") != "4":
                errs.append("alerts.jsonl:%d version %r" % (n, b.get("version")))
            alerts = b.get("alerts", [])
            if not alerts:
                errs.append("alerts.jsonl:%d no alerts" % n)
                continue
            want_status = "firing" if any(a["status"] == "firing" for a in alerts) else "resolved"
            if b["status"] != want_status:
                errs.append("alerts.jsonl:%d status %s, alerts say %s" % (n, b["status"], want_status))
            common = dict(alerts[0]["labels"])
            for a in alerts[1:]:
                common = {k: v for k, v in common.items() if a["labels"].get(k) == v}
            if common != b["commonLabels"]:
                errs.append("alerts.jsonl:%d commonLabels differ" % n)
            cann = dict(alerts[0]["annotations"])
            for a in alerts[1:]:
                cann = {k: v for k, v in cann.items() if a["annotations"].get(k) == v}
            if cann != b["commonAnnotations"]:
                errs.append("alerts.jsonl:%d commonAnnotations differ" % n)
            for k, v in b["groupLabels"].items():
                if any(a["labels"].get(k) != v for a in alerts):
                    errs.append("alerts.jsonl:%d groupLabel %s not shared" % (n, k))
            for a in alerts:
                for k in ALERT_KEYS:
                    if k not in a:
                        errs.append("alerts.jsonl:%d alert missing %s" % (n, k))
                if fnv_fingerprint(a["labels"]) != a["fingerprint"]:
                    errs.append("alerts.jsonl:%d fingerprint mismatch %s" % (n, a["labels"].get("alertname")))
                if a["status"] == "firing" and a["endsAt"] != "0001-01-01T00:00:00Z":
                    errs.append("alerts.jsonl:%d firing alert with endsAt" % n)
                if a["status"] == "resolved" and not a["endsAt"] > a["startsAt"]:
                    errs.append("alerts.jsonl:%d resolved alert endsAt <= startsAt" % n)
                if not all(isinstance(v, str) for v in a["labels"].values()):
                    errs.append("alerts.jsonl:%d non-string label" % n)
                key = (a["fingerprint"], a["startsAt"])
                occ[key] = a["labels"]["alertname"]
                prev = states.get(key)
                if prev == "resolved" and a["status"] == "firing":
                    errs.append(
                        "alerts.jsonl:%d %s firing again after resolved with same startsAt" % (n, key)
                    )
                states[key] = a["status"]
    changes = {}
    cpath = os.path.join(d, "changes.jsonl")
    if os.path.exists(cpath):
        with open(cpath) as fh:
            for n, line in enumerate(fh, 1):
                try:
                    c = json.loads(line)
                except ValueError as e:
                    errs.append("changes.jsonl:%d invalid JSON: %s" % (n, e))
                    continue
                p = c["payload"]
                for k in ("summary", "timestamp", "source", "custom_details"):
                    if k not in p:
                        errs.append("changes.jsonl:%d payload missing %s" % (n, k))
                for k in ("cluster", "namespace", "deployment"):
                    if k not in p.get("custom_details", {}):
                        errs.append("changes.jsonl:%d custom_details missing %s" % (n, k))
                if "routing_key" not in c or "links" not in c:
                    errs.append("changes.jsonl:%d missing routing_key/links" % n)
                fp = hashlib.sha256((p["source"] + "\x1f" + p["summary"] + "\x1f" + "").encode()).hexdigest()[
                    :16
                ]
                changes[(fp, p["timestamp"])] = p["summary"]
    with open(os.path.join(d, "truth.json")) as fh:
        truth = json.load(fh)
    seen = {}
    everything = set(occ) | set(changes)
    for inc in truth["incidents"]:
        members = set()
        for a in inc["alerts"]:
            key = (a["fingerprint"], a["starts_at"])
            members.add(key)
            seen[key] = seen.get(key, 0) + 1
            if key not in everything:
                errs.append("truth {} names an unknown occurrence {}".format(inc["id"], key))
        root = (inc["root"]["fingerprint"], inc["root"]["starts_at"])
        if root not in members:
            errs.append("truth {} root not among its alerts".format(inc["id"]))
    for a in truth["noise"]:
        key = (a["fingerprint"], a["starts_at"])
        seen[key] = seen.get(key, 0) + 1
        if key not in everything:
            errs.append(f"truth noise names an unknown occurrence {key}")
    for key in everything:
        if seen.get(key, 0) != 1:
            errs.append(
                "%s (%s) is in %d truth entries" % (key, occ.get(key) or changes.get(key), seen.get(key, 0))
            )
    if not 10 <= len(occ) <= 400:
        errs.append("%d occurrences (want 10-400)" % len(occ))
    if not os.path.exists(os.path.join(d, "README.md")):
        errs.append("no README.md")
    return name, len(occ), len(changes), len(truth["incidents"]), len(truth["noise"]), errs


def main():
    bad = 0
    fleets = sorted(p for p in glob.glob(os.path.join(HERE, "fleets", "*")) if os.path.isdir(p))
    for d in fleets:
        name, n_occ, n_chg, n_inc, n_noise, errs = check_fleet(d)
        print(
            "%-50s occ=%3d changes=%d incidents=%d noise=%3d %s"
            % (name, n_occ, n_chg, n_inc, n_noise, "OK" if not errs else "FAIL")
        )
        for e in errs[:20]:
            print("    " + e)
        bad += bool(errs)
    print("%d fleets, %d failing" % (len(fleets), bad))
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
