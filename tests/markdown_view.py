"""Markdown as a person sees it in the Airflow UI: rendered with a GitHub-flavoured parser (tables, autolinks).

For tests of text built from service data (approval requests): a row or cell too many, a link, an image or HTML
shows up here as it would on screen.
"""

from __future__ import annotations

from typing import Any

from markdown_it import MarkdownIt

#: Inline tokens that plain text never produces.
MARKUP = {"link_open", "image", "html_inline", "em_open", "strong_open", "s_open", "code_inline"}


def inline_text(token: Any) -> str:
    """The text of an inline token as shown; fails when it holds markup (a link, an image, HTML, emphasis)."""
    children = token.children or []
    markup = {child.type for child in children} & MARKUP
    assert not markup, (markup, token.content)
    return "".join(child.content for child in children)


def table_rows(markdown: str) -> list[list[str]]:
    """The body rows of the tables in ``markdown``, each a list of its cells' texts."""
    rows: list[list[str]] = []
    in_body = False
    for token in MarkdownIt("gfm-like").parse(markdown):
        if token.type in ("tbody_open", "tbody_close"):
            in_body = token.type == "tbody_open"
        elif in_body and token.type == "tr_open":
            rows.append([])
        elif in_body and token.type == "inline":
            rows[-1].append(inline_text(token))
    return rows


def paragraph_text(markdown: str) -> str:
    """The text of ``markdown`` shown as one plain paragraph; fails on any other block (heading, list, quote,
    code, HTML) or markup."""
    tokens = MarkdownIt("gfm-like").parse(markdown)
    assert [t.type for t in tokens] == ["paragraph_open", "inline", "paragraph_close"], [t.type for t in tokens]
    return inline_text(tokens[1])
