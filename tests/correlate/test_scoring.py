import json
import subprocess
import sys
from pathlib import Path

import pytest

from correlate.scoring import (
    alertmanager_anchor,
    grouping_from_document,
    keep_anchor,
    occurrence,
    pairwise,
    root_top1,
)
from correlate.testing import make_alert

ROOT = Path(__file__).resolve().parents[2]


def occ(fp, minute=0):
    return {"fingerprint": fp, "starts_at": f"2026-03-14T02:{minute:02d}:00Z"}


TRUTH = {
    "incidents": [
        {"id": "i1", "root": occ("a"), "alerts": [occ("a"), occ("b"), occ("c")]},
        {"id": "i2", "root": occ("d"), "alerts": [occ("d"), occ("e")]},
    ],
    "noise": [occ("n")],
}


def test_perfect_prediction_scores_one():
    truth = grouping_from_document(TRUTH)
    assert pairwise(truth, truth) == (1.0, 1.0, 1.0)
    assert root_top1(TRUTH, truth) == 1.0


def test_pairwise_counts_pairs_of_occurrences():
    predicted = grouping_from_document(
        {
            "incidents": [
                {"root": occ("a"), "alerts": [occ("a"), occ("b")]},
                {"root": occ("c"), "alerts": [occ("c"), occ("d"), occ("e"), occ("n")]},
            ]
        }
    )
    precision, recall, f1 = pairwise(grouping_from_document(TRUTH), predicted)
    # true pairs: ab ac bc de (4); predicted: ab cd ce cn de dn en (7); shared: ab de (2)
    assert precision == pytest.approx(2 / 7)
    assert recall == pytest.approx(2 / 4)
    assert f1 == pytest.approx(2 * (2 / 7) * 0.5 / (2 / 7 + 0.5))


def test_root_top1_uses_the_best_overlapping_incident():
    predicted = grouping_from_document(
        {
            "incidents": [
                {"root": occ("b"), "alerts": [occ("a"), occ("b"), occ("c")]},
                {"root": occ("d"), "alerts": [occ("d"), occ("e")]},
            ]
        }
    )
    assert root_top1(TRUTH, predicted) == 0.5


def test_times_match_as_instants_not_strings():
    assert occurrence("f", "2026-03-14T02:00:00Z") == occurrence("f", "2026-03-14T02:00:00.000000000+00:00")


def test_anchors_group_by_name_and_by_window_naming_the_earliest():
    alerts = [
        make_alert("A", "02:00", cluster="c"),
        make_alert("A", "02:40", cluster="c", pod="x"),
        make_alert("B", "02:05", cluster="c"),
    ]
    am = alertmanager_anchor(alerts)
    assert sorted(len(g) for g in am.groups) == [1, 2]
    keep = keep_anchor(alerts)
    assert sorted(len(g) for g in keep.groups) == [1, 2]
    big = next(i for i, g in enumerate(keep.groups) if len(g) == 2)
    assert keep.roots[big] == occurrence(alerts[0].fingerprint, alerts[0].starts_at)


def test_score_cli_compares_engine_with_both_anchors(tmp_path):
    labels = {"alertname": "LLMContainerOOMKilled", "cluster": "c", "pod": "vllm-a-7d9f8b6c5d-x2k4p"}
    body = {
        "version": "4",
        "status": "firing",
        "alerts": [
            {
                "status": "firing",
                "labels": labels,
                "annotations": {},
                "startsAt": "2026-03-14T02:00:00Z",
                "fingerprint": "f1",
            },
            {
                "status": "firing",
                "labels": {**labels, "alertname": "KubePodCrashLooping"},
                "annotations": {},
                "startsAt": "2026-03-14T02:02:00Z",
                "fingerprint": "f2",
            },
        ],
    }
    (tmp_path / "alerts.jsonl").write_text(json.dumps(body) + "\n")
    truth = {
        "incidents": [
            {
                "id": "1",
                "root": {"fingerprint": "f1", "starts_at": "2026-03-14T02:00:00Z"},
                "alerts": [
                    {"fingerprint": "f1", "starts_at": "2026-03-14T02:00:00Z"},
                    {"fingerprint": "f2", "starts_at": "2026-03-14T02:02:00Z"},
                ],
            }
        ],
        "noise": [],
    }
    (tmp_path / "truth.json").write_text(json.dumps(truth))
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "correlate.score",
            str(tmp_path / "truth.json"),
            str(tmp_path / "alerts.jsonl"),
            "--json",
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    )
    rows = {row["method"]: row for row in json.loads(out.stdout)}
    assert set(rows) == {"engine", "alertmanager", "keep-15m"}
    assert rows["engine"]["f1"] == 1.0 and rows["engine"]["root_top1"] == 1.0
    assert rows["alertmanager"]["f1"] == 0.0
