"""Tests of the structgen Python package on its own (NumPy buffers, no torch): a real Llama 3
vocabulary, a tool list, masks along a tool call, errors, buffers, batches.

Run by scripts/python-tests.sh (and CI) in a virtual environment with the built wheel."""

import importlib
import json
import os
import threading
import time
from pathlib import Path

import numpy as np
import pytest

import structgen as sg
from structgen.testing import _is_grammar_accept_string

SHARED = Path(os.environ.get("STRUCTGEN_SHARED", Path(__file__).resolve().parents[4] / "shared"))
LLAMA3 = SHARED / "tokenizers" / "llama3.tokenizer.json"
TOOLS = [
    {"type": "function", "function": {"name": "get_weather", "parameters": {
        "type": "object", "properties": {"city": {"type": "string"}, "days": {"type": "integer"}},
        "required": ["city"]}}},
    {"type": "function", "function": {"name": "get_time", "parameters": {
        "type": "object", "properties": {"zone": {"type": "string"}}, "required": ["zone"]}}},
]


def need(module: str):
    """`module`, imported: a skip without it, or a failure when STRUCTGEN_TESTS_REQUIRE_DATA is set
    (scripts/test.sh sets it: there every test must run)."""
    if os.environ.get("STRUCTGEN_TESTS_REQUIRE_DATA"):
        try:
            return importlib.import_module(module)
        except ImportError as e:
            pytest.fail(f"{module} is not installed ({e}), and STRUCTGEN_TESTS_REQUIRE_DATA is set")
    return pytest.importorskip(module)


@pytest.fixture(scope="module")
def llama3():
    if not LLAMA3.exists():
        pytest.fail(f"{LLAMA3} is missing (run beside ../shared)")
    info = sg.TokenizerInfo.from_tokenizer_json(str(LLAMA3))
    tokenizers = need("tokenizers")
    return info, tokenizers.Tokenizer.from_file(str(LLAMA3))


def allowed(bitmask: np.ndarray, row: int = 0) -> np.ndarray:
    bits = np.unpackbits(bitmask[row].view(np.uint8), bitorder="little")
    return np.flatnonzero(bits)


def test_vocabulary_from_tokenizer_json(llama3):
    info, _ = llama3
    assert info.vocab_size == 128256
    assert info.vocab_type == sg.VocabType.BYTE_LEVEL
    assert 128009 in info.stop_token_ids
    assert info.decoded_vocab[1131] == b"..."


def test_tool_call_masks_along_the_call(llama3):
    info, tok = llama3
    compiler = sg.GrammarCompiler(info)
    compiled = compiler.compile_tools(TOOLS, "llama", tool_choice="required")
    matcher = sg.GrammarMatcher(compiled)
    bitmask = np.zeros(sg.get_bitmask_shape(1, info.vocab_size), dtype=np.int32)
    call = '<function=get_weather>{"city": "Paris", "days": 3}</function>'
    ids = tok.encode(call, add_special_tokens=False).ids + [128009]
    for t in ids:
        need_apply = matcher.fill_next_token_bitmask(bitmask)
        assert need_apply
        ok = allowed(bitmask)
        assert t in ok, f"token {t} ({tok.id_to_token(t)!r}) not allowed"
        assert matcher.accept_token(t)
    assert matcher.is_terminated()
    with pytest.raises(RuntimeError, match="terminated"):
        matcher.fill_next_token_bitmask(bitmask)
    matcher.rollback(1)
    assert not matcher.is_terminated() and matcher.is_completed()


def test_refused_token_and_arguments(llama3):
    info, tok = llama3
    compiled = sg.GrammarCompiler(info).compile_tools(TOOLS, "llama", tool_choice="required")
    matcher = sg.GrammarMatcher(compiled)
    assert matcher.accept_string('<function=get_time>{"zone": ')
    assert not matcher.accept_string("42")  # zone is a string
    assert matcher.accept_string('"UTC"}</function>')
    assert not matcher.accept_string('<function=get_weather>{"days": 1}</function>x')


