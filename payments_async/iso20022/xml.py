"""ISO 20022 XML for the service's messages, both ways (the ``xml`` extra).

The service speaks ISO 20022 as JSON whose keys follow one rule from ISO's XML tags: the
first word of the tag is lower-cased (``StrtNm`` -> ``strtNm``, ``BICFI`` -> ``bicfi``,
``FIToFICstmrCdtTrf`` -> ``fitoFICstmrCdtTrf``). This module converts through that JSON
form (``msgspec.to_builtins``), so every field a message struct has is carried without a
table per field:

- `to_xml` writes pacs.008, camt.056, pacs.028, pacs.002 and camt.029 as ISO documents in
  the namespaces of the versions the service's paths name (`NAMESPACES`);
- `from_xml` reads a pacs.008, camt.056 or pacs.028 document back into its struct;
- `check_xml` lists what an XSD finds wrong with a document.

With ``xsd=`` (a path to the official schema of the message's version, which ISO
distributes), element names and order come from the schema's content model and the
document is validated against it. Without it, names and order come from the message
structs (their fields are declared in ISO's sequence order, which the test suite checks
against the official schemas) and nothing is validated.

Importing this module without the extra raises ``ImportError`` naming what to install.
"""

from __future__ import annotations

import functools
import re
import xml.etree.ElementTree as ET
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final, Protocol, TypeAlias

import msgspec

from .._errors import Problem, ValidationError
from ._common import decode_with
from .camt029 import Camt029
from .camt056 import Camt056
from .pacs002 import Pacs002
from .pacs008 import Pacs008
from .pacs028 import Pacs028

try:
    import xmlschema
except ImportError as exc:  # pragma: no cover - exercised in a subprocess test
    raise ImportError(
        "ISO 20022 XML needs the 'xml' extra: pip install 'payments-async[xml]'"
    ) from exc

__all__ = [
    "NAMESPACES",
    "XmlMessage",
    "check_xml",
    "from_xml",
    "json_key",
    "to_xml",
]

XmlMessage: TypeAlias = Pacs008 | Camt056 | Pacs028 | Pacs002 | Camt029
"""The messages `to_xml` writes."""

NAMESPACES: Final[Mapping[type[XmlMessage], str]] = {
    Pacs008: "urn:iso:std:iso:20022:tech:xsd:pacs.008.001.10",
    Camt056: "urn:iso:std:iso:20022:tech:xsd:camt.056.001.08",
    Pacs028: "urn:iso:std:iso:20022:tech:xsd:pacs.028.001.03",
    Pacs002: "urn:iso:std:iso:20022:tech:xsd:pacs.002.001.12",
    Camt029: "urn:iso:std:iso:20022:tech:xsd:camt.029.001.09",
}
"""The ISO namespace each message is written in: the versions the service's paths name."""

# XML text is all strings: the decoders read numbers and booleans from text (strict=False),
# and are otherwise those of decode_pacs008 / decode_camt056 (unknown fields refused).
_Readable: TypeAlias = Pacs008 | Camt056 | Pacs028
_READERS: Final[Mapping[str, tuple[type[_Readable], Any, str]]] = {
    NAMESPACES[Pacs008]: (Pacs008, msgspec.json.Decoder(Pacs008, strict=False), "pacs.008 message"),
    NAMESPACES[Camt056]: (Camt056, msgspec.json.Decoder(Camt056, strict=False), "camt.056 message"),
    NAMESPACES[Pacs028]: (Pacs028, msgspec.json.Decoder(Pacs028, strict=False), "pacs.028 message"),
}

_FIRST_WORD: Final = re.compile(r"[A-Z]+[a-z0-9]*")
# The inverse of the rule needs to know which first words are acronyms: ISO's own
# abbreviations that a tag starts with. Everything else gets its first letter upper-cased.
_ACRONYMS: Final[Mapping[str, str]] = {
    "bicfi": "BICFI",
    "fito": "FITo",
    "iban": "IBAN",
    "lei": "LEI",
    "uetr": "UETR",
}
_VALUE_KEY: Final = "value"  # the text of an element with attributes (amounts: Ccy)
_INDEX: Final = re.compile(r"^(.*?)\[(\d+)\]$")
_CLARK: Final = re.compile(r"\{[^}]*\}")
# What XML 1.0 cannot carry, even escaped.
_NOT_XML: Final = re.compile("[^\t\n\r\x20-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")


