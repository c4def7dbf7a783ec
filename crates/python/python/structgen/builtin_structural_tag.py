"""Structural tags for the tool-call formats of model families (xgrammar's
`get_model_structural_tag` and per-model builders, same names and formats).

Each builder turns a normalized tool list (function tools, builtin tools, and a choice of
`auto` / `required` / `forced`) into a `StructuralTag`: free text in which the family's call
markers start calls whose arguments follow each tool's JSON Schema, optionally after a reasoning
block. `get_model_structural_tag` normalizes OpenAI-style `tools` / `tool_choice` first.
"""

from typing import Any, Callable, Dict, List, Literal, Optional, Sequence, Tuple, Union

from pydantic import TypeAdapter

from .openai_tool_call_schema import (
    AllowedToolChoiceParam,
    BuiltinToolChoiceParam,
    BuiltinToolParam,
    FunctionToolParam,
    NamedToolChoiceParam,
    ToolChoiceOptionParam,
    ToolParam,
)
from .structural_tag import (
    AnyTextFormat,
    ConstStringFormat,
    JSONSchemaFormat,
    OptionalFormat,
    RegexFormat,
    SequenceFormat,
    StructuralTag,
    TagFormat,
    TagsWithSeparatorFormat,
    TriggeredTagsFormat,
)

Choice = Literal["auto", "required", "forced"]
THINK = ["<think>", "</think>"]

_registry: Dict[str, Callable[..., StructuralTag]] = {}


def register_model_structural_tag(name: str) -> Callable[[Callable[..., StructuralTag]], Callable[..., StructuralTag]]:
    """Registers a builder under a model-family name for `get_model_structural_tag`."""

    def wrap(fn: Callable[..., StructuralTag]) -> Callable[..., StructuralTag]:
        _registry[name] = fn
        return fn

    return wrap


_TOOL = TypeAdapter(ToolParam)
_CHOICE = TypeAdapter(ToolChoiceOptionParam)


def normalize_tool_choice(
    tools: Optional[List[Union[ToolParam, Dict[str, Any]]]] = None,
    tool_choice: Union[ToolChoiceOptionParam, Dict[str, Any], None] = "auto",
) -> Tuple[List[FunctionToolParam], List[BuiltinToolParam], Choice]:
    """Splits `tools` into function and builtin tools kept by `tool_choice`, and reduces the
    choice to `auto`, `required` or `forced` (exactly one tool)."""
    if tools is None:
        tools = []
    if not isinstance(tools, list):
        raise ValueError("The 'tools' argument must be a list.")
    parsed = [t if isinstance(t, (FunctionToolParam, BuiltinToolParam)) else _TOOL.validate_python(t) for t in tools]
    functions = [t for t in parsed if isinstance(t, FunctionToolParam)]
    builtins = [t for t in parsed if isinstance(t, BuiltinToolParam)]
    choice = _CHOICE.validate_python("auto" if tool_choice is None else tool_choice)
    mode: Choice
    if choice == "none":
        return [], [], "auto"
    if isinstance(choice, str):
        mode = choice  # type: ignore[assignment]
    elif isinstance(choice, NamedToolChoiceParam):
        name = choice.function.name
        functions = [t for t in functions if t.function.name == name]
        if not functions:
            raise ValueError(f"The tool with name '{name}' is not found in the tools list.")
        builtins, mode = [], "forced"
    elif isinstance(choice, AllowedToolChoiceParam):
        wanted_functions, wanted_builtins = set(), set()
        for ref in choice.allowed_tools.tools:
            if ref.type == "function":
                if ref.function is None:
                    raise ValueError("Allowed function tool references must include 'function'.")
                wanted_functions.add(ref.function.name)
            else:
                wanted_builtins.add(ref.type)
        missing = wanted_functions - {t.function.name for t in functions}
        if missing:
            raise ValueError(f"Allowed function tools are not found in the tools list: {missing}.")
        missing = wanted_builtins - {t.type for t in builtins}
        if missing:
            raise ValueError(f"Allowed builtin tools are not found in the tools list: {missing}.")
        functions = [t for t in functions if t.function.name in wanted_functions]
        builtins = [t for t in builtins if t.type in wanted_builtins]
        mode = choice.allowed_tools.mode
    else:
        assert isinstance(choice, BuiltinToolChoiceParam)
        builtins = [t for t in builtins if t.type == choice.type]
        if len(builtins) != 1:
            raise ValueError(f"Builtin tool choice must match exactly one builtin tool, got {len(builtins)} matches.")
        functions, mode = [], "forced"
    if mode == "required" and not functions and not builtins:
        raise ValueError("The 'tools' list is empty, which is not allowed when 'tool_choice' is 'required'.")
    if mode == "forced" and len(functions) + len(builtins) != 1:
        raise ValueError("Forced tool choice must resolve to exactly one tool.")
    return functions, builtins, mode


