"""The process-wide recursion limit (xgrammar's `max_recursion_depth`): how deeply grammars may
nest (EBNF groups, regexes, structural-tag formats). structgen's Earley parser and mask walk do not
recurse, so the limit applies to reading grammars; the engine's own stack-safety bound (200
levels) still caps it."""

import os
from contextlib import contextmanager
from typing import Iterator

from . import _core

_DEFAULT = 10000
_MAX = 1_000_000


def _initial() -> int:
    env = os.environ.get("XGRAMMAR_MAX_RECURSION_DEPTH") or os.environ.get(
        "STRUCTGEN_MAX_RECURSION_DEPTH"
    )
    if env is not None:
        try:
            value = int(env)
        except ValueError:
            return _DEFAULT
        if 1 <= value:
            return min(value, _MAX)
    return _DEFAULT


_depth = _initial()
_core.set_nesting_limit(_depth)


def get_max_recursion_depth() -> int:
    """The current limit (default 10000, or $XGRAMMAR_MAX_RECURSION_DEPTH)."""
    return _depth


def set_max_recursion_depth(max_recursion_depth: int) -> None:
    """Sets the limit; it must be between 1 and 1,000,000."""
    global _depth
    if not isinstance(max_recursion_depth, int) or not 1 <= max_recursion_depth <= _MAX:
        raise RuntimeError(
            f"max_recursion_depth must be between 1 and {_MAX}, got {max_recursion_depth!r}"
        )
    _depth = max_recursion_depth
    _core.set_nesting_limit(max_recursion_depth)


@contextmanager
def max_recursion_depth(temp_depth: int) -> Iterator[None]:
    """Sets the limit for the duration of a `with` block."""
    saved = get_max_recursion_depth()
    set_max_recursion_depth(temp_depth)
    try:
        yield
    finally:
        set_max_recursion_depth(saved)
