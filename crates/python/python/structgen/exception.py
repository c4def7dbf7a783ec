"""Exceptions. Every error from the engine is a `StructgenError` (a `RuntimeError`, as xgrammar
raises) whose message is the one the CLI prints for the same input: what is wrong and where (line
and column of EBNF, offset in a regex, JSON path in a schema or structural tag)."""

from ._core import StructgenError


class InvalidJSONError(StructgenError):
    """Text that should be JSON is not."""


class InvalidStructuralTagError(StructgenError):
    """A structural tag that does not describe a valid format."""


class DeserializeFormatError(StructgenError):
    """Serialized data in the wrong format."""


class DeserializeVersionError(StructgenError):
    """Serialized data of another version."""