def json_key(tag: str) -> str:
    """The JSON key of an ISO XML tag: its first word lower-cased.

    Args:
        tag: a local XML element or attribute name (``StrtNm``, ``BICFI``, ``Ccy``).

    Returns:
        ``strtNm``, ``bicfi``, ``ccy``; ``FIToFICstmrCdtTrf`` gives ``fitoFICstmrCdtTrf``.
    """
    match = _FIRST_WORD.match(tag)
    if match is None:
        return tag
    return match.group().lower() + tag[match.end() :]


def _xml_tag(key: str) -> str:
    # The tag of a JSON key when no schema names it: the inverse of json_key.
    match = re.match(r"[a-z0-9]+", key)
    if match is None:
        return key
    word = match.group()
    return _ACRONYMS.get(word, word[:1].upper() + word[1:]) + key[match.end() :]


# --- the content model: from an XSD or from the message structs ---------------------------


class _Node(Protocol):
    """An element type: its attributes, whether it holds text, its children in order."""

    @property
    def attributes(self) -> Mapping[str, str]: ...  # JSON key -> XML name

    @property
    def has_text(self) -> bool: ...

    @property
    def children(self) -> Mapping[str, _Child]: ...  # JSON key -> child, in order


@dataclass(frozen=True, slots=True)
class _Child:
    tag: str
    many: bool
    node: Callable[[], _Node]


class _SchemaNode:
    """An element type read from an XSD (xmlschema)."""

    def __init__(self, xsd_type: Any) -> None:
        self._type = xsd_type

    @property
    def attributes(self) -> Mapping[str, str]:
        if not self._type.is_complex():
            return {}
        return {json_key(a.local_name): a.local_name for a in self._type.attributes.values()}

    @property
    def has_text(self) -> bool:
        return bool(self._type.is_simple() or self._type.has_simple_content())

    @functools.cached_property
    def children(self) -> Mapping[str, _Child]:
        if self.has_text or self._type.content is None:
            return {}
        out: dict[str, _Child] = {}
        for elem in self._type.content.iter_elements():
            if not isinstance(elem, xmlschema.XsdElement):
                continue  # xs:any (supplementary data) has no JSON form here
            many = elem.max_occurs is None or elem.max_occurs > 1
            out[json_key(elem.local_name)] = _Child(
                elem.local_name, many, functools.partial(_schema_node, elem.type)
            )
        return out


@functools.cache
def _schema_node(xsd_type: Any) -> _SchemaNode:
    return _SchemaNode(xsd_type)


_SCALAR: Final = msgspec.inspect.AnyType()


class _StructNode:
    """An element type read from a message struct: fields in declaration order."""

    def __init__(self, info: msgspec.inspect.Type) -> None:
        self._info = info

    @property
    def _fields(self) -> tuple[msgspec.inspect.Field, ...]:
        info = self._info
        return info.fields if isinstance(info, msgspec.inspect.StructType) else ()

    @property
    def attributes(self) -> Mapping[str, str]:
        if not self.has_text:
            return {}
        names = (f.encode_name for f in self._fields if f.encode_name != _VALUE_KEY)
        return {name: _xml_tag(name) for name in names}

    @property
    def has_text(self) -> bool:
        fields = self._fields
        return not fields or any(f.encode_name == _VALUE_KEY for f in fields)

    @functools.cached_property
    def children(self) -> Mapping[str, _Child]:
        if self.has_text:
            return {}
        out: dict[str, _Child] = {}
        for field in self._fields:
            info, many = _unwrap(field.type)
            out[field.encode_name] = _Child(
                _xml_tag(field.encode_name), many, functools.partial(_struct_node, info)
            )
        return out


