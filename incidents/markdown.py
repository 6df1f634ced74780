"""Markdown people and packs write (runbooks now, postmortems next), as HTML a page may show:
markdown-it-py renders CommonMark with tables and strikethrough, raw HTML in the source shown as
text, and nh3 (Ammonia) keeps only the tags, attributes and link schemes listed here, whatever
the renderer let through."""

from __future__ import annotations

import html
from urllib.parse import urlsplit

import nh3
from django.utils.safestring import SafeString, mark_safe
from markdown_it import MarkdownIt

TAGS = frozenset(
    {
        "a", "abbr", "blockquote", "br", "code", "del", "em", "h1", "h2", "h3", "h4", "h5", "h6",
        "hr", "li", "ol", "p", "pre", "s", "strong", "sub", "sup", "table", "tbody", "td", "th",
        "thead", "tr", "ul",
    }
)  # fmt: skip
ATTRIBUTES = {"a": {"href", "title"}, "code": {"class"}, "th": {"align"}, "td": {"align"}, "ol": {"start"}}
SCHEMES = frozenset({"http", "https", "mailto"})

_renderer = MarkdownIt("commonmark", {"html": False, "linkify": False, "typographer": False}).enable(
    ["table", "strikethrough"]
)


def markdown_html(source: str) -> SafeString:
    """HTML of `source`, safe to put in a page as it is."""
    rendered = _renderer.render(source)
    cleaned = nh3.clean(
        rendered,
        tags=set(TAGS),
        attributes={tag: set(names) for tag, names in ATTRIBUTES.items()},
        url_schemes=set(SCHEMES),
        link_rel="noopener noreferrer",
        strip_comments=True,
    )
    return mark_safe(cleaned)  # noqa: S308 - sanitised by nh3 just above


def safe_href(url: str) -> str | None:
    """`url` when a page may link to it as it is: http(s), or a path or anchor of this site."""
    parts = urlsplit(html.unescape(url))
    if parts.scheme in ("http", "https") or (
        not parts.scheme and not parts.netloc and url.startswith(("/", "#")) and not url.startswith("//")
    ):
        return url
    return None


def markdown_escaped(text: object) -> str:
    """Text a sender wrote, safe inside Markdown: no markup of its own survives (the renderer
    escapes HTML; this keeps `[`, `*`, `|` and backticks from making links, emphasis or cells)."""
    return "".join("\\" + c if c in "\\`*_{}[]()#+!|<>" else c for c in str(text)).replace("\n", " ")
