"""plotly.js under a Content-Security-Policy with no inline style: the bundle inserts `<style>`
elements of its own (its global rules; MapLibre's, at load) unless the page already holds an
element of the id it looks for. The rules are read out of the installed bundle once and served as
a stylesheet of ours (`/assets/plotly-<version>.css`); the evidence page holds the ids, so the
bundle finds them and inserts nothing. MapLibre's rules are left out: no chart here is a map."""

from __future__ import annotations

import re
from functools import cache
from pathlib import Path

import plotly

PLOTLY_JS = Path(plotly.__file__).parent / "package_data" / "plotly.min.js"
# The id plotly.js looks up before adding its global rules; `no-inline-styles` tells it the page
# carries them (plotly.js's own switch for strict CSP).
GLOBAL_STYLE_ID = "plotly.js-style-global"
_GLOBAL_RULES = re.compile(r"\{(\"X,X div\":.*?)\};for\((\w+) in (\w+)\)")
_RULE = re.compile(r"\"([^\"]+)\":(?:'([^']*)'|\"([^\"]*)\")")
_SELF_INSERTED = re.compile(
    r'document\.getElementById\("(\w+)"\)\)\{var (\w)=document\.createElement\("style"\);\2\.id="\1"'
)


class PlotlyBundleChanged(RuntimeError):
    """The installed plotly.js no longer reads as this module expects (a new plotly release)."""


@cache
def plotly_styles() -> tuple[str, tuple[str, ...]]:
    """(the stylesheet, the ids of the style elements the bundle would insert by itself)."""
    bundle = PLOTLY_JS.read_text(encoding="utf-8")
    found = _GLOBAL_RULES.search(bundle)
    if found is None:
        raise PlotlyBundleChanged(f"no global style rules found in {PLOTLY_JS}")
    rules = [
        f"{_selector(key)} {{{single or double}}}" for key, single, double in _RULE.findall(found.group(1))
    ]
    css = "\n".join([f"/* plotly.js {plotly.__version__}: its global rules */", *rules])
    return css + "\n", tuple(element_id for element_id, _ in _SELF_INSERTED.findall(bundle))


def _selector(key: str) -> str:
    """As plotly.js expands its keys: X the plot, Y the notifier, a leading comma spaced."""
    return re.sub(r"^,", " ,", key).replace("X", ".js-plotly-plot .plotly").replace("Y", ".plotly-notifier")


def plotly_page_assets() -> dict[str, object]:
    """What a page with charts embeds (`templates/incidents/_plotly.html`): the bundle, its
    stylesheet and the ids of the style elements it would otherwise insert."""
    return {
        "plotly_src": f"/assets/plotly-{plotly.__version__}.min.js",
        "plotly_css": f"/assets/plotly-{plotly.__version__}.css",
        "plotly_style_ids": [GLOBAL_STYLE_ID, *plotly_styles()[1]],
    }