def _unwrap(info: msgspec.inspect.Type) -> tuple[msgspec.inspect.Type, bool]:
    many = False
    while True:
        if isinstance(info, msgspec.inspect.Metadata):
            info = info.type
        elif isinstance(info, msgspec.inspect.UnionType):
            kinds = [t for t in info.types if not isinstance(t, msgspec.inspect.NoneType)]
            info = kinds[0] if len(kinds) == 1 else _SCALAR
        elif isinstance(info, msgspec.inspect.ListType) and not many:
            info, many = info.item_type, True
        else:
            return info, many


def _struct_node(info: msgspec.inspect.Type) -> _StructNode:
    if isinstance(info, msgspec.inspect.StructType):
        return _class_node(info.cls)
    return _StructNode(info)


@functools.cache
def _class_node(cls: type[msgspec.Struct]) -> _StructNode:
    return _StructNode(msgspec.inspect.type_info(cls))


def _message_node(kind: type[XmlMessage]) -> _Node:
    return _class_node(kind)


@functools.cache
def _load_schema(path: str, _stamp: tuple[int, int]) -> Any:
    try:
        return xmlschema.XMLSchema(path, allow="local")
    except (xmlschema.XMLSchemaException, OSError, ET.ParseError) as exc:
        raise ValidationError(
            [Problem("$", f"cannot read the XSD {path}: {exc}")], message="unusable XSD"
        ) from exc


def _schema(xsd: str | Path) -> Any:
    path = Path(xsd).resolve()
    try:
        stat = path.stat()
    except OSError as exc:
        raise ValidationError(
            [Problem("$", f"cannot read the XSD {path}: {exc.strerror}")], message="unusable XSD"
        ) from exc
    return _load_schema(str(path), (stat.st_mtime_ns, stat.st_size))


def _document_node(schema: Any, namespace: str) -> _Node:
    if schema.target_namespace != namespace:
        raise ValidationError(
            [Problem("$", f"the XSD is for {schema.target_namespace}, the message is {namespace}")],
            message="wrong XSD",
        )
    return _schema_node(schema.elements["Document"].type)


# --- writing ----------------------------------------------------------------------------


def to_xml(message: XmlMessage, *, xsd: str | Path | None = None) -> bytes:
    """The message as an ISO 20022 XML document (UTF-8, indented).

    Args:
        message: a pacs.008, camt.056 or pacs.028 (as built or decoded), or a pacs.002
            or camt.029 answer of the service.
        xsd: the official XSD of the message's version (see `NAMESPACES`). When given,
            element names and order come from it and the document is validated against
            it; without it they come from the message struct and nothing is checked.

    Returns:
        The document, ``<Document xmlns="urn:iso:std:iso:20022:tech:xsd:...">``.

    Raises:
        ValidationError: a field has no element in the schema, a text holds a character
            XML cannot carry, or (with ``xsd``) the document breaks the schema; every
            problem is listed with its JSON path. An
            answer that is not a complete ISO document (a pacs.002 without ``grpHdr``)
            is refused this way, naming what is missing.
        TypeError: the message is not one of the five kinds.
    """
    kind = type(message)
    if kind not in NAMESPACES:
        names = ", ".join(k.__name__ for k in NAMESPACES)
        raise TypeError(f"to_xml takes {names}, not {kind.__name__}")
    namespace = NAMESPACES[kind]
    schema = _schema(xsd) if xsd is not None else None
    node = _message_node(kind) if schema is None else _document_node(schema, namespace)
    # Tags are written unqualified under a default xmlns: ElementTree cannot write a
    # default namespace beside unqualified attributes (Ccy) any other way.
    root = ET.Element("Document", xmlns=namespace)
    problems: list[Problem] = []
    _write(root, node, msgspec.to_builtins(message), "$", namespace, problems)
    if problems:
        raise ValidationError(problems, message="cannot write the message as ISO XML")
    ET.indent(root)
    data: bytes = ET.tostring(root, encoding="UTF-8", xml_declaration=True)
    if schema is not None:
        problems = _problems(schema, _parse(data))
        if problems:
            raise ValidationError(problems, message=f"not a valid {_version(namespace)} document")
    return data


