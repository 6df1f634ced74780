"""The incident page's picture of cause and effect: the chain's steps across layer lanes.

One lane per layer (hardware at the top, as the stack sits under the engine, then engine,
serving, platform, process, unknown), one column per step in causal order, an arrow per causal
link between steps labelled with its rule and lag. Drawn as SVG coordinates the template places
(no script: the CSP allows none inline, and the picture must read on a phone without one).
Pure: steps and links in, geometry out.
"""

from __future__ import annotations

from dataclasses import dataclass

LANES = ("hardware", "engine", "serving", "platform", "process", "unknown")
LANE_LABEL_WIDTH = 86
COLUMN_WIDTH = 168
BOX_WIDTH = 148
BOX_HEIGHT = 46
LANE_HEIGHT = 66
TOP = 8
NAME_CHARS = 19  # what a 148-pixel box holds at 12 px
LABEL_CHARS = 26  # an arrow's label longer than its gap is cut to its lag (the list below names the rule)


@dataclass(frozen=True)
class Step:
    """One step of the chain as the page has it: a key (an alert's id, or a name for a storm's
    chain told by name), its alert's name, layer and failure mode, and whether it is the root."""

    key: object
    alertname: str
    layer: str
    failure_mode: str
    root: bool = False
    count: int = 1


@dataclass(frozen=True)
class Box:
    x: int
    y: int
    name: str
    full_name: str
    layer: str
    failure_mode: str
    root: bool
    count: int

    # Where the template puts the box's texts: its name, its mode below, "root" at its corner.
    @property
    def text_x(self) -> int:
        return self.x + 8

    @property
    def name_y(self) -> int:
        return self.y + 19

    @property
    def sub_y(self) -> int:
        return self.y + 36

    @property
    def mark_x(self) -> int:
        return self.x + BOX_WIDTH - 6


@dataclass(frozen=True)
class Arrow:
    path: str
    label: str
    label_x: int
    label_y: int
    title: str


@dataclass(frozen=True)
class Drawing:
    width: int
    height: int
    lanes: tuple[tuple[str, int, int, bool], ...]  # (layer, top y, label y, odd)
    boxes: tuple[Box, ...]
    arrows: tuple[Arrow, ...]
    box_width: int = BOX_WIDTH
    box_height: int = BOX_HEIGHT
    lane_height: int = LANE_HEIGHT


def draw(steps: list[Step], links: list[tuple[object, object, str, float]]) -> Drawing | None:
    """The drawing of `steps` (cause before effect) and `links` (cause key, effect key, rule, lag
    in seconds); None for a chain of fewer than two steps (nothing to draw)."""
    if len(steps) < 2:
        return None
    lanes_used = [lane for lane in LANES if any(_lane_of(step) == lane for step in steps)]
    lane_top = {lane: TOP + i * LANE_HEIGHT for i, lane in enumerate(lanes_used)}
    place: dict[object, tuple[int, int]] = {}
    boxes = []
    for column, step in enumerate(steps):
        x = LANE_LABEL_WIDTH + column * COLUMN_WIDTH + (COLUMN_WIDTH - BOX_WIDTH) // 2
        y = lane_top[_lane_of(step)] + (LANE_HEIGHT - BOX_HEIGHT) // 2
        place[step.key] = (x, y)
        boxes.append(
            Box(
                x,
                y,
                _short(step.alertname),
                step.alertname,
                _lane_of(step),
                step.failure_mode,
                step.root,
                step.count,
            )
        )
    arrows = []
    seen: set[tuple[object, object]] = set()
    for cause, effect, rule, lag in links:
        if cause == effect or (cause, effect) in seen or cause not in place or effect not in place:
            continue
        seen.add((cause, effect))
        arrows.append(_arrow(place[cause], place[effect], rule, lag))
    return Drawing(
        width=LANE_LABEL_WIDTH + len(steps) * COLUMN_WIDTH,
        height=TOP * 2 + len(lanes_used) * LANE_HEIGHT,
        lanes=tuple(
            (lane, lane_top[lane], lane_top[lane] + LANE_HEIGHT // 2 + 4, i % 2 == 1)
            for i, lane in enumerate(lanes_used)
        ),
        boxes=tuple(boxes),
        arrows=tuple(arrows),
    )


def _lane_of(step: Step) -> str:
    return step.layer if step.layer in LANES else "unknown"


def _short(name: str) -> str:
    return name if len(name) <= NAME_CHARS else name[: NAME_CHARS - 1] + "…"


def _arrow(cause: tuple[int, int], effect: tuple[int, int], rule: str, lag: float) -> Arrow:
    """A curve from the cause's box to the effect's: right edge to left edge when the effect is
    to the right (always, in causal order), bowed so arrows between lanes do not hide boxes."""
    (cx, cy), (ex, ey) = cause, effect
    x1, y1 = cx + BOX_WIDTH, cy + BOX_HEIGHT // 2
    x2, y2 = ex, ey + BOX_HEIGHT // 2
    if x2 <= x1:  # a backward link (a cycle the engine broke): from the cause's bottom, below
        x1, y1 = cx + BOX_WIDTH // 2, cy + BOX_HEIGHT
        x2, y2 = ex + BOX_WIDTH // 2, ey + BOX_HEIGHT
        bend = max(y1, y2) + 18
        path = f"M{x1},{y1} C{x1},{bend} {x2},{bend} {x2},{y2}"
        label_x, label_y = (x1 + x2) // 2, bend
    else:
        middle = (x1 + x2) // 2
        path = f"M{x1},{y1} C{middle},{y1} {middle},{y2} {x2 - 2},{y2}"
        label_x, label_y = middle, (y1 + y2) // 2 - 4
    lag_words = f"{round(lag / 60)} min" if abs(lag) >= 60 else f"{round(lag)} s"
    label = f"{rule} · {lag_words}"
    if len(label) > LABEL_CHARS:
        label = lag_words
    return Arrow(path, label, label_x, label_y, f"rule {rule}, lag {lag_words}")
