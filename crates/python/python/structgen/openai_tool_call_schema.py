"""OpenAI-style tool and tool-choice parameters as pydantic models (xgrammar's names), read by
`builtin_structural_tag`."""

from typing import Any, Dict, List, Literal, Optional, Union

from pydantic import BaseModel


class FunctionDefinition(BaseModel):
    name: str
    description: Optional[str] = None
    parameters: Optional[Dict[str, Any]] = None
    strict: Optional[bool] = None


class FunctionToolParam(BaseModel):
    """A function tool: `{"type": "function", "function": {"name", "parameters", ...}}`."""

    type: Literal["function"] = "function"
    function: FunctionDefinition


class BuiltinToolParam(BaseModel):
    """A tool built into the model's format (e.g. harmony's browser or python tools)."""

    type: str
    name: Optional[str] = None
    parameters: Optional[Dict[str, Any]] = None


ToolParam = Union[FunctionToolParam, BuiltinToolParam]


class NamedToolChoiceFunction(BaseModel):
    name: str


class NamedToolChoiceParam(BaseModel):
    """Call exactly this function."""

    type: Literal["function"] = "function"
    function: NamedToolChoiceFunction


class BuiltinToolChoiceParam(BaseModel):
    """Call exactly the builtin tool of this type."""

    type: str
    name: Optional[str] = None


class AllowedToolRef(BaseModel):
    type: str
    function: Optional[NamedToolChoiceFunction] = None
    name: Optional[str] = None


class AllowedToolsParam(BaseModel):
    mode: Literal["auto", "required"]
    tools: List[AllowedToolRef]


class AllowedToolChoiceParam(BaseModel):
    """Only these tools, in `mode` auto or required."""

    type: Literal["allowed_tools"] = "allowed_tools"
    allowed_tools: AllowedToolsParam


ToolChoiceOptionParam = Union[
    Literal["none", "auto", "required"],
    NamedToolChoiceParam,
    AllowedToolChoiceParam,
    BuiltinToolChoiceParam,
]
