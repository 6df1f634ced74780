"""Hand-written fleets the engine was not tuned on: other engines, other labels, other habits.

Written independently of `correlate/simulator/` (no name lists or label builders from it): each
scenario is an `Alertmanager v4` / Grafana / PagerDuty delivery as a real fleet would send it,
run through `correlate.io`'s readers, with the incidents and roots a human would draw.
`fleets` holds the first set (used since to fix the engine, so no longer held out); `fleets2`
the second, still held out, with the checks the engine is known to fail in KNOWN_FAILING.
"""

from unseen import fleets2  # noqa: F401  (registers its scenarios in SCENARIOS)
from unseen.fleets import SCENARIOS, Scenario
from unseen.fleets2 import KNOWN_FAILING, SECOND_SET

__all__ = ["KNOWN_FAILING", "SCENARIOS", "SECOND_SET", "Scenario"]