def get_model_structural_tag(
    model: str,
    tools: Optional[List[Union[ToolParam, Dict[str, Any]]]] = None,
    tool_choice: Union[ToolChoiceOptionParam, Dict[str, Any], None] = "auto",
    reasoning: bool = True,
    force_reasoning: bool = False,
    any_order: bool = False,
    exclude_special_tokens: bool = True,
    max_whitespace_cnt: Optional[int] = None,
) -> StructuralTag:
    """The structural tag of model family `model` (see `_registry` for the names) for `tools` and
    `tool_choice` (OpenAI-style). `reasoning` allows a reasoning block first; free text excludes
    the family's special markers unless `exclude_special_tokens` is off; `any_order` and
    `max_whitespace_cnt` reach every argument schema. `force_reasoning` is deprecated and unused,
    as in xgrammar."""
    builder = _registry.get(model)
    if builder is None:
        raise ValueError(f"Unknown format type: {model}, supported types: {list(_registry)}")
    functions, builtins, mode = normalize_tool_choice(tools, tool_choice)
    return builder(
        functions,
        builtins,
        mode,
        reasoning,
        any_order=any_order,
        exclude_special_tokens=exclude_special_tokens,
        max_whitespace_cnt=max_whitespace_cnt,
    )


get_builtin_structural_tag = get_model_structural_tag


class _Build:
    """What every builder shares: argument schemas, excludes, the tool list."""

    def __init__(self, tools: Sequence[FunctionToolParam], builtins: Sequence[BuiltinToolParam],
                 any_order: bool, exclude_special_tokens: bool, max_whitespace_cnt: Optional[int]):
        self.tools = list(tools)
        self.builtins = list(builtins)
        self.any_order = any_order
        self.exclude = exclude_special_tokens
        self.max_ws = max_whitespace_cnt

    def args(self, params: Any, style: str = "json") -> JSONSchemaFormat:
        return JSONSchemaFormat(json_schema=params, style=style, any_order=self.any_order,
                                max_whitespace_cnt=self.max_ws)

    def params(self, tool: FunctionToolParam) -> Any:
        f = tool.function
        return True if f.parameters is None or f.strict is False else f.parameters

    def excludes(self, markers: List[str]) -> List[str]:
        return list(markers) if self.exclude else []


def _with_reasoning(reasoning: bool, prefix: Any, suffix: Any) -> StructuralTag:
    return StructuralTag(format=SequenceFormat(elements=[prefix, suffix]) if reasoning else suffix)


def _think_prefix(newlines: bool = True, end: str = "</think>") -> Any:
    block = TagFormat(begin="", content=AnyTextFormat(), end=end)
    return SequenceFormat(elements=[block, ConstStringFormat(value="\n\n")]) if newlines else block


def _triggered(b: _Build, trigger: str, tags: List[TagFormat], mode: Choice, excludes: List[str],
               no_tools_excludes: Optional[List[str]] = None) -> Any:
    """Calls started by `trigger` in free text (auto), at least one (required), the one tag (forced)."""
    if not tags:
        return AnyTextFormat(excludes=b.excludes(no_tools_excludes if no_tools_excludes is not None else excludes))
    if mode == "forced":
        return tags[0]
    return TriggeredTagsFormat(triggers=[trigger], tags=tags, excludes=b.excludes(excludes),
                               at_least_one=mode == "required")


