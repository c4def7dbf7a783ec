"""`structgen.contrib.hf.LogitsProcessor` with transformers' `generate` on the CPU: a
random-weight LlamaForCausalLM (SmolLM2's architecture, shrunk) with SmolLM2's real tokenizer,
a batch of requests each with its own tool list. Random weights would write anything; every row
must still come out as a call of one of its own tools with arguments its schema accepts, and
each row must equal the same request generated alone (greedy decoding).

Run by scripts/python-tests.sh (and CI) in a virtual environment with the built wheel."""

import json
import os
from pathlib import Path

import pytest

from test_structgen import need

SHARED = Path(os.environ.get("STRUCTGEN_SHARED", Path(__file__).resolve().parents[4] / "shared"))
SMOLLM2 = SHARED / "tokenizers" / "smollm2-135m.tokenizer.json"

WEATHER = {"type": "function", "function": {"name": "get_weather", "parameters": {
    "type": "object", "properties": {"city": {"type": "string", "maxLength": 12},
                                     "unit": {"enum": ["C", "F"]}},
    "required": ["city", "unit"], "additionalProperties": False}}}
SEARCH = {"type": "function", "function": {"name": "search", "parameters": {
    "type": "object", "properties": {"query": {"type": "string", "maxLength": 16},
                                     "limit": {"type": "integer", "minimum": 1, "maximum": 9}},
    "required": ["query", "limit"], "additionalProperties": False}}}
ROWS = [[WEATHER], [SEARCH], [WEATHER, SEARCH]]


@pytest.fixture(scope="module")
def setup():
    torch = need("torch")
    transformers = need("transformers")
    if not SMOLLM2.is_file():
        pytest.fail(f"{SMOLLM2} is missing (../shared/tokenizers)")
    import structgen as sg

    tokenizer = transformers.PreTrainedTokenizerFast(
        tokenizer_file=str(SMOLLM2), eos_token="<|im_end|>", pad_token="<|endoftext|>"
    )
    torch.manual_seed(0)
    config = transformers.LlamaConfig(
        vocab_size=len(tokenizer) + 64,  # padded past the tokenizer, as real checkpoints are
        hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
        num_key_value_heads=2, max_position_embeddings=512,
        eos_token_id=tokenizer.eos_token_id, pad_token_id=tokenizer.pad_token_id,
    )
    model = transformers.LlamaForCausalLM(config).eval()
    info = sg.TokenizerInfo.from_huggingface(tokenizer, vocab_size=config.vocab_size)
    compiler = sg.GrammarCompiler(info)
    # Exact layout: random weights would otherwise write whitespace for ever.
    grammars = [compiler.compile_json_schema(json.dumps(call_schema(tools)), any_whitespace=False)
                for tools in ROWS]
    return torch, tokenizer, model, grammars


def call_schema(tools):
    """One call of one of `tools`: {"name": ..., "arguments": {...}}."""
    return {"anyOf": [{"type": "object", "properties": {
        "name": {"const": t["function"]["name"]}, "arguments": t["function"]["parameters"]},
        "required": ["name", "arguments"], "additionalProperties": False} for t in tools]}


def generate(setup, rows):
    torch, tokenizer, model, grammars = setup
    from structgen.contrib.hf import LogitsProcessor

    prompts = [f"Call a tool for request {i}." for i in rows]
    tokenizer.padding_side = "left"
    inputs = tokenizer(prompts, return_tensors="pt", padding=True)
    processor = LogitsProcessor([grammars[i] for i in rows])
    with torch.no_grad():
        out = model.generate(**inputs, max_new_tokens=120, do_sample=False,
                             logits_processor=[processor], pad_token_id=tokenizer.pad_token_id)
    texts = tokenizer.batch_decode(out[:, inputs["input_ids"].shape[1]:], skip_special_tokens=True)
    return texts, processor


def check_call(call, tools):
    """`call` is a call of one of `tools` with arguments of the schemas above."""
    assert set(call) == {"name", "arguments"}, call
    (tool,) = [t["function"] for t in tools if t["function"]["name"] == call["name"]]
    props = tool["parameters"]["properties"]
    args = call["arguments"]
    assert set(args) == set(tool["parameters"]["required"]), args
    for key, value in args.items():
        p = props[key]
        if "enum" in p:
            assert value in p["enum"], (key, value)
        elif p["type"] == "string":
            assert isinstance(value, str) and len(value) <= p["maxLength"], (key, value)
        else:
            assert isinstance(value, int) and p["minimum"] <= value <= p["maximum"], (key, value)


def test_a_batch_with_different_tool_lists_calls_only_its_own_tools(setup):
    texts, processor = generate(setup, [0, 1, 2])
    for i, text in enumerate(texts):
        # The last token a row samples (the stop token) reaches no processor call: the row's
        # grammar must be complete.
        assert processor.matchers[i].is_completed(), f"row {i} did not finish: {text!r}"
        check_call(json.loads(text), ROWS[i])
    assert json.loads(texts[0])["name"] == "get_weather"
    assert json.loads(texts[1])["name"] == "search"


def test_each_row_equals_the_request_generated_alone(setup):
    batch, _ = generate(setup, [0, 1, 2])
    for i in range(3):
        alone, _ = generate(setup, [i])
        assert alone[0] == batch[i], f"row {i}: batch {batch[i]!r} vs alone {alone[0]!r}"


def test_mismatched_batch_is_a_clear_error(setup):
    torch, tokenizer, model, grammars = setup
    from structgen.contrib.hf import LogitsProcessor

    processor = LogitsProcessor(grammars[:2])
    ids = torch.zeros((3, 4), dtype=torch.long)
    scores = torch.zeros((3, model.config.vocab_size))
    with pytest.raises(RuntimeError, match="2 compiled grammars for a batch of 3 rows"):
        processor(ids, scores)