def test_masks_match_the_brute_force_oracle(llama3):
    """Every allowed token is accepted by a fork, every refused one is not (a sample)."""
    info, tok = llama3
    compiled = sg.GrammarCompiler(info).compile_json_schema(
        json.dumps({"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}),
        any_whitespace=False,
    )
    matcher = sg.GrammarMatcher(compiled)
    bitmask = np.zeros(sg.get_bitmask_shape(1, info.vocab_size), dtype=np.int32)
    rng = np.random.default_rng(7)
    for piece in ['{"n": ', "12", "}"]:
        matcher.fill_next_token_bitmask(bitmask)
        ok = set(allowed(bitmask).tolist())
        for t in rng.choice(info.vocab_size, 300, replace=False).tolist() + sorted(ok)[:50]:
            assert matcher.fork().accept_token(t) == (t in ok), f"token {t}"
        assert matcher.accept_string(piece)
    assert matcher.is_completed()


def test_jump_forward_and_batch(llama3):
    info, _ = llama3
    compiler = sg.GrammarCompiler(info)
    g = compiler.compile_json_schema(
        json.dumps({"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}),
        any_whitespace=False,
    )
    m = sg.GrammarMatcher(g)
    assert m.find_jump_forward_string() == '{"name": "'
    matchers = [sg.GrammarMatcher(g) for _ in range(3)]
    matchers[1].accept_string('{"name": "a')
    batch = np.zeros(sg.get_bitmask_shape(4, info.vocab_size), dtype=np.int32)
    sg.BatchGrammarMatcher().batch_fill_next_token_bitmask(matchers, batch, indices=[3, 0, 1])
    one = np.zeros(sg.get_bitmask_shape(1, info.vocab_size), dtype=np.int32)
    for m, row in zip(matchers, [3, 0, 1]):
        m.fill_next_token_bitmask(one)
        assert np.array_equal(one[0], batch[row])
    assert not batch[2].any()
    # A pool of its own gives the same rows; a bad size is refused.
    own = np.zeros_like(batch)
    sg.BatchGrammarMatcher(max_threads=2).batch_fill_next_token_bitmask(matchers, own, indices=[3, 0, 1])
    assert np.array_equal(own, batch)
    assert sg.BatchGrammarMatcher(max_threads=3)._pool.threads == 3
    for bad in (0, -1, 1.5, True):
        with pytest.raises(RuntimeError, match="max_threads"):
            sg.BatchGrammarMatcher(max_threads=bad)


def test_batch_warm_ahead_changes_no_mask(llama3):
    """Batch fills that warm the masks ahead (the default) give, at every step of a tool call,
    the masks of fills that never warm, on a compiler of their own (cold caches)."""
    info, tok = llama3
    text = '<function=get_time>{"zone": "UTC"}</function>'
    ids = tok.encode(text, add_special_tokens=False).ids
    runs = {}
    for warm in (True, False):
        g = sg.GrammarCompiler(info).compile_tools(TOOLS, "llama", tool_choice="required")
        matchers = [sg.GrammarMatcher(g) for _ in range(2)]
        batch = sg.BatchGrammarMatcher(warm_ahead=warm)
        masks = []
        for t in ids:
            bitmask = np.zeros(sg.get_bitmask_shape(2, info.vocab_size), dtype=np.int32)
            batch.batch_fill_next_token_bitmask(matchers, bitmask)
            masks.append(bitmask.copy())
            # Give the warmer time to compute ahead of the next fill.
            time.sleep(0.002)
            assert all(m.accept_token(t) for m in matchers)
        runs[warm] = masks
    assert len(runs[True]) == len(ids)
    for step, (a, b) in enumerate(zip(runs[True], runs[False])):
        assert np.array_equal(a, b), f"step {step}"


def test_limits_and_mask_self_check(llama3):
    info, tok = llama3
    limits = sg.default_limits()
    assert limits["max_compile_ms"] == 10_000 and limits["max_fsm_states"] == 2_000_000
    tight = sg.GrammarCompiler(info, limits={"max_fsm_states": 4})
    with pytest.raises(RuntimeError, match="max_fsm_states` = 4"):
        tight.compile_grammar('root ::= "abcdef"')
    assert sg.GrammarCompiler(info).compile_grammar('root ::= "abcdef"')
    with pytest.raises(RuntimeError, match="unknown limit"):
        sg.GrammarCompiler(info, limits={"max_rulez": 1})
    with pytest.raises(ValueError, match="non-negative"):
        sg.GrammarCompiler(info, limits={"max_rules": -1})
    m = sg.GrammarMatcher(sg.GrammarCompiler(info).compile_tools(TOOLS, "llama", tool_choice="required"))
    for t in tok.encode('<function=get_time>{"zone": "UTC"}</function>', add_special_tokens=False).ids:
        assert m.verify_next_token_bitmask(sample=8, seed=t) >= 1
        assert m.accept_token(t)
    assert m.verify_next_token_bitmask() >= 1


def test_any_order_members(llama3):
    info, _ = llama3
    schema = {"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "string"}},
              "required": ["a", "b"], "additionalProperties": False}
    for any_order, reordered in ((False, False), (True, True)):
        g = sg.Grammar.from_json_schema(schema, any_order=any_order)
        assert _is_grammar_accept_string(g, '{"a": 1, "b": "x"}')
        assert _is_grammar_accept_string(g, '{"b": "x", "a": 1}') == reordered
        assert not _is_grammar_accept_string(g, '{"b": "x"}')
    compiled = sg.GrammarCompiler(info).compile_json_schema(schema, any_order=True)
    m = sg.GrammarMatcher(compiled)
    assert m.accept_string('{"b": "x", "a": 1}') and m.is_completed()


def test_errors_name_what_and_where():
    with pytest.raises(RuntimeError, match=r"EBNF: 2:8: "):
        sg.Grammar.from_ebnf('root ::= "a"\nb ::= (')
    with pytest.raises(sg.StructgenError, match=r"/properties/n"):
        sg.Grammar.from_json_schema({"type": "object", "properties": {"n": {"type": "integr"}}})
    with pytest.raises(RuntimeError, match="offset"):
        sg.Grammar.from_regex("a(")
    with pytest.raises(RuntimeError, match="not supported"):
        sg.Grammar.from_structural_tag(
            {"type": "structural_tag", "format": {"type": "any_text", "max_tokens": 3}})


def test_bitmask_buffers_are_checked():
    info = sg.TokenizerInfo(["a", "b", "</s>"])
    m = sg.GrammarMatcher(sg.GrammarCompiler(info).compile_grammar('root ::= "a"+'))
    with pytest.raises(TypeError, match="int32"):
        m.fill_next_token_bitmask(np.zeros((1, 1), dtype=np.int64))
    ro = np.zeros((1, 1), dtype=np.int32)
    ro.setflags(write=False)
    with pytest.raises(ValueError, match="read-only"):
        m.fill_next_token_bitmask(ro)
    with pytest.raises(RuntimeError, match="index"):
        m.fill_next_token_bitmask(np.zeros((1, 1), dtype=np.int32), index=1)
    mask = np.zeros((2, 1), dtype=np.int32)
    m.fill_next_token_bitmask(mask, index=1)
    assert mask[0, 0] == 0 and mask[1, 0] == 0b001
    assert m.accept_string("aa") and m.is_completed()
    m.fill_next_token_bitmask(mask)
    assert mask[0, 0] == 0b101  # "a" or the stop token


def test_mask_filling_releases_the_gil(llama3):
    """Another Python thread keeps running during one long mask fill. The fill (a batch of cold
    masks of distinct grammars, on one thread) is made to last at least 100 ms; were the GIL held
    through it, the ticking thread would stall for all of it, so the longest pause between its
    ticks inside the fill must stay under half the fill."""
    info, _ = llama3
    compiler = sg.GrammarCompiler(info)
    pool = sg.BatchGrammarMatcher(max_threads=1)
    ticks = []
    stop = threading.Event()

    def tick():
        while not stop.is_set():
            ticks.append(time.perf_counter())

    t = threading.Thread(target=tick)
    t.start()
    try:
        while not ticks:
            time.sleep(0.001)
        n, made = 16, 0
        while True:
            # Each grammar's first state excludes a character of its own: no two share a mask,
            # through the compiler's cross-grammar cache or otherwise.
            grammars = [
                compiler.compile_grammar(f'root ::= [^"\\n\\u{0x100 + made + i:04x}]* "x" [a-z]+')
                for i in range(n)
            ]
            made += n
            matchers = [sg.GrammarMatcher(g) for g in grammars]
            bitmask = np.zeros(sg.get_bitmask_shape(n, info.vocab_size), dtype=np.int32)
            start = time.perf_counter()
            pool.batch_fill_next_token_bitmask(matchers, bitmask)
            end = time.perf_counter()
            if end - start >= 0.1 or n >= 1024:
                break
            n *= 2
    finally:
        stop.set()
        t.join()
    fill = end - start
    assert fill >= 0.1, f"{n} cold masks filled in {fill * 1e3:.1f} ms: too fast to tell"
    inside = [x for x in ticks if start < x < end]
    points = [start] + inside + [end]
    pause = max(b - a for a, b in zip(points, points[1:]))
    assert pause < fill / 2, (
        f"the other thread stalled {pause * 1e3:.1f} ms of a {fill * 1e3:.1f} ms fill "
        f"({len(inside)} ticks inside): the fill holds the GIL"
    )


def test_grammar_helpers():
    assert _is_grammar_accept_string(sg.Grammar.union(
        sg.Grammar.from_ebnf('root ::= "a"'), sg.Grammar.from_regex("b+")), "bbb")
    assert str(sg.Grammar.from_ebnf('root ::= "x" | "y"')).startswith("root ::=")
    with sg.max_recursion_depth(50):
        assert sg.get_max_recursion_depth() == 50
    assert sg.get_max_recursion_depth() == 10000


def test_lark_grammars(llama3):
    info, tokenizer = llama3
    digits = sg.Grammar.from_ebnf("root ::= [0-9]+")
    g = sg.Grammar.from_lark(
        'start: "f(" @num ("," @pair)* ")"\n%ignore " "',
        named_grammars={"num": digits, "pair": 'start: @num "-" @num'},
    )
    assert _is_grammar_accept_string(g, "f(1, 2-3 ,4-5)")
    assert not _is_grammar_accept_string(g, "f(1,2)")
    special = sg.Grammar.from_lark(
        'start: "x" <|eot_id|>', tokenizer_info=info)
    matcher = sg.GrammarMatcher(sg.GrammarCompiler(info).compile_grammar(special))
    assert matcher.accept_token(tokenizer.encode("x", add_special_tokens=False).ids[0])
    assert matcher.accept_token(128009) and matcher.is_completed()
    with pytest.raises(RuntimeError, match="line 2, column 6: expected ':' after rule name"):
        sg.Grammar.from_lark('start: item\nitem "x"')
    with pytest.raises(RuntimeError, match="vocabulary"):
        sg.Grammar.from_lark('start: <|eot_id|>')
    with pytest.raises(TypeError, match="named_grammars must be a dictionary"):
        sg.Grammar.from_lark("start: @a", named_grammars=[("a", digits)])
    with pytest.raises(TypeError, match="named grammar values"):
        sg.Grammar.from_lark("start: @a", named_grammars={"a": 3})


def test_grammar_serialization_round_trip():
    g = sg.Grammar.from_lark('start: "<" r ">" %json {"type": "integer"}\nr[lazy]: /[a-z]+/')
    again = sg.Grammar.deserialize_json(g.serialize_json())
    assert str(again) == str(g)
    assert _is_grammar_accept_string(again, "<a>12") and not _is_grammar_accept_string(again, "<ab>1")
    main = sg.Grammar.from_ebnf('main ::= "x" other\nother ::= "y"', root_rule_name="main")
    assert _is_grammar_accept_string(sg.Grammar.deserialize_json(main.serialize_json()), "xy")
    data = json.loads(g.serialize_json())
    with pytest.raises(sg.DeserializeVersionError):
        sg.Grammar.deserialize_json(json.dumps({**data, "__VERSION__": "v16"}))
    with pytest.raises(sg.DeserializeFormatError):
        sg.Grammar.deserialize_json(json.dumps({k: v for k, v in data.items() if k != "ebnf"}))
    with pytest.raises(sg.InvalidJSONError):
        sg.Grammar.deserialize_json("not json")
    with pytest.raises(RuntimeError, match="deserialize_json: the grammar's EBNF"):
        sg.Grammar.deserialize_json(json.dumps({**data, "ebnf": "root ::= ("}))
