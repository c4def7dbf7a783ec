"""Structural tags as pydantic models (xgrammar's classes, fields and JSON form).

A structural tag describes what an answer may contain: literal text, JSON values of a schema,
grammars, regexes, tags with begin / content / end, tags triggered inside free text, sequences,
alternatives and repetitions, and whole tokens. `StructuralTag.model_dump_json()` is the JSON the
engine reads (`structgen --structural-tag`, `compile_structural_tag`).
"""

import json
from typing import Any, Dict, List, Literal, Optional, Tuple, Type, Union, get_args

from pydantic import BaseModel, Field
from typing_extensions import Annotated

JSONStyle = Literal["json", "qwen_xml", "minimax_xml", "deepseek_xml", "glm_xml", "cohere_xml", "kimi_k3_xml"]


class ConstStringFormat(BaseModel):
    """Exactly `value`."""

    type: Literal["const_string"] = "const_string"
    value: str


class JSONSchemaFormat(BaseModel):
    """A JSON value of `json_schema` (in `style`: JSON, or a model family's XML parameters)."""

    type: Literal["json_schema"] = "json_schema"
    json_schema: Union[bool, Dict[str, Any]]
    style: JSONStyle = "json"
    any_order: bool = False
    max_whitespace_cnt: Optional[int] = None


class QwenXMLParameterFormat(BaseModel):
    """Deprecated: `JSONSchemaFormat` with `style="qwen_xml"`."""

    type: Literal["qwen_xml_parameter"] = "qwen_xml_parameter"
    json_schema: Union[bool, Dict[str, Any]]


class AnyTextFormat(BaseModel):
    """Any text not containing one of `excludes`."""

    type: Literal["any_text"] = "any_text"
    excludes: List[str] = []
    max_tokens: Optional[int] = None
    max_chars: Optional[int] = None


class TokenFormat(BaseModel):
    """One whole token, by id or by its text in the vocabulary."""

    type: Literal["token"] = "token"
    token: Union[int, str]


class ExcludeTokenFormat(BaseModel):
    """One token not in `exclude_tokens`."""

    type: Literal["exclude_token"] = "exclude_token"
    exclude_tokens: List[Union[int, str]] = []


class AnyTokensFormat(BaseModel):
    """Any tokens not in `exclude_tokens`."""

    type: Literal["any_tokens"] = "any_tokens"
    exclude_tokens: List[Union[int, str]] = []
    max_tokens: Optional[int] = None


class GrammarFormat(BaseModel):
    """Text of an EBNF grammar."""

    type: Literal["grammar"] = "grammar"
    grammar: str


class RegexFormat(BaseModel):
    """Text matching a regular expression."""

    type: Literal["regex"] = "regex"
    pattern: str


class SequenceFormat(BaseModel):
    """Each element in turn."""

    type: Literal["sequence"] = "sequence"
    elements: List["Format"]


class OrFormat(BaseModel):
    """One of the elements."""

    type: Literal["or"] = "or"
    elements: List["Format"]


class TagFormat(BaseModel):
    """`begin`, then `content`, then `end` (any of a list of ends)."""

    type: Literal["tag"] = "tag"
    begin: Union[str, TokenFormat]
    content: "Format"
    end: Union[str, List[str], TokenFormat]


class TriggeredTagsFormat(BaseModel):
    """Free text in which a trigger starts one of `tags`."""

    type: Literal["triggered_tags"] = "triggered_tags"
    triggers: List[str]
    tags: List[TagFormat]
    at_least_one: bool = False
    stop_after_first: bool = False
    excludes: List[str] = []


class TokenTriggeredTagsFormat(BaseModel):
    """Tokens in which a trigger token starts one of `tags`."""

    type: Literal["token_triggered_tags"] = "token_triggered_tags"
    trigger_tokens: List[Union[int, str]]
    tags: List[TagFormat]
    exclude_tokens: List[Union[int, str]] = []
    at_least_one: bool = False
    stop_after_first: bool = False


