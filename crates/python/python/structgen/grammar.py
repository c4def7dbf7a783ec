"""`Grammar`: a grammar before compilation (xgrammar's class and meaning), from EBNF, JSON Schema,
a regex, a Lark grammar, a structural tag, a tool list, or a union / concatenation of grammars.
"""

import json
from typing import Any, Dict, List, Optional, Tuple, Type, Union

from . import _core
from .exception import DeserializeFormatError, DeserializeVersionError, InvalidJSONError
from .structural_tag import StructuralTagItem


def _schema_text(schema: Any) -> str:
    """A JSON Schema given as text, a dict, or a pydantic model class, as JSON text."""
    if isinstance(schema, str):
        return schema
    if isinstance(schema, dict):
        return json.dumps(schema)
    if isinstance(schema, type) and hasattr(schema, "model_json_schema"):
        return json.dumps(schema.model_json_schema())
    raise TypeError(
        f"schema: expected JSON text, a dict or a pydantic model class, got {type(schema).__name__}"
    )


def _structural_tag_text(
    structural_tag: Any, triggers: Optional[List[str]] = None
) -> str:
    """The JSON text of a structural tag given as a `StructuralTag` model, a dict, JSON text, or
    the legacy list of `StructuralTagItem` with `triggers`."""
    if isinstance(structural_tag, list):
        if triggers is None:
            raise ValueError("triggers: required with a list of StructuralTagItem")
        tags = [
            {
                "type": "tag",
                "begin": item.begin,
                "content": {
                    "type": "json_schema",
                    "json_schema": json.loads(_schema_text(item.schema_)),
                },
                "end": item.end,
            }
            for item in structural_tag
        ]
        return json.dumps(
            {
                "type": "structural_tag",
                "format": {"type": "triggered_tags", "triggers": list(triggers), "tags": tags},
            }
        )
    if isinstance(structural_tag, str):
        return structural_tag
    if isinstance(structural_tag, dict):
        return json.dumps(structural_tag)
    if hasattr(structural_tag, "model_dump_json"):
        return structural_tag.model_dump_json(exclude_none=True)
    raise TypeError(
        "structural_tag: expected a StructuralTag, a dict, JSON text or a list of StructuralTagItem,"
        f" got {type(structural_tag).__name__}"
    )


#: The `__VERSION__` of structgen's serialized grammars (its own format: the grammar's EBNF, which
#: parses back to the same language, and its warnings).
GRAMMAR_SERIALIZATION_VERSION = "structgen-grammar-1"


