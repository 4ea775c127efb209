"""Safe XML reading shared by the XML parsers (``nccl_topo_xml``, ``hwloc_xml``).

``read_xml(kind, text)`` parses an uploaded document with :mod:`defusedxml` (entity
declarations, external entities and references are refused, so "billion laughs" and XXE
uploads fail with a :class:`ParseError` instead of being expanded) and returns a light tree of
:class:`Node` objects that remember the 1-based line each element starts on, so the XML
parsers can name lines in their own errors.

Line numbers are those of :func:`clean_lines`: the text is re-joined from those lines before
parsing, so expat's positions and the ParseError line numbers agree with what the user sent.

Truncated documents. Captures pasted from issues are often cut off (``*partial*.xml``: the
closing ``</pci></cpu></system>`` are missing). Every element that was complete before the cut
is known exactly, so instead of refusing the whole upload the document is *recovered*: the
elements read so far are kept (still-open ones keep the children they got) and
``XmlDoc.truncated_at`` names the line where the document stops and the tags left open; the
callers turn it into a warning. Only a document that ends early is recovered this way (expat
"no element found" / "unclosed token" at the end of the text); a broken document (mismatched
tag, bad attribute, junk in the middle) raises ParseError at the line expat reports.
Trailing text after the closing root tag (a markdown ``**`` pasted along) is ignored with a
note in ``XmlDoc.notes``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from xml.etree.ElementTree import ParseError as _ExpatError

from defusedxml import DefusedXmlException
from defusedxml.ElementTree import DefusedXMLParser

from apps.domain.errors import ParseError
from apps.domain.parsers.text import clean_lines

# expat error codes (pyexpat.errors) that mean "the text ended before the document did".
_ERR_NO_ELEMENTS = 3
_ERR_UNCLOSED_TOKEN = 5
_ERR_PARTIAL_CHAR = 6
_ERR_UNCLOSED_CDATA = 20
_ENDED_EARLY = {_ERR_NO_ELEMENTS, _ERR_UNCLOSED_TOKEN, _ERR_PARTIAL_CHAR, _ERR_UNCLOSED_CDATA}

_REASONS = {
    2: "the document is not well-formed XML (syntax error)",
    4: "the document is not well-formed XML (bad character in a tag or attribute)",
    7: "mismatched closing tag",
    8: "an attribute is given twice in the same tag",
    9: "text after the end of the document element",
    11: "undefined entity (only &lt; &gt; &amp; &quot; &apos; are allowed)",
}


class Node:
    """One XML element: ``tag``, ``attrib`` (dict), ``children`` (list), ``line`` (1-based), ``text``."""

    __slots__ = ("tag", "attrib", "children", "line", "_text")

    def __init__(self, tag: str, attrib: dict, line: int) -> None:
        self.tag = tag
        self.attrib = attrib
        self.children: list[Node] = []
        self.line = line
        self._text: list[str] | None = None

    @property
    def text(self) -> str:
        return "".join(self._text) if self._text else ""

    def get(self, name: str, default=None):
        return self.attrib.get(name, default)

    def __repr__(self) -> str:  # debugging aid
        return f"<Node {self.tag} line {self.line} {self.attrib!r}>"


@dataclass
class XmlDoc:
    root: Node
    lines: list[str]
    truncated_at: int | None = None  # line where a truncated document stops
    open_tags: tuple[str, ...] = ()  # tags left open by the truncation, innermost first
    notes: list[str] = field(default_factory=list)


class _Builder:
    """Target for DefusedXMLParser that builds :class:`Node` trees with line numbers."""

    def __init__(self, text_tags: frozenset[str] | None = None) -> None:
        self.expat = None  # set once the parser exists
        self.text_tags = text_tags
        self.root: Node | None = None
        self.stack: list[Node] = []
        self.root_closed = False

    def start(self, tag, attrib):
        node = Node(tag, attrib, self.expat.CurrentLineNumber)
        if self.stack:
            self.stack[-1].children.append(node)
        elif self.root is None:
            self.root = node
        self.stack.append(node)
        if self.text_tags is not None:  # character data only inside the elements whose text is read
            self.expat.CharacterDataHandler = self.data if tag in self.text_tags else None
        return node

    def end(self, tag):
        node = self.stack.pop()
        if not self.stack:
            self.root_closed = True
        if self.text_tags is not None:  # back in the parent: its text is read if its tag's is
            self.expat.CharacterDataHandler = (self.data if self.stack and self.stack[-1].tag in self.text_tags
                                               else None)
        return node

    def data(self, data):
        if self.stack:
            top = self.stack[-1]
            if top._text is None:
                top._text = [data]
            else:
                top._text.append(data)

    def close(self):
        return self.root


def _line_text(lines: list[str], line_no: int) -> str:
    return lines[line_no - 1] if 1 <= line_no <= len(lines) else ""


def _last_content_line(lines: list[str]) -> int:
    for i in range(len(lines), 0, -1):
        if lines[i - 1].strip():
            return i
    return 0


def read_xml(kind: str, text: str, text_tags: frozenset[str] | None = None) -> XmlDoc:
    """Parse ``text`` safely; raise :class:`ParseError` (with ``kind``) when it is not usable XML.

    ``text_tags``: the tags whose ``text`` the caller reads; the character data of every other
    element (the indentation between tags, most of expat's calls) is never handed to Python, and
    their ``text`` is ``""``. ``None`` keeps the text of every element."""
    lines = clean_lines(text)
    if not any(line.strip() for line in lines):
        raise ParseError(kind, 0, "", "the input is empty")
    builder = _Builder(text_tags)
    parser = DefusedXMLParser(target=builder)
    expat = parser.parser
    builder.expat = expat
    # Skip ElementTree's per-tag Python wrapper: wire expat straight to the builder (attributes
    # as the dict expat builds). The defusedxml handlers (entity declarations, external
    # references) stay installed.
    expat.ordered_attributes = 0
    expat.StartElementHandler = builder.start
    expat.EndElementHandler = builder.end
    expat.CharacterDataHandler = builder.data if text_tags is None else None
    doc_text = "\n".join(lines)
    try:
        parser.feed(doc_text)
        parser.close()
    except DefusedXmlException as exc:
        line_no = expat.CurrentLineNumber or 1
        raise ParseError(
            kind, line_no, _line_text(lines, line_no),
            "the document declares entities or external references, which are refused for safety "
            f"({type(exc).__name__}); NCCL and hwloc never write them",
        ) from None
    except _ExpatError as exc:
        line_no, _col = getattr(exc, "position", (0, 0))
        code = getattr(exc, "code", None)
        if builder.root_closed and builder.root is not None:
            # expat reports junk after the root element as "junk after document element" or,
            # for text such as a pasted markdown "**", as an invalid token.
            doc = XmlDoc(builder.root, lines)
            doc.notes.append(
                f"text after the closing </{builder.root.tag}> (line {line_no}) was ignored"
            )
            return doc
        if code in _ENDED_EARLY and builder.root is not None and builder.stack:
            stop = _last_content_line(lines)
            open_tags = tuple(n.tag for n in reversed(builder.stack))
            return XmlDoc(builder.root, lines, truncated_at=stop, open_tags=open_tags)
        if code in _ENDED_EARLY:
            line_no = min(line_no or len(lines), _last_content_line(lines))  # expat points past the end
            raise ParseError(kind, line_no, _line_text(lines, line_no),
                             "no XML element found: the text is not an XML document") from None
        if builder.root is None and line_no <= 1 and code in (2, 4):
            raise ParseError(kind, line_no, _line_text(lines, line_no),
                             "the text is not an XML document (it should start with '<?xml' or a tag)") from None
        reason = _REASONS.get(code) or f"the document is not well-formed XML ({str(exc).split(':')[0]})"
        raise ParseError(kind, line_no, _line_text(lines, line_no), reason) from None
    except (ValueError, RecursionError, MemoryError) as exc:  # expat refusing odd input
        raise ParseError(kind, 0, "", f"the document could not be read as XML ({type(exc).__name__})") from None
    if builder.root is None:
        raise ParseError(kind, 0, "", "no XML element found: the text is not an XML document")
    return XmlDoc(builder.root, lines)


def truncation_warning(doc: XmlDoc) -> str | None:
    """The warning a parser adds for a recovered truncated document, or None."""
    if doc.truncated_at is None:
        return None
    tags = ", ".join(f"<{t}>" for t in doc.open_tags)
    return (
        f"the document is truncated: it stops at line {doc.truncated_at} with {tags} never closed; "
        "the elements complete before that point were read, anything after it is missing"
    )
