"""Hand-written fleets the engine was not tuned on: other engines, other labels, other habits.

Written independently of `correlate/simulator/` (no name lists or label builders from it): each
scenario is an `Alertmanager v4` / PagerDuty change-event delivery as a real fleet would send
it, run through `correlate.io`'s readers, with the incidents and roots a human would draw.
"""
from unseen.fleets import SCENARIOS, Scenario

__all__ = ["SCENARIOS", "Scenario"]