def _sectioned(b: _Build, begin: str, end: str, tags: List[TagFormat], mode: Choice, sep: str,
               excludes: List[str], trigger: Optional[str] = None, forced_begin: Optional[str] = None) -> Any:
    """Calls inside one section `begin ... end` (auto: the section is triggered in free text)."""
    if not tags:
        return AnyTextFormat(excludes=b.excludes(excludes))
    if mode == "auto":
        section = TagFormat(begin=begin, content=TagsWithSeparatorFormat(tags=tags, separator=sep, at_least_one=True), end=end)
        return TriggeredTagsFormat(triggers=[trigger or begin], tags=[section], excludes=b.excludes(excludes))
    inner = tags[0] if mode == "forced" else TagsWithSeparatorFormat(tags=tags, separator=sep, at_least_one=True)
    return SequenceFormat(elements=[ConstStringFormat(value=forced_begin or begin), inner, ConstStringFormat(value=end)])


def _register(name: str, *aliases: str):
    def wrap(fn):
        for n in (name, *aliases):
            _registry[n] = fn
        return fn

    return wrap


def _builder(fn):
    """The per-model signature: (tools, builtin_tools=[], tool_choice='auto', reasoning=True, ...)."""

    def call(tools: Sequence[FunctionToolParam] = (), builtin_tools: Sequence[BuiltinToolParam] = (),
             tool_choice: Choice = "auto", reasoning: bool = True, *, any_order: bool = False,
             exclude_special_tokens: bool = True, max_whitespace_cnt: Optional[int] = None) -> StructuralTag:
        b = _Build(tools, builtin_tools, any_order, exclude_special_tokens, max_whitespace_cnt)
        return fn(b, tool_choice, reasoning)

    call.__name__ = fn.__name__
    call.__doc__ = fn.__doc__
    return call


@_register("llama")
@_builder
def get_llama_structural_tag(b: _Build, mode: Choice, reasoning: bool) -> StructuralTag:
    """Llama 3.x JSON calls `{"name": "NAME", "parameters": {...}}` (no reasoning block)."""
    tags = [TagFormat(begin=f'{{"name": "{t.function.name}", "parameters": ', content=b.args(b.params(t)), end="}")
            for t in b.tools]
    return StructuralTag(format=_triggered(b, '{"name": ', tags, mode, THINK))


def _qwen_like(b: _Build, mode: Choice, reasoning: bool, begin: Callable[[str], str], end: str,
               trigger: str, style: str = "json") -> StructuralTag:
    tags = [TagFormat(begin=begin(t.function.name), content=b.args(b.params(t), style), end=end) for t in b.tools]
    return _with_reasoning(reasoning, _think_prefix(), _triggered(b, trigger, tags, mode, THINK))


@_register("qwen_3")
@_builder
def get_qwen_3_structural_tag(b: _Build, mode: Choice, reasoning: bool) -> StructuralTag:
    """Qwen3: `<tool_call>\\n{"name": ..., "arguments": ...}\\n</tool_call>` after `<think>...</think>`."""
    return _qwen_like(b, mode, reasoning, lambda n: f'<tool_call>\n{{"name": "{n}", "arguments": ',
                      "}\n</tool_call>", "<tool_call>")


@_register("exaone")
@_builder
def get_exaone_structural_tag(b: _Build, mode: Choice, reasoning: bool) -> StructuralTag:
    """EXAONE 4.0: Qwen3's calls without the newlines inside `<tool_call>`."""
    return _qwen_like(b, mode, reasoning, lambda n: f'<tool_call>{{"name": "{n}", "arguments": ',
                      "}</tool_call>", "<tool_call>")