def _write(
    parent: ET.Element,
    node: _Node,
    value: Mapping[str, Any],
    path: str,
    namespace: str,
    problems: list[Problem],
) -> None:
    children = node.children
    problems.extend(
        Problem(f"{path}.{key}", f"no ISO element for this field in {_version(namespace)}")
        for key in value
        if key not in children
    )
    for key, child in children.items():
        item = value.get(key)
        if item is None:
            continue
        items = item if isinstance(item, list) else [item]
        for index, one in enumerate(items):
            if one is None:
                continue  # a null in a list (addtlInf) has no XML form
            where = f"{path}.{key}[{index}]" if child.many else f"{path}.{key}"
            elem = ET.SubElement(parent, child.tag)
            _fill(elem, child.node(), one, where, namespace, problems)


def _fill(
    elem: ET.Element,
    node: _Node,
    value: Any,
    path: str,
    namespace: str,
    problems: list[Problem],
) -> None:
    if not isinstance(value, dict):
        elem.text = _text(value, path, problems)
        return
    if not node.has_text:
        _write(elem, node, value, path, namespace, problems)
        return
    attributes = node.attributes
    for key, item in value.items():
        if key == _VALUE_KEY:
            elem.text = _text(item, f"{path}.{key}", problems)
        elif key in attributes:
            elem.set(attributes[key], _text(item, f"{path}.{key}", problems))
        else:
            problems.append(Problem(f"{path}.{key}", "no ISO attribute for this field"))


def _text(value: Any, path: str, problems: list[Problem]) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    text = str(value)
    bad = _NOT_XML.search(text)
    if bad is not None:
        problems.append(Problem(path, f"U+{ord(bad.group()):04X} cannot be written in XML"))
    return text


# --- reading ----------------------------------------------------------------------------


def from_xml(data: bytes, *, xsd: str | Path | None = None) -> Pacs008 | Camt056 | Pacs028:
    """Read a pacs.008.001.10, camt.056.001.08 or pacs.028.001.03 document into its struct.

    The namespace of ``<Document>`` says which message it is. The result is decoded as
    `decode_pacs008` / `decode_camt056` / `decode_pacs028` decode JSON (a field the struct
    does not model is
    refused), numbers read from their text; call ``validate()`` on it for the ISO/SEPA
    rules before sending it.

    Args:
        data: the XML document.
        xsd: the official XSD of the document's version; when given, the document is
            validated against it first and its content model reads the elements.

    Returns:
        A `Pacs008`, a `Camt056` or a `Pacs028`.

    Raises:
        ValidationError: the bytes are not XML, not one of the three documents, break the
            XSD, or hold an element the message struct does not model; every problem
            is listed with its JSON path.
    """
    root = _parse(data)
    namespace, _, local = str(root.tag)[1:].partition("}")
    if local != "Document" or namespace not in _READERS:
        *others, last = (_version(ns) for ns in _READERS)
        expected = f"{', '.join(others)} or {last}"
        raise ValidationError(
            [
                Problem(
                    "$",
                    f"not a {expected} document (root {_CLARK.sub('', str(root.tag))!r}"
                    f" in namespace {namespace or 'none'!r})",
                )
            ],
            message="unsupported XML document",
        )
    kind, decoder, what = _READERS[namespace]
    if xsd is None:
        node = _message_node(kind)
    else:
        schema = _schema(xsd)
        node = _document_node(schema, namespace)
        problems = _problems(schema, root)
        if problems:
            raise ValidationError(problems, message=f"not a valid {_version(namespace)} document")
    problems = []
    tree = _read(root, node, "$", namespace, problems)
    if problems:
        raise ValidationError(problems, message=f"cannot read the {_version(namespace)} document")
    message: _Readable = decode_with(decoder, msgspec.json.encode(tree), what)
    return message


def _parse(data: bytes) -> Any:
    try:
        return _parse_lxml(data)
    except ImportError:
        pass
    try:
        # The standard parser resolves no external entity; expat refuses entity expansion
        # bombs.
        return ET.fromstring(data)  # noqa: S314
    except ET.ParseError as exc:
        raise ValidationError([Problem("$", f"not XML: {exc}")], message="malformed XML") from exc