class Grammar:
    """A grammar, independent of any vocabulary. `str(grammar)` is its EBNF."""

    def __init__(self, handle: "_core.Grammar") -> None:
        self._handle = handle

    def __str__(self) -> str:
        return str(self._handle)

    def to_string(self) -> str:
        return str(self._handle)

    def serialize_json(self) -> str:
        """The grammar as JSON text (structgen's format: `__VERSION__`, the EBNF, the root rule's
        name, the warnings)."""
        return json.dumps(
            {
                "__VERSION__": GRAMMAR_SERIALIZATION_VERSION,
                "ebnf": str(self._handle),
                "root": self._handle.root_name,
                "warnings": self._handle.warnings,
            }
        )

    @staticmethod
    def deserialize_json(json_string: str) -> "Grammar":
        """A grammar from `serialize_json`'s text. Raises `InvalidJSONError` (not JSON),
        `DeserializeVersionError` (another format version) or `DeserializeFormatError`."""
        try:
            data = json.loads(json_string)
        except (TypeError, ValueError) as e:
            raise InvalidJSONError(f"deserialize_json: not JSON text: {e}") from None
        if not isinstance(data, dict) or "__VERSION__" not in data:
            raise DeserializeFormatError("deserialize_json: expected an object with __VERSION__")
        if data["__VERSION__"] != GRAMMAR_SERIALIZATION_VERSION:
            raise DeserializeVersionError(
                f"deserialize_json: __VERSION__ is {data['__VERSION__']!r}, this structgen reads "
                f"{GRAMMAR_SERIALIZATION_VERSION!r}"
            )
        ebnf, root, warnings = data.get("ebnf"), data.get("root"), data.get("warnings", [])
        if not isinstance(ebnf, str) or not isinstance(root, str):
            raise DeserializeFormatError("deserialize_json: `ebnf` and `root` must be strings")
        if not isinstance(warnings, list) or not all(isinstance(w, str) for w in warnings):
            raise DeserializeFormatError("deserialize_json: `warnings` must be a list of strings")
        return Grammar(_core.Grammar.from_serialized(ebnf, root, warnings))

    @property
    def warnings(self) -> List[str]:
        """`path: message` for each JSON Schema keyword not enforced exactly."""
        return self._handle.warnings

    @staticmethod
    def from_ebnf(ebnf_string: str, *, root_rule_name: str = "root") -> "Grammar":
        """Parses EBNF (xgrammar's dialect, GBNF-like); errors name line and column."""
        return Grammar(_core.Grammar.from_ebnf(ebnf_string, root_rule_name))

    @staticmethod
    def from_json_schema(
        schema: Union[str, Dict[str, Any], Type[Any]],
        *,
        any_whitespace: bool = True,
        indent: Optional[int] = None,
        separators: Optional[Tuple[str, str]] = None,
        strict_mode: bool = True,
        max_whitespace_cnt: Optional[int] = None,
        print_converted_ebnf: bool = False,
        any_order: bool = False,
    ) -> "Grammar":
        """The JSON values `schema` allows. `strict_mode` closes objects and arrays that do not
        say otherwise; `any_whitespace` allows whitespace between tokens (at most
        `max_whitespace_cnt` in a row), otherwise the layout follows `indent` and `separators`;
        `any_order` lets an object's members come in any order."""
        g = Grammar(
            _core.Grammar.from_json_schema(
                _schema_text(schema),
                any_whitespace,
                indent,
                tuple(separators) if separators is not None else None,
                strict_mode,
                max_whitespace_cnt,
                any_order,
            )
        )
        if print_converted_ebnf:
            print(f"Converted EBNF: {g}")
        return g

    @staticmethod
    def from_regex(regex_string: str, *, print_converted_ebnf: bool = False) -> "Grammar":
        """The strings the regex matches in full."""
        g = Grammar(_core.Grammar.from_regex(regex_string))
        if print_converted_ebnf:
            print(f"Converted EBNF: {g}")
        return g

    @staticmethod
    def from_lark(
        lark_string: str,
        *,
        tokenizer_info: Optional[Any] = None,
        named_grammars: Optional[Dict[str, Union["Grammar", str]]] = None,
    ) -> "Grammar":
        """A Lark grammar (its `start` rule is the root). `tokenizer_info` resolves named special
        tokens (`<|tool|>`); `named_grammars` are what `@name` refers to: `Grammar`s, or Lark
        source with its own `start`, keyed by the name without `@`."""
        if named_grammars is None:
            named_grammars = {}
        if not isinstance(named_grammars, dict):
            raise TypeError("named_grammars must be a dictionary")
        grammars: Dict[str, Any] = {}
        sources: Dict[str, str] = {}
        for name, value in named_grammars.items():
            if not isinstance(name, str):
                raise TypeError("named grammar names must be strings")
            if isinstance(value, Grammar):
                grammars[name] = value._handle
            elif isinstance(value, str):
                sources[name] = value
            else:
                raise TypeError("named grammar values must be Grammar instances or Lark strings")
        vocab = None if tokenizer_info is None else tokenizer_info._vocab
        return Grammar(_core.Grammar.from_lark(lark_string, vocab, grammars, sources))

    @staticmethod
    def from_structural_tag(
        structural_tag: Any, triggers: Optional[List[str]] = None
    ) -> "Grammar":
        """A structural tag (`StructuralTag`, dict, JSON text, or the legacy list of
        `StructuralTagItem` with `triggers`)."""
        return Grammar(_core.Grammar.from_structural_tag(_structural_tag_text(structural_tag, triggers)))

    @staticmethod
    def builtin_json_grammar() -> "Grammar":
        """Any JSON value."""
        return Grammar(_core.Grammar.builtin_json())

    @staticmethod
    def union(*grammars: "Grammar") -> "Grammar":
        """The strings any of the grammars matches."""
        return Grammar(_core.Grammar.union([g._handle for g in _flatten(grammars)]))

    @staticmethod
    def concat(*grammars: "Grammar") -> "Grammar":
        """A match of each grammar in turn."""
        return Grammar(_core.Grammar.concat([g._handle for g in _flatten(grammars)]))


def _flatten(grammars: Tuple[Any, ...]) -> List[Grammar]:
    if len(grammars) == 1 and isinstance(grammars[0], (list, tuple)):
        grammars = tuple(grammars[0])
    for g in grammars:
        if not isinstance(g, Grammar):
            raise TypeError(f"grammars: expected Grammar objects, got {type(g).__name__}")
    return list(grammars)