@_register("qwen_3_5", "qwen_3_coder")
@_builder
def get_qwen_3_5_structural_tag(b: _Build, mode: Choice, reasoning: bool) -> StructuralTag:
    """Qwen3.5 / Qwen3-Coder: `<function=NAME>` with `<parameter=KEY>` arguments."""
    return _qwen_like(b, mode, reasoning, lambda n: f"<tool_call>\n<function={n}>\n",
                      "\n</function>\n</tool_call>", "<tool_call>\n<function=", "qwen_xml")


get_qwen_3_coder_structural_tag = get_qwen_3_5_structural_tag

_KIMI_SECTION = ("<|tool_calls_section_begin|>", "<|tool_calls_section_end|>")


@_register("kimi")
@_builder
def get_kimi_structural_tag(b: _Build, mode: Choice, reasoning: bool) -> StructuralTag:
    """Kimi K2: numbered `functions.NAME:i` calls inside a tool-calls section."""
    tags = [
        TagFormat(
            begin=f"<|tool_call_begin|>functions.{t.function.name}:",
            content=SequenceFormat(elements=[RegexFormat(pattern=r"\d+"),
                                             ConstStringFormat(value="<|tool_call_argument_begin|>"),
                                             b.args(b.params(t))]),
            end="<|tool_call_end|>",
        )
        for t in b.tools
    ]
    excludes = THINK + ["<|tool_call_begin|>"] if tags else THINK
    suffix = _sectioned(b, _KIMI_SECTION[0], _KIMI_SECTION[1], tags, mode, "", excludes)
    return _with_reasoning(reasoning, TagFormat(begin="", content=AnyTextFormat(), end="</think>"), suffix)


@_register("kimi_k3")
@_builder
def get_kimi_k3_structural_tag(b: _Build, mode: Choice, reasoning: bool) -> StructuralTag:
    """Kimi K3: `<|open|>`/`<|close|>` blocks (think, response, tools, message end)."""
    o, c, s = "<|open|>", "<|close|>", "<|sep|>"
    tags = [
        TagFormat(
            begin=f'{o}call tool="{t.function.name}" index="',
            content=SequenceFormat(elements=[RegexFormat(pattern=r"\d+"), ConstStringFormat(value=f'"{s}'),
                                             b.args(b.params(t), "kimi_k3_xml")]),
            end=f"{c}call{s}",
        )
        for t in b.tools
    ]
    text = AnyTextFormat(excludes=b.excludes([o, c]))
    elements: List[Any] = []
    if reasoning:
        elements.append(TagFormat(begin="", content=AnyTextFormat(excludes=b.excludes([o, c])), end=f"{c}think{s}"))
    elements.append(TagFormat(begin=f"{o}response{s}" if reasoning else "", content=text, end=f"{c}response{s}"))
    tools_begin, tools_end = f"{o}tools{s}", f"{c}tools{s}"
    if tags:
        if mode == "auto":
            elements.append(OptionalFormat(content=TagFormat(
                begin=tools_begin, content=TagsWithSeparatorFormat(tags=tags, separator="", at_least_one=True),
                end=tools_end)))
        else:
            inner = tags[0] if mode == "forced" else TagsWithSeparatorFormat(tags=tags, separator="", at_least_one=True)
            elements.append(SequenceFormat(elements=[ConstStringFormat(value=tools_begin), inner,
                                                     ConstStringFormat(value=tools_end)]))
    elements.append(ConstStringFormat(value=f"{c}message{s}"))
    return StructuralTag(format=SequenceFormat(elements=elements))


_DS = {"CB": "<｜tool▁calls▁begin｜>", "CE": "<｜tool▁calls▁end｜>", "cb": "<｜tool▁call▁begin｜>",
       "ce": "<｜tool▁call▁end｜>", "sep": "<｜tool▁sep｜>"}