def _parse_lxml(data: bytes) -> Any:
    from lxml import etree  # lxml is optional: used when present

    parser = etree.XMLParser(resolve_entities=False, no_network=True, remove_comments=True)
    try:
        return etree.fromstring(data, parser)
    except etree.XMLSyntaxError as exc:
        raise ValidationError([Problem("$", f"not XML: {exc}")], message="malformed XML") from exc


def _read(
    elem: Any, node: _Node, path: str, namespace: str, problems: list[Problem]
) -> dict[str, Any]:
    by_tag = {child.tag: (key, child) for key, child in node.children.items()}
    out: dict[str, Any] = {}
    for sub in elem:
        if not isinstance(sub.tag, str):
            continue  # comments and processing instructions
        sub_ns, _, tag = sub.tag[1:].partition("}")
        found = by_tag.get(tag) if sub_ns == namespace else None
        if found is None:
            problems.append(Problem(f"{path}.{json_key(tag)}", f"unknown element {tag}"))
            continue
        key, child = found
        child_node = child.node()
        if child.many:
            items = out.setdefault(key, [])
            where = f"{path}.{key}[{len(items)}]"
            items.append(_value(sub, child_node, where, namespace, problems))
        elif key in out:
            problems.append(Problem(f"{path}.{key}", f"{tag} is repeated; ISO allows one"))
        else:
            out[key] = _value(sub, child_node, f"{path}.{key}", namespace, problems)
    return out


def _value(elem: Any, node: _Node, path: str, namespace: str, problems: list[Problem]) -> Any:
    if not node.has_text:
        return _read(elem, node, path, namespace, problems)
    text = elem.text or ""
    if not node.attributes:
        return text
    value: dict[str, str] = {_VALUE_KEY: text}
    names = {xml_name: key for key, xml_name in node.attributes.items()}
    for name, item in elem.attrib.items():
        if name in names:
            value[names[name]] = item
        else:
            problems.append(Problem(f"{path}.{json_key(name)}", f"unknown attribute {name}"))
    return value


# --- validation ---------------------------------------------------------------------------


def check_xml(data: bytes, xsd: str | Path) -> list[Problem]:
    """What an XSD finds wrong with an XML document; empty when it is valid.

    Args:
        data: the XML document.
        xsd: the path of the XSD to validate against.

    Returns:
        One `Problem` per finding, its path written as a JSON path of the service's
        form (``$.fitoFIPmtStsRpt.grpHdr``), its message naming the ISO elements.

    Raises:
        ValidationError: the bytes are not XML or the XSD cannot be read.
    """
    return _problems(_schema(xsd), _parse(data))


def _problems(schema: Any, root: Any) -> list[Problem]:
    root_ns = str(root.tag)[1:].partition("}")[0] if str(root.tag).startswith("{") else ""
    if root_ns != schema.target_namespace:
        return [
            Problem(
                "$",
                f"the document's namespace is {root_ns or 'none'}, the XSD's is "
                f"{schema.target_namespace}",
            )
        ]
    return [Problem(_json_path(err.path), _reason(err)) for err in schema.iter_errors(root)]


def _json_path(xpath: str | None) -> str:
    steps = [s for s in _CLARK.sub("", xpath or "").split("/") if s][1:]  # drop Document
    out = "$"
    for step in steps:
        match = _INDEX.match(step)
        if match is None:
            out += f".{json_key(step)}"
        else:
            out += f".{json_key(match.group(1))}[{int(match.group(2)) - 1}]"
    return out


def _reason(err: Any) -> str:
    expected = [getattr(e, "local_name", None) for e in (getattr(err, "expected", None) or ())]
    names = [f"{json_key(n)} ({n})" for n in expected if n]
    invalid: Any = getattr(err, "invalid_child", None)
    if names:
        if invalid is None:
            return f"incomplete: missing {' or '.join(names)}"
        tag = _CLARK.sub("", str(invalid.tag))
        return f"missing {' or '.join(names)} before {json_key(tag)} ({tag})"
    return _CLARK.sub("", str(err.reason or err.message))


def _version(namespace: str) -> str:
    return namespace.rsplit(":", 1)[-1]
