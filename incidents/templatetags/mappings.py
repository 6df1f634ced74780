"""Template filters for mappings senders fill (labels, annotations, scope)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from django import template

register = template.Library()


@register.filter
def pairs(mapping: Any) -> list[tuple[Any, Any]]:
    """`{% for key, value in labels|pairs %}`: `labels.items` in a template is the label named
    "items" when a sender sent one (Django looks keys up before methods), and the loop failed."""
    return list(mapping.items()) if isinstance(mapping, Mapping) else []
