"""`GrammarCompiler` and `CompiledGrammar` (xgrammar's classes and meaning).

One compiler per vocabulary: it shares token masks between grammars with the same structure,
keeps whole compiled grammars for repeated inputs, and lowers each tool's argument schema once.
Compiling releases the GIL.
"""

from typing import Any, Dict, List, Optional, Tuple, Type, Union

from . import _core
from .grammar import Grammar, _schema_text, _structural_tag_text
from .tokenizer_info import TokenizerInfo


class CompiledGrammar:
    """A grammar compiled for one vocabulary: what `GrammarMatcher` runs."""

    def __init__(self, handle: "_core.Compiled", tokenizer_info: TokenizerInfo) -> None:
        self._handle = handle
        self._tokenizer_info = tokenizer_info

    @property
    def grammar(self) -> Grammar:
        return Grammar(self._handle.grammar)

    @property
    def tokenizer_info(self) -> TokenizerInfo:
        return self._tokenizer_info

    @property
    def num_states(self) -> int:
        """States of the compiled automaton."""
        return self._handle.num_states


def default_limits() -> Dict[str, int]:
    """structgen's engine limits by name, at their defaults (what `GrammarCompiler(limits=...)`
    may change)."""
    return dict(_core.default_limits())


class GrammarCompiler:
    """Compiles grammars for `tokenizer_info`.

    `cache_enabled` keeps compiled grammars for inputs seen before (at most 256);
    `cache_limit_bytes` bounds the shared token-mask pool and, apart, those grammars' heap bytes
    (-1: a 1 GiB pool, grammars bounded by count). `limits` changes structgen's engine limits by
    name (`default_limits()` lists them: rules, automaton states, repetition bounds, nesting,
    Earley items, the compile time budget...). `max_threads` is accepted for xgrammar
    compatibility: structgen compiles on the calling thread and computes most masks on first use,
    so there is no compile thread pool to size (batch mask filling uses all cores).
    """

    def __init__(
        self,
        tokenizer_info: TokenizerInfo,
        *,
        max_threads: int = 8,
        cache_enabled: bool = True,
        cache_limit_bytes: int = -1,
        limits: Optional[Dict[str, int]] = None,
    ) -> None:
        if not isinstance(tokenizer_info, TokenizerInfo):
            raise TypeError(
                f"tokenizer_info: expected a TokenizerInfo, got {type(tokenizer_info).__name__}"
            )
        self._tokenizer_info = tokenizer_info
        self._cache_limit_bytes = cache_limit_bytes
        if limits is not None:
            for name, value in limits.items():
                if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                    raise ValueError(f"limits: {name} must be a non-negative integer, got {value!r}")
        self._handle = _core.Compiler(
            tokenizer_info._vocab,
            cache_enabled,
            cache_limit_bytes,
            list(limits.items()) if limits is not None else None,
        )

    def _wrap(self, compiled: "_core.Compiled") -> CompiledGrammar:
        return CompiledGrammar(compiled, self._tokenizer_info)

    def compile_grammar(
        self, grammar: Union[str, Grammar], *, root_rule_name: str = "root"
    ) -> CompiledGrammar:
        """Compiles a `Grammar` or EBNF text."""
        if isinstance(grammar, str):
            grammar = Grammar.from_ebnf(grammar, root_rule_name=root_rule_name)
        if not isinstance(grammar, Grammar):
            raise TypeError(f"grammar: expected a Grammar or EBNF text, got {type(grammar).__name__}")
        return self._wrap(self._handle.compile(grammar._handle))

    def compile_json_schema(
        self,
        schema: Union[str, Dict[str, Any], Type[Any]],
        *,
        any_whitespace: bool = True,
        indent: Optional[int] = None,
        separators: Optional[Tuple[str, str]] = None,
        strict_mode: bool = True,
        max_whitespace_cnt: Optional[int] = None,
        any_order: bool = False,
    ) -> CompiledGrammar:
        """Compiles a JSON Schema (text, dict or pydantic model class); `any_order` lets an
        object's members come in any order."""
        return self._wrap(
            self._handle.compile_json_schema(
                _schema_text(schema),
                any_whitespace,
                indent,
                tuple(separators) if separators is not None else None,
                strict_mode,
                max_whitespace_cnt,
                any_order,
            )
        )

    def compile_builtin_json_grammar(self) -> CompiledGrammar:
        """Compiles the grammar of any JSON value."""
        return self.compile_grammar(Grammar.builtin_json_grammar())

    def compile_regex(self, regex: str) -> CompiledGrammar:
        """Compiles a regular expression (matched in full)."""
        return self.compile_grammar(Grammar.from_regex(regex))

    def compile_structural_tag(
        self, structural_tag: Any, triggers: Optional[List[str]] = None
    ) -> CompiledGrammar:
        """Compiles a structural tag (`StructuralTag`, dict, JSON text, or the legacy list of
        `StructuralTagItem` with `triggers`); token formats resolve against this vocabulary."""
        return self._wrap(
            self._handle.compile_structural_tag(_structural_tag_text(structural_tag, triggers))
        )

    def compile_tools(
        self,
        tools: Union[str, List[Dict[str, Any]]],
        style: str,
        *,
        tool_choice: Union[str, Dict[str, Any]] = "auto",
        parallel_tool_calls: bool = True,
        reasoning: Optional[bool] = None,
    ) -> CompiledGrammar:
        """Compiles what an answer may be given an OpenAI-style tool list in a model family's
        call style (`llama3`, `qwen`, `harmony`, ...; `structgen styles` lists them):
        free text or calls, per `tool_choice` (`auto`, `required`, `none`, a tool name or
        `{"type": "function", "function": {"name": ...}}`)."""
        return self.compile_structural_tag(
            tools_structural_tag(
                tools,
                style,
                tool_choice=tool_choice,
                parallel_tool_calls=parallel_tool_calls,
                reasoning=reasoning,
            )
        )

    def get_cache_size_bytes(self) -> int:
        """Heap bytes held by the caches: the compiled grammars kept for repeated inputs and the
        shared token-mask pool."""
        return self._handle.cache_size_bytes()

    @property
    def cache_limit_bytes(self) -> int:
        return self._cache_limit_bytes

    def clear_cache(self) -> None:
        """Forgets every cached grammar and mask."""
        self._handle.clear_cache()


def tools_structural_tag(
    tools: Union[str, List[Dict[str, Any]]],
    style: str,
    *,
    tool_choice: Union[str, Dict[str, Any]] = "auto",
    parallel_tool_calls: bool = True,
    reasoning: Optional[bool] = None,
) -> str:
    """The structural tag (JSON text) for an OpenAI-style tool list in a call style."""
    import json

    if not isinstance(tools, str):
        tools = json.dumps(tools)
    if isinstance(tool_choice, dict):
        tool_choice = tool_choice.get("function", {}).get("name") or tool_choice.get("name", "")
    return _core.Grammar.tools_structural_tag(tools, style, tool_choice, parallel_tool_calls, reasoning)
