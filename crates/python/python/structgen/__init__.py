"""structgen: structured generation for language models — grammars, JSON Schema, regular
expressions, structural tags and tool lists compiled against a tokenizer's vocabulary into token
masks — with xgrammar's Python API (`TokenizerInfo`, `GrammarCompiler`, `GrammarMatcher`, ...).

The engine is Rust (`structgen._core`); compiling and mask filling release the GIL, and masks are
written straight into the caller's int32 torch tensor or NumPy array.
"""

from . import exception, structural_tag, testing
from .compiler import CompiledGrammar, GrammarCompiler, default_limits, tools_structural_tag
from .config import get_max_recursion_depth, max_recursion_depth, set_max_recursion_depth
from .exception import (
    DeserializeFormatError,
    DeserializeVersionError,
    InvalidJSONError,
    InvalidStructuralTagError,
    StructgenError,
)
from .grammar import Grammar
from .matcher import (
    BatchGrammarMatcher,
    GrammarMatcher,
    allocate_token_bitmask,
    apply_token_bitmask_inplace,
    get_bitmask_shape,
    reset_token_bitmask,
)
from .structural_tag import StructuralTag, StructuralTagItem
from .tokenizer_info import TokenizerInfo, VocabType

__version__ = "0.1.0"


def __getattr__(name: str):
    if name == "bitmask_dtype":
        import torch

        return torch.int32
    raise AttributeError(f"module 'structgen' has no attribute {name!r}")
