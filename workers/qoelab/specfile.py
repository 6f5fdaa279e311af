"""Reading YAML written by a user (sweep specs), safely and with one sentence per problem.

Every place that loads a user's YAML goes through ``loads``/``load`` (docs/security.md, "Spec files
(YAML)"). On top of ``yaml.SafeLoader`` (no Python objects) the loader refuses what would crash or
mislead later, naming the line:

- nesting deeper than ``MAX_DEPTH`` (the composer recurses: 5,000 levels was a RecursionError);
- more than ``MAX_ALIASES`` aliases, an alias inside its own anchor, or a document that expands to
  more than ``MAX_VALUES`` values through aliases (a "billion laughs" file);
- a duplicate key in a mapping (YAML forbids it; PyYAML kept the last value silently);
- a key that is not a string (``on:``/``yes:`` read as booleans, ``1:`` as a number);
- ``.inf``/``.nan`` and floats that overflow to infinity, and integers beyond 64 bits (JSON, the
  API's format, has neither);
- NUL characters and lone surrogates in strings (``"\\0"``, ``"\\ud800"``);
- tags that make values JSON cannot carry (``!!binary``, ``!!set``, ``!!omap``, ``!!pairs``).

Timestamps stay the strings they were written as (``name: 2026-01-01`` is a name, not a date).
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import yaml
from yaml.nodes import MappingNode, SequenceNode

from qoelab.errors import QoelabError

MAX_BYTES = 1 << 20  # a spec is a few hundred bytes; the pure-Python parser takes ~10 s per 10 MB
MAX_DEPTH = 32  # a sweep spec is 3 levels deep (grid -> parameter -> values)
MAX_ALIASES = 100
MAX_VALUES = 100_000  # values in the document with every alias expanded
MAX_INT = 2**63 - 1

_MERGE = "tag:yaml.org,2002:merge"


class SpecError(QoelabError):
    """The spec file is unreadable or a field is wrong; the message names file, line and field."""


class Refused(yaml.MarkedYAMLError):
    """A limit or rule of this loader (not a YAML syntax error); ``problem`` is the sentence."""

    def __init__(self, problem: str, mark: Any) -> None:
        super().__init__(problem=problem, problem_mark=mark)


class SpecLoader(yaml.SafeLoader):
    """``yaml.SafeLoader`` with the limits and refusals listed in the module docstring."""

    def __init__(self, stream: str) -> None:
        super().__init__(stream)
        self._depth = 0
        self._aliases = 0
        # id(node) -> (values, depth) with aliases expanded; set once a node is fully composed.
        self._extent: dict[int, tuple[int, int]] = {}

    def compose_node(self, parent: Any, index: Any) -> Any:
        event = self.peek_event()
        if isinstance(event, yaml.AliasEvent):
            self._aliases += 1
            if self._aliases > MAX_ALIASES:
                raise Refused(f"more than {MAX_ALIASES} aliases (*name)", event.start_mark)
            node = super().compose_node(parent, index)
            if id(node) not in self._extent:
                raise Refused(f"alias *{event.anchor} is inside the value it refers to", event.start_mark)
            return node
        self._depth += 1
        try:
            if self._depth > MAX_DEPTH:
                raise Refused(f"nested deeper than {MAX_DEPTH} levels", event.start_mark)
            node = super().compose_node(parent, index)
        finally:
            self._depth -= 1
        if isinstance(node, SequenceNode):
            children = node.value
        elif isinstance(node, MappingNode):
            children = [n for pair in node.value for n in pair]
        else:
            children = []
        values = 1 + sum(self._extent[id(c)][0] for c in children)
        depth = 1 + max((self._extent[id(c)][1] for c in children), default=0)
        if values > MAX_VALUES:
            how = "expands to" if self._aliases else "has"
            raise Refused(
                f"{how} more than {MAX_VALUES:,} values"
                + (" through aliases (*name)" if self._aliases else ""),
                node.start_mark,
            )
        if depth > MAX_DEPTH:
            raise Refused(f"nested deeper than {MAX_DEPTH} levels through aliases (*name)", node.start_mark)
        self._extent[id(node)] = (values, depth)
        return node

    def construct_mapping(self, node: Any, deep: bool = False) -> Any:
        if isinstance(node, MappingNode):
            first_line: dict[Any, int] = {}
            for key_node, _value in node.value:
                if key_node.tag == _MERGE:
                    continue  # `<<: *defaults`: explicit keys may override merged ones
                key = self.construct_object(key_node, deep=True)
                if not isinstance(key, str):
                    raise Refused(
                        f"the key {key_node.value!r} reads as {_kind(key)}, not a name: quote it "
                        f"('{key_node.value}')",
                        key_node.start_mark,
                    )
                if key in first_line:
                    raise Refused(
                        f"duplicate key {key!r} (first at line {first_line[key]}); a key may appear once",
                        key_node.start_mark,
                    )
                first_line[key] = key_node.start_mark.line + 1
        return super().construct_mapping(node, deep=deep)

    def construct_yaml_float(self, node: Any) -> float:
        value = super().construct_yaml_float(node)
        if not math.isfinite(value):
            raise Refused(
                f"{node.value} is not a finite number (a spec is sent as JSON, which has no infinity or NaN)",
                node.start_mark,
            )
        return value

    def construct_yaml_int(self, node: Any) -> int:
        try:
            value = super().construct_yaml_int(node)
        except ValueError:  # more digits than int() takes (sys.get_int_max_str_digits)
            value = MAX_INT + 1
        if abs(value) > MAX_INT:
            raise Refused(f"the number {node.value[:30]!r} is too large (at most {MAX_INT})", node.start_mark)
        return value

    def construct_yaml_str(self, node: Any) -> str:
        value = super().construct_yaml_str(node)
        if "\x00" in value:
            raise Refused("a string contains a NUL character (\\0)", node.start_mark)
        if any("\ud800" <= ch <= "\udfff" for ch in value):
            raise Refused("a string contains a lone surrogate (\\ud800-\\udfff)", node.start_mark)
        return value

    def construct_timestamp_as_written(self, node: Any) -> str:
        return self.construct_yaml_str(node)

    def refuse_tag(self, node: Any) -> Any:
        raise Refused(f"the tag {node.tag} is not allowed in a spec", node.start_mark)


def _kind(value: Any) -> str:
    if isinstance(value, bool):
        return f"the boolean {str(value).lower()}"
    if value is None:
        return "null"
    if isinstance(value, int | float):
        return f"the number {value}"
    return f"a {type(value).__name__}"


SpecLoader.add_constructor("tag:yaml.org,2002:float", SpecLoader.construct_yaml_float)
SpecLoader.add_constructor("tag:yaml.org,2002:int", SpecLoader.construct_yaml_int)
SpecLoader.add_constructor("tag:yaml.org,2002:str", SpecLoader.construct_yaml_str)
SpecLoader.add_constructor("tag:yaml.org,2002:timestamp", SpecLoader.construct_timestamp_as_written)
for _tag in ("binary", "set", "omap", "pairs"):
    SpecLoader.add_constructor(f"tag:yaml.org,2002:{_tag}", SpecLoader.refuse_tag)


def loads(text: str, source: str = "the spec") -> Any:
    """The data of one YAML document; SpecError naming ``source`` and the line on any problem."""
    try:
        return yaml.load(text, Loader=SpecLoader)  # noqa: S506 - SpecLoader is a SafeLoader
    except Refused as err:
        raise SpecError(f"{source}{_at(err.problem_mark)}: {err.problem}") from None
    except yaml.MarkedYAMLError as err:
        problem = err.problem or "not valid YAML"
        if err.context:  # "while scanning a quoted scalar" (line 3), or the first of two anchors
            problem += f" ({err.context.removesuffix('; first occurrence')}{_at(err.context_mark)})"
        raise SpecError(
            f"{source}{_at(err.problem_mark or err.context_mark)}: not valid YAML: {problem}"
        ) from None
    except yaml.YAMLError as err:  # ReaderError: a control character in the text
        raise SpecError(f"{source}: not valid YAML: {err}") from None


def _at(mark: Any) -> str:
    return f" at line {mark.line + 1}" if mark is not None else ""


def read_text(path: Path) -> str:
    """The file's text; SpecError when it is unreadable, larger than MAX_BYTES or not UTF-8."""
    path = Path(path)
    try:
        with path.open("rb") as f:
            data = f.read(MAX_BYTES + 1)
    except OSError as err:
        raise SpecError(f"cannot read the spec {path}: {err.strerror or err}") from None
    if len(data) > MAX_BYTES:
        raise SpecError(f"{path} is larger than {MAX_BYTES // 1024} KiB; a spec is a short YAML file")
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as err:
        line = data[: err.start].count(b"\n") + 1
        raise SpecError(
            f"{path} at line {line}: not UTF-8 text (byte 0x{data[err.start]:02x}); save the file as UTF-8"
        ) from None


def load(path: Path) -> Any:
    """``loads(read_text(path))`` with the path as the source named in errors."""
    return loads(read_text(path), str(path))
