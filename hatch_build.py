"""Build-time hook (hatchling's custom metadata hook): the package's long description is the README rendered for
an index page.

The README links to ``docs/*.md`` and to its own sections with relative links, which work on a checkout but
break on a package index page, and the project has no public URL to make them absolute. So the description
the sdist and the wheel carry (their ``PKG-INFO`` / ``METADATA``) is the README with every relative link
turned into text, outside code blocks and code spans:

* ``[text](docs/FILE.md#anchor)`` becomes ``text (`docs/FILE.md`)``, just ```docs/FILE.md``` when the text
  is that path, ```docs/FILE.md` §4`` when the text is ``FILE.md §4``: the ``docs/`` directory ships inside the wheel as ``kafkalog/docs/``
  (``python -m kafkalog.docs`` prints where it is installed) and at ``docs/`` in the sdist; a note under the
  title says so;
* ``[text](#section)`` becomes ``*text*`` (the section's title, on the same page);
* an image or HTML ``href``/``src`` with a relative target, or a reference-style link definition with one, is
  not rewritten: the build fails (:class:`ValueError`) rather than publish a broken link.

Absolute links (``http(s)://``, ``mailto:``) are kept. Only the standard library is used: the hook runs in
the build's isolated environment, where hatchling is the only package.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from hatchling.metadata.plugin.interface import MetadataHookInterface

#: The note put under the README's title in the long description.
DOCS_NOTE = (
    "> `docs/…` below names the documentation shipped with this package: in the wheel it is installed as\n"
    "> `kafkalog/docs/` (`python -m kafkalog.docs` prints the directory), in the sdist it is `docs/`.\n"
)

_ABSOLUTE = re.compile(r"^(?:[a-zA-Z][a-zA-Z0-9+.-]*:|//)")  # a scheme (http:, mailto:) or a network path
_LINK = re.compile(r"(!?)\[([^\]\n]+)\]\(([^)\s]+)\)")
_FENCE = re.compile(r"^\s*(```|~~~)")
_CODE_SPAN = re.compile(r"(`+)(?:(?!\1).)+?\1")
_HTML_TARGET = re.compile(r"""\b(?:href|src)\s*=\s*["']?([^"'\s>]+)""", re.IGNORECASE)
_DEFINITION = re.compile(r"^\s{0,3}\[[^\]]+\]:\s*(\S+)")


def is_relative(target: str) -> bool:
    """Whether a link target is relative (a path or a ``#fragment``): it breaks on an index page."""
    return not _ABSOLUTE.match(target)


def _rewrite_link(match: re.Match[str]) -> str:
    image, text, target = match.groups()
    if not is_relative(target):
        return match.group(0)
    if image:
        raise ValueError(f"README image with a relative target cannot be shown on an index page: {target}")
    if target.startswith("#"):
        return f"*{text}*"
    path = target.split("#", 1)[0]
    if text.strip("`") == path:
        return f"`{path}`"
    name = path.rsplit("/", 1)[-1]
    for head in (name, f"`{name}`"):
        if text.startswith(head):  # "formats.md §18" -> "`docs/formats.md` §18"
            return f"`{path}`{text[len(head) :]}"
    return f"{text} (`{path}`)"


def _prose_pieces(line: str) -> list[tuple[bool, str]]:
    """``line`` cut into (is prose, text) pieces: code spans are not prose."""
    pieces, last = [], 0
    for span in _CODE_SPAN.finditer(line):
        pieces.append((True, line[last : span.start()]))
        pieces.append((False, span.group(0)))
        last = span.end()
    pieces.append((True, line[last:]))
    return pieces


def relative_links(markdown: str) -> list[str]:
    """Every relative link target in ``markdown`` outside code blocks and code spans (inline links, images,
    HTML ``href``/``src`` and reference definitions)."""
    found: list[str] = []
    fenced = False
    for line in markdown.splitlines():
        if _FENCE.match(line):
            fenced = not fenced
            continue
        if fenced:
            continue
        definition = _DEFINITION.match(line)
        if definition and is_relative(definition.group(1)):
            found.append(definition.group(1))
        for prose, piece in _prose_pieces(line):
            if prose:
                found += [m.group(3) for m in _LINK.finditer(piece) if is_relative(m.group(3))]
                found += [t for t in _HTML_TARGET.findall(piece) if is_relative(t)]
    return found


def render_long_description(readme: str) -> str:
    """The README as an index page shows it (see the module doc); raises :class:`ValueError` if a relative
    link would be left."""
    out: list[str] = []
    fenced = False
    noted = False
    for line in readme.splitlines(keepends=True):
        if _FENCE.match(line):
            fenced = not fenced
        elif not fenced:
            line = "".join(
                _LINK.sub(_rewrite_link, piece) if prose else piece for prose, piece in _prose_pieces(line)
            )
        out.append(line)
        if not noted and line.startswith("# "):
            out.append("\n" + DOCS_NOTE)
            noted = True
    text = "".join(out)
    left = relative_links(text)
    if left:
        raise ValueError(f"relative links left in the long description (they break on an index page): {left}")
    return text


class ReadmeMetadataHook(MetadataHookInterface):
    """Sets ``readme`` (listed in ``project.dynamic``) to :func:`render_long_description` of README.md."""

    def update(self, metadata: dict[str, Any]) -> None:
        """Hatchling's hook: fills in the dynamic ``readme``."""
        readme = (Path(self.root) / "README.md").read_text(encoding="utf-8")
        metadata["readme"] = {"content-type": "text/markdown", "text": render_long_description(readme)}
