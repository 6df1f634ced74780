"""The independent corpus (corpus/fleets) is what real senders send: every body reads through the
app's own parsers with nothing rejected, every truth names only occurrences of its fleet (each
exactly once), and the committed split is the rule's."""

from __future__ import annotations

import json
import sys
from datetime import UTC, datetime
from pathlib import Path

import pytest

from correlate.ingest import parser_for
from correlate.ingest.common import parse_time

ROOT = Path(__file__).resolve().parents[2]
FLEETS = ROOT / "corpus" / "fleets"
RECEIVED = datetime(2030, 1, 1, tzinfo=UTC)  # after every fleet: no time is read as "now"
NAMES = sorted(path.name for path in FLEETS.iterdir() if path.is_dir())


def lines(path: Path) -> list[bytes]:
    return [line for line in path.read_bytes().splitlines() if line.strip()] if path.exists() else []


def occurrences(name: str) -> set[tuple[str, datetime]]:
    """(fingerprint, start) of every alert and change the fleet delivers, read by the real parsers."""
    found = set()
    for kind, file in (("alertmanager", "alerts.jsonl"), ("events", "changes.jsonl")):
        for number, body in enumerate(lines(FLEETS / name / file), 1):
            result = parser_for(kind)(body, RECEIVED)
            assert result.rejected == [], f"{name}/{file}:{number}: {result.rejected}"
            assert result.alerts, f"{name}/{file}:{number}: no alert read"
            found.update((alert.fingerprint, alert.starts_at) for alert in result.alerts)
    return found


def test_the_corpus_has_at_least_30_fleets_and_negative_ones():
    assert len(NAMES) >= 30
    assert sum(name.startswith("neg-") for name in NAMES) >= 6


@pytest.mark.parametrize("name", NAMES)
def test_every_body_parses_and_the_truth_names_each_occurrence_of_its_fleet_once(name):
    delivered = occurrences(name)
    truth = json.loads((FLEETS / name / "truth.json").read_text())
    named = [entry for incident in truth["incidents"] for entry in incident["alerts"]] + truth["noise"]
    keys = [(entry["fingerprint"], parse_time(entry["starts_at"], "starts_at")) for entry in named]
    assert len(keys) == len(set(keys)), f"{name}: an occurrence named twice in truth.json"
    assert set(keys) - delivered == set(), f"{name}: truth names occurrences the fleet never delivers"
    assert delivered - set(keys) == set(), f"{name}: occurrences in no incident and not noise"
    for incident in truth["incidents"]:
        root = (incident["root"]["fingerprint"], parse_time(incident["root"]["starts_at"], "root"))
        assert root in {(a["fingerprint"], parse_time(a["starts_at"], "a")) for a in incident["alerts"]}, (
            f"{name}: {incident['id']}'s root is not its member"
        )


def test_the_committed_split_is_the_rule():
    sys.path.insert(0, str(ROOT / "bench" / "correlate"))
    import heldout

    assert heldout.committed_split() == heldout.split_by_rule()
    split = heldout.committed_split()
    assert sorted(split["heldout"] + split["tuning"]) == NAMES
    assert split["heldout"] and split["tuning"]