def _deepseek(b: _Build, mode: Choice, reasoning: bool, head: Callable[[str], str], open_json: str,
              close_json: str, sep: str) -> StructuralTag:
    d = _DS
    tags = [TagFormat(begin=d["cb"] + head(t.function.name) + open_json, content=b.args(b.params(t)),
                      end=close_json + d["ce"]) for t in b.tools]
    if not tags:
        suffix: Any = AnyTextFormat(excludes=b.excludes(THINK))
    elif mode == "forced":
        t = b.tools[0]
        suffix = TagFormat(begin=d["CB"] + d["cb"] + head(t.function.name) + open_json,
                           content=b.args(b.params(t)), end=close_json + d["ce"] + d["CE"])
    else:
        section = TagFormat(begin=d["CB"], content=TagsWithSeparatorFormat(tags=tags, separator=sep, at_least_one=True),
                            end=d["CE"])
        suffix = section if mode == "required" else TriggeredTagsFormat(
            triggers=[d["CB"]], tags=[section], excludes=b.excludes(THINK))
    return _with_reasoning(reasoning, TagFormat(begin="", content=AnyTextFormat(), end="</think>"), suffix)


@_register("deepseek_r1")
@_builder
def get_deepseek_r1_structural_tag(b: _Build, mode: Choice, reasoning: bool) -> StructuralTag:
    """DeepSeek-R1: `function<｜tool▁sep｜>NAME` with a fenced JSON block per call."""
    return _deepseek(b, mode, reasoning, lambda n: "function" + _DS["sep"] + n, "\n```json\n", "\n```", "\n")


@_register("deepseek_v3_1")
@_builder
def get_deepseek_v3_1_structural_tag(b: _Build, mode: Choice, reasoning: bool) -> StructuralTag:
    """DeepSeek-V3.1: `NAME<｜tool▁sep｜>{...}` per call."""
    return _deepseek(b, mode, reasoning, lambda n: n + _DS["sep"], "", "", "")


def _dsml(b: _Build, mode: Choice, reasoning: bool, block: str) -> StructuralTag:
    tags = [TagFormat(begin=f'<｜DSML｜invoke name="{t.function.name}">\n', content=b.args(b.params(t), "deepseek_xml"),
                      end="</｜DSML｜invoke>\n") for t in b.tools]
    begin, end = f"<｜DSML｜{block}>", f"</｜DSML｜{block}>"
    suffix = _sectioned(b, begin + "\n", end, tags, mode, "", THINK, trigger=begin,
                        forced_begin=f"\n\n{begin}\n")
    return _with_reasoning(reasoning, TagFormat(begin="", content=AnyTextFormat(), end="</think>"), suffix)


@_register("deepseek_v3_2")
@_builder
def get_deepseek_v3_2_structural_tag(b: _Build, mode: Choice, reasoning: bool) -> StructuralTag:
    """DeepSeek-V3.2: DSML `<｜DSML｜invoke name=...>` calls in `function_calls`."""
    return _dsml(b, mode, reasoning, "function_calls")


@_register("deepseek_v4")
@_builder
def get_deepseek_v4_structural_tag(b: _Build, mode: Choice, reasoning: bool) -> StructuralTag:
    """DeepSeek-V4: DSML calls in `tool_calls`."""
    return _dsml(b, mode, reasoning, "tool_calls")


@_register("minimax")
@_builder
def get_minimax_structural_tag(b: _Build, mode: Choice, reasoning: bool) -> StructuralTag:
    """MiniMax-M2: `<invoke name=...>` calls in `<minimax:tool_call>`, always after a think part."""
    tags = [TagFormat(begin=f'<invoke name="{t.function.name}">\n', content=b.args(b.params(t), "minimax_xml"),
                      end="</invoke>\n") for t in b.tools]
    suffix = _sectioned(b, "<minimax:tool_call>\n", "</minimax:tool_call>", tags, mode, "", THINK,
                        trigger="<minimax:tool_call>", forced_begin="\n<minimax:tool_call>\n")
    think = (TagFormat(begin="", content=AnyTextFormat(), end="</think>") if reasoning
             else ConstStringFormat(value="\n</think>\n\n"))
    return StructuralTag(format=SequenceFormat(elements=[think, ConstStringFormat(value="\n\n"), suffix]))


