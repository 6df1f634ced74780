import math

from incidents.evidence.points import finite, pack_points, unpack_points


def test_points_round_trip_exactly_and_compress():
    points = [(1_700_000_000 + 15 * n, 0.5 + 0.001 * (n % 7)) for n in range(1000)]
    blob = pack_points(points)
    assert unpack_points(blob) == points
    assert len(blob) < 16 * len(points) / 2


def test_nan_marks_a_gap_that_finite_drops():
    points = [(1.0, 1.0), (2.0, math.nan), (3.0, 3.0)]
    assert [t for t, _ in finite(unpack_points(pack_points(points)))] == [1.0, 3.0]