class TagsWithSeparatorFormat(BaseModel):
    """Tags separated by `separator`, nothing else."""

    type: Literal["tags_with_separator"] = "tags_with_separator"
    tags: List[TagFormat]
    separator: str
    at_least_one: bool = False
    stop_after_first: bool = False


class OptionalFormat(BaseModel):
    type: Literal["optional"] = "optional"
    content: "Format"


class PlusFormat(BaseModel):
    type: Literal["plus"] = "plus"
    content: "Format"


class StarFormat(BaseModel):
    type: Literal["star"] = "star"
    content: "Format"


class RepeatFormat(BaseModel):
    """`content` between `min` and `max` times (-1: unbounded)."""

    type: Literal["repeat"] = "repeat"
    min: int
    max: int
    content: "Format"


class DispatchFormat(BaseModel):
    """Free text in which each pattern starts its format."""

    type: Literal["dispatch"] = "dispatch"
    rules: List[Tuple[str, "Format"]]
    loop: bool = True
    excludes: List[str] = []


class TokenDispatchFormat(BaseModel):
    """Tokens in which each trigger token starts its format."""

    type: Literal["token_dispatch"] = "token_dispatch"
    rules: List[Tuple[Union[int, str], "Format"]]
    loop: bool = True
    exclude_tokens: List[Union[int, str]] = []


Format = Annotated[
    Union[
        ConstStringFormat,
        JSONSchemaFormat,
        QwenXMLParameterFormat,
        AnyTextFormat,
        TokenFormat,
        ExcludeTokenFormat,
        AnyTokensFormat,
        GrammarFormat,
        RegexFormat,
        SequenceFormat,
        OrFormat,
        TagFormat,
        TriggeredTagsFormat,
        TokenTriggeredTagsFormat,
        TagsWithSeparatorFormat,
        OptionalFormat,
        PlusFormat,
        StarFormat,
        RepeatFormat,
        DispatchFormat,
        TokenDispatchFormat,
    ],
    Field(discriminator="type"),
]

# The formats that contain formats refer to `Format` before it exists: resolve them now.
for _model in get_args(get_args(Format)[0]):
    _model.model_rebuild()


class StructuralTagItem(BaseModel):
    """Deprecated: one tag of the legacy form (`begin`, a JSON value of `schema`, `end`)."""

    begin: str
    schema_: Union[str, Type[BaseModel], Dict[str, Any]] = Field(alias="schema")
    end: str

    model_config = {"populate_by_name": True, "arbitrary_types_allowed": True}


def _schema_dict(schema: Any) -> Dict[str, Any]:
    if isinstance(schema, str):
        return json.loads(schema)
    if isinstance(schema, type) and issubclass(schema, BaseModel):
        return schema.model_json_schema()
    return schema


class StructuralTag(BaseModel):
    """A structural tag: `{"type": "structural_tag", "format": ...}`."""

    type: Literal["structural_tag"] = "structural_tag"
    format: Format

    @staticmethod
    def from_legacy_structural_tag(tags: List[StructuralTagItem], triggers: List[str]) -> "StructuralTag":
        """The legacy form: JSON tags started by triggers inside free text."""
        return StructuralTag(
            format=TriggeredTagsFormat(
                triggers=triggers,
                tags=[
                    TagFormat(begin=t.begin, content=JSONSchemaFormat(json_schema=_schema_dict(t.schema_)), end=t.end)
                    for t in tags
                ],
            )
        )

    @staticmethod
    def from_json(json_str: Union[str, Dict[str, Any]]) -> "StructuralTag":
        if isinstance(json_str, str):
            return StructuralTag.model_validate_json(json_str)
        if isinstance(json_str, dict):
            return StructuralTag.model_validate(json_str)
        raise ValueError(f"expected JSON text or a dict, got {type(json_str).__name__}")