_GLM_MARKERS = ["</tool_call>", "<arg_key>", "</arg_key>", "<arg_value>", "</arg_value>"]


@_register("glm_4_7")
@_builder
def get_glm_4_7_structural_tag(b: _Build, mode: Choice, reasoning: bool) -> StructuralTag:
    """GLM-4.7 / GLM-5: `<tool_call>NAME<arg_key>..</arg_key><arg_value>..</arg_value></tool_call>`."""
    tags = [TagFormat(begin=f"<tool_call>{t.function.name}", content=b.args(b.params(t), "glm_xml"),
                      end="</tool_call>") for t in b.tools]
    text = THINK + _GLM_MARKERS
    in_reasoning = THINK + ["<tool_call>"] + _GLM_MARKERS
    suffix = _triggered(b, "<tool_call>", tags, mode, text, no_tools_excludes=in_reasoning)
    prefix = TagFormat(begin="", content=AnyTextFormat(excludes=b.excludes(in_reasoning)), end="</think>")
    return _with_reasoning(reasoning, prefix, suffix)


_COHERE_THINK = ["<|START_THINKING|>", "<|END_THINKING|>"]


@_register("cohere")
@_builder
def get_cohere_structural_tag(b: _Build, mode: Choice, reasoning: bool) -> StructuralTag:
    """Cohere: numbered `<cofl:tool_call id=.. name=..>` calls in `<cofl:tool_calls>`."""
    tags = [
        TagFormat(
            begin='<cofl:tool_call id="',
            content=SequenceFormat(elements=[RegexFormat(pattern=r"\d+"),
                                             ConstStringFormat(value=f'" name="{t.function.name}">'),
                                             b.args(b.params(t), "cohere_xml")]),
            end="</cofl:tool_call>",
        )
        for t in b.tools
    ]
    suffix = _sectioned(b, "<cofl:tool_calls>", "</cofl:tool_calls>", tags, mode, "", _COHERE_THINK)
    prefix = TagFormat(begin="", content=AnyTextFormat(), end="<|END_THINKING|>")
    return _with_reasoning(reasoning, prefix, suffix)


_FINAL_END = ["<|end|>", "<|return|>"]


@_register("harmony")
@_builder
def get_harmony_structural_tag(b: _Build, mode: Choice, reasoning: bool) -> StructuralTag:
    """gpt-oss (harmony): commentary-channel calls, builtin tools, the final and analysis channels."""
    def function_tags(t: FunctionToolParam) -> List[TagFormat]:
        n = t.function.name
        begins = [f"<|channel|>commentary to=functions.{n}<|constrain|>json<|message|>",
                  f" to=functions.{n}<|channel|>commentary <|constrain|>json<|message|>",
                  f" to=functions.{n}<|channel|>commentary json<|message|>"]
        return [TagFormat(begin=x, content=b.args(b.params(t)), end="<|call|>") for x in begins]

    def builtin_tags(t: BuiltinToolParam) -> List[TagFormat]:
        n = t.name or t.type
        params = True if t.parameters is None else t.parameters
        begins = [f"<|channel|>commentary to={n} code<|message|>", f" to={n}<|channel|>commentary code<|message|>"]
        return [TagFormat(begin=x, content=b.args(params), end="<|call|>") for x in begins]

    functions = [x for t in b.tools for x in function_tags(t)]
    builtins = [x for t in b.builtins for x in builtin_tags(t)]
    if mode == "forced":
        tags = builtins if builtins else functions
    elif mode == "required":
        tags = builtins + functions
    else:
        tags = functions + builtins + [TagFormat(begin="<|channel|>final<|message|>", content=AnyTextFormat(),
                                                 end=_FINAL_END)]
    if reasoning:
        tags.append(TagFormat(begin="<|channel|>analysis<|message|>", content=AnyTextFormat(), end=_FINAL_END))
    return StructuralTag(format=TagsWithSeparatorFormat(tags=tags, separator="<|start|>assistant", at_least_one=False))
