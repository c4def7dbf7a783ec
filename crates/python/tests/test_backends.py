"""The vLLM and SGLang backends, against the real packages when installed, otherwise against the
stand-in interfaces in tests/interfaces (see its README): a Llama 3 vocabulary, every request
type, a tool call token by token, rollback, validation, jump-forward, copies."""

import importlib
import json
import sys
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

import structgen as sg

from test_structgen import LLAMA3, allowed, need


def _engine(name: str) -> str:
    """'real' when the engine is installed, else 'stand-in' (its interface put on sys.path)."""
    try:
        importlib.import_module(name)
        return "real"
    except ImportError:
        sys.path.insert(0, str(Path(__file__).parent / "interfaces"))
        return "stand-in"


VLLM = _engine("vllm")
SGLANG = _engine("sglang")
SCHEMA = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}


@pytest.fixture(scope="module")
def tok():
    tokenizers = need("tokenizers")
    return tokenizers.Tokenizer.from_file(str(LLAMA3))


def _ids(tok, text):
    return tok.encode(text, add_special_tokens=False).ids


def test_vllm_backend_runs_each_request_type(tok):
    from vllm.v1.structured_output.backend_types import StructuredOutputOptions as O

    from structgen.contrib.vllm import StructgenBackend, StructgenGrammar, install

    backend = StructgenBackend(vllm_config=SimpleNamespace(), tokenizer=tok, vocab_size=128256)
    specs = {
        O.JSON: (json.dumps(SCHEMA), '{"city": "Paris"}'),
        O.JSON_OBJECT: ("", '{"a": [1, 2]}'),
        O.REGEX: (r"\d{3}-[a-z]+", "123-abc"),
        O.GRAMMAR: ('root ::= "yes" | "no"', "no"),
        O.CHOICE: (json.dumps(["red", "green"]), "green"),
        O.STRUCTURAL_TAG: (
            json.dumps({"structures": [{"begin": "<f>", "schema": SCHEMA, "end": "</f>"}], "triggers": ["<f>"]}),
            'hi <f>{"city": "Oslo"}</f>',
        ),
    }
    bitmask = np.zeros(sg.get_bitmask_shape(2, 128256), dtype=np.int32)
    for kind, (spec, text) in specs.items():
        grammar = backend.compile_grammar(kind, spec)
        assert isinstance(grammar, StructgenGrammar)
        ids = _ids(tok, text)
        # Free text may follow a structural tag's call; every other grammar ends after one value.
        expected = ids + ids if kind == O.STRUCTURAL_TAG else ids
        assert grammar.validate_tokens(ids + ids) == expected, kind
        for t in ids:
            grammar.fill_bitmask(bitmask, 1)
            assert t in allowed(bitmask, 1), (kind, t)
            assert grammar.accept_tokens("r", [t])
        assert not grammar.is_terminated()
        assert grammar.accept_tokens("r", [128009]) and grammar.is_terminated(), kind
        grammar.rollback(1)
        grammar.reset()
        assert grammar.num_processed_tokens == 0
    stop = backend.compile_grammar(O.GRAMMAR, 'root ::= "yes" | "no"', stop_token_ids={128001})
    assert stop.accept_tokens("r", _ids(tok, "no")) and not stop.accept_tokens("r", [128009])
    assert stop.accept_tokens("r", [128001]) and stop.is_terminated()
    bad = backend.compile_grammar(O.GRAMMAR, 'root ::= "yes" | "no"')
    assert not bad.accept_tokens("r", _ids(tok, "yes") + _ids(tok, "yes"))
    assert bad.accept_tokens("r", _ids(tok, "yes")), "a refused batch leaves no token behind"
    with pytest.raises(RuntimeError, match="EBNF"):
        backend.compile_grammar(O.GRAMMAR, "root ::= (")
    jump = backend.compile_grammar(O.JSON, json.dumps(SCHEMA))
    assert jump.find_jump_string() == "{"
    install()
    import vllm.v1.structured_output as manager

    assert manager.XgrammarBackend is StructgenBackend
    print(f"vLLM interface: {VLLM}")


def test_sglang_backend_is_registered_and_runs(tok):
    from sglang.srt.constrained import base_grammar_backend as base

    import structgen.contrib.sglang as sgl

    sgl.register()
    args = SimpleNamespace(grammar_backend="structgen", constrained_json_disable_any_whitespace=True)
    if SGLANG == "stand-in":
        backend = base.create_grammar_backend(args, tok, 128256, {128009})
    else:
        backend = base.GRAMMAR_BACKEND_REGISTRY["structgen"](args, tok, 128256, {128009})
    assert isinstance(backend, sgl.StructgenGrammarBackend)
    g = backend.dispatch_json(json.dumps(SCHEMA))
    assert g.try_jump_forward(tok) == ([], '{"city": "')
    s, state = g.jump_forward_str_state(g.try_jump_forward(tok))
    old = _ids(tok, s)
    for t in old:
        g.accept_token(t)
    new = _ids(tok, '{"city": "Rome"}')
    g.jump_and_retokenize(old, new[: len(old) + 1], state)
    copy = g.copy()
    mask = np.zeros(sg.get_bitmask_shape(3, 128256), dtype=np.int32)
    copy.fill_vocab_mask(mask, 0)
    assert new[0] in allowed(mask)
    row = SimpleNamespace
    g.fill_vocab_mask_batched([row(grammar=copy, row=2), row(grammar=g, row=1)], mask)
    assert np.array_equal(mask[0], mask[2]) and not mask[0].all() and mask[1].any()
    g.reset_vocab_mask(mask)
    assert (mask == -1).all()
    with pytest.raises(ValueError, match="not allowed"):
        g.accept_token(_ids(tok, "\n")[0])  # a raw newline inside a JSON string
    def invalid(g):
        if hasattr(base, "InvalidGrammarObject"):
            return isinstance(g, base.InvalidGrammarObject) and "regex" in g.error_message
        return g is getattr(base, "INVALID_GRAMMAR_OBJ", None)

    assert isinstance(backend.dispatch_json("$$ANY$$"), sgl.StructgenGrammarObject)
    assert invalid(backend.dispatch_regex("("))
    e = backend.dispatch_ebnf('root ::= "a"')
    e.accept_token(_ids(tok, "a")[0])
    e.accept_token(128009)
    assert e.is_terminated()
    e.rollback(1)
    assert not e.is_terminated()
    tag = backend.dispatch_structural_tag(json.dumps(
        {"structures": [{"begin": "<f>", "schema": SCHEMA, "end": "</f>"}], "triggers": ["<f>"]}))
    for t in _ids(tok, 'x<f>{"city": "A"}</f>'):
        tag.accept_token(t)
    print(f"SGLang interface: {SGLANG}")


def test_backend_masks_on_torch_tensors(tok):
    torch = need("torch")
    from structgen.contrib.sglang import StructgenGrammarBackend

    backend = StructgenGrammarBackend(tok, 128256, {128009})
    g = backend.dispatch_ebnf('root ::= "ok"')
    mask = g.allocate_vocab_mask(128256, 2, "cpu")
    assert mask.dtype == torch.int32 and mask.shape == (2, 4008)
    g.fill_vocab_mask(mask, 1)
    logits = torch.zeros(2, 128256)
    g.apply_vocab_mask(logits, mask)
    finite = torch.isfinite(logits[1]).nonzero().flatten().tolist()
    assert finite == allowed(mask.numpy(), 1).tolist()
    assert _ids(tok, "ok")[0] in finite and len(finite) < 10
    assert torch.isfinite(logits[0]).all()  # row 0 as allocated: every token allowed
