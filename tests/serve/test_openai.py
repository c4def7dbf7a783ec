"""`structgen serve` through the official `openai` SDK: tool-call round trips, tool_choice
required / named / none, streaming tool calls, json_schema, an agent loop, and a bounded load test
in which every answer is checked against its own request."""
import asyncio
import json

import jsonschema
import openai
import pytest

WEATHER = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Current weather in a city",
        "parameters": {
            "type": "object",
            "properties": {
                "city": {"type": "string", "maxLength": 40},
                "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]},
            },
            "required": ["city", "unit"],
            "additionalProperties": False,
        },
    },
}
TIME = {
    "type": "function",
    "function": {
        "name": "get_time",
        "parameters": {
            "type": "object",
            "properties": {"zone": {"type": "string", "maxLength": 30}},
            "required": ["zone"],
        },
    },
}
ASK = [{"role": "user", "content": "What's the weather in Paris?"}]


def client(server, **kw):
    return openai.OpenAI(base_url=server.base, api_key="none", max_retries=0, **kw)


def check_calls(calls, tools):
    """Each call names one of `tools` and its arguments are valid under that tool's schema."""
    by_name = {t["function"]["name"]: t["function"]["parameters"] for t in tools}
    for c in calls:
        assert c.type == "function"
        assert c.function.name in by_name, c.function.name
        jsonschema.validate(json.loads(c.function.arguments), by_name[c.function.name])


def test_models_lists_the_served_model(server):
    models = client(server).models.list()
    assert [m.id for m in models.data] == ["smollm2-135m"]


def test_required_call_then_tool_result_then_answer(server):
    c = client(server)
    r = c.chat.completions.create(model="smollm2-135m", messages=ASK, tools=[WEATHER, TIME],
                                  tool_choice="required", temperature=0, max_tokens=96)
    choice = r.choices[0]
    assert choice.finish_reason == "tool_calls"
    calls = choice.message.tool_calls
    assert calls and calls[0].id
    check_calls(calls, [WEATHER, TIME])
    assert r.usage.completion_tokens > 0 and r.usage.prompt_tokens > 0
    ext = r.model_extra["structgen"]
    assert ext["constrained"] and ext["grammar"]["mask_us_p99"] >= 0
    messages = ASK + [choice.message.model_dump(exclude_none=True)] + [
        {"role": "tool", "tool_call_id": call.id, "content": json.dumps({"temperature": 21})}
        for call in calls]
    r2 = c.chat.completions.create(model="smollm2-135m", messages=messages, tools=[WEATHER, TIME],
                                   tool_choice="none", temperature=0, max_tokens=24)
    assert r2.choices[0].message.tool_calls is None
    assert r2.choices[0].message.content


def test_named_function_always_calls_it(server):
    r = client(server).chat.completions.create(
        model="smollm2-135m", messages=[{"role": "user", "content": "Hello!"}], tools=[WEATHER, TIME],
        tool_choice={"type": "function", "function": {"name": "get_time"}}, temperature=0, max_tokens=64)
    calls = r.choices[0].message.tool_calls
    assert calls and all(c.function.name == "get_time" for c in calls)
    check_calls(calls, [TIME])


def test_none_never_calls(server):
    r = client(server).chat.completions.create(
        model="smollm2-135m", messages=ASK, tools=[WEATHER], tool_choice="none", temperature=0,
        max_tokens=32)
    assert r.choices[0].message.tool_calls is None
    assert "<tool_call>" not in (r.choices[0].message.content or "")


def test_streamed_tool_calls_reassemble_to_the_whole_answer(server):
    c = client(server)
    kw = dict(model="smollm2-135m", messages=ASK, tools=[WEATHER, TIME], tool_choice="required",
              temperature=0, max_tokens=96)
    whole = c.chat.completions.create(**kw)
    calls, content, finish, usage = {}, "", None, None
    for chunk in c.chat.completions.create(stream=True, stream_options={"include_usage": True}, **kw):
        if chunk.usage:
            usage = chunk.usage
        for ch in chunk.choices:
            content += ch.delta.content or ""
            finish = ch.finish_reason or finish
            for d in ch.delta.tool_calls or []:
                slot = calls.setdefault(d.index, {"id": None, "name": None, "arguments": ""})
                if d.id:
                    assert slot["id"] is None
                    slot["id"] = d.id
                if d.function and d.function.name:
                    slot["name"] = d.function.name
                if d.function and d.function.arguments:
                    assert slot["name"], "arguments before the name"
                    slot["arguments"] += d.function.arguments
    got = [(v["name"], v["arguments"]) for _, v in sorted(calls.items())]
    want = [(t.function.name, t.function.arguments) for t in whole.choices[0].message.tool_calls]
    assert got == want
    assert content == (whole.choices[0].message.content or "")
    assert finish == whole.choices[0].finish_reason
    assert usage and usage.completion_tokens == whole.usage.completion_tokens


def test_json_schema_response_format(server):
    schema = {"type": "object", "properties": {"name": {"type": "string", "maxLength": 20},
                                               "age": {"type": "integer", "minimum": 0, "maximum": 150}},
              "required": ["name", "age"], "additionalProperties": False}
    r = client(server).chat.completions.create(
        model="smollm2-135m", messages=[{"role": "user", "content": "Invent a person."}],
        response_format={"type": "json_schema", "json_schema": {"name": "p", "schema": schema, "strict": True}},
        temperature=0, max_tokens=64)
    jsonschema.validate(json.loads(r.choices[0].message.content), schema)


def test_tools_or_a_json_answer_under_auto(server):
    """OpenAI's reading of tools + response_format: either calls, or content in the format."""
    schema = {"type": "object", "properties": {"name": {"type": "string", "maxLength": 20}},
              "required": ["name"], "additionalProperties": False}
    c = client(server)
    kinds = set()
    for prompt in ["What's the weather in Paris?", "Tell me your name.", "Name a city."]:
        r = c.chat.completions.create(
            model="smollm2-135m", messages=[{"role": "user", "content": prompt}], tools=[WEATHER],
            response_format={"type": "json_schema", "json_schema": {"name": "n", "schema": schema}},
            temperature=0, max_tokens=64)
        m = r.choices[0].message
        if m.tool_calls:
            check_calls(m.tool_calls, [WEATHER])
            kinds.add("calls")
        else:
            jsonschema.validate(json.loads(m.content), schema)
            kinds.add("json")
        assert r.model_extra["structgen"]["post_check_violation"] is None
    assert kinds


def test_an_agent_loop_runs_tools_until_an_answer(server):
    c = client(server)
    messages = [{"role": "system", "content": "Use tools, then answer."}] + ASK
    tools = [WEATHER]
    ran = 0
    for turn in range(3):
        r = c.chat.completions.create(model="smollm2-135m", messages=messages, tools=tools,
                                      tool_choice="required" if turn == 0 else "none",
                                      temperature=0, max_tokens=64)
        msg = r.choices[0].message
        messages.append(msg.model_dump(exclude_none=True))
        if not msg.tool_calls:
            break
        check_calls(msg.tool_calls, tools)
        for call in msg.tool_calls:
            args = json.loads(call.function.arguments)
            messages.append({"role": "tool", "tool_call_id": call.id,
                             "content": json.dumps({"city": args["city"], "temperature": 18})})
            ran += 1
    assert ran >= 1 and messages[-1]["role"] == "assistant" and not messages[-1].get("tool_calls")


def tool_list(i):
    """A tool list of its own for request i: names and argument names differ per request."""
    return [{"type": "function", "function": {
        "name": f"lookup_{i}", "parameters": {"type": "object", "properties": {
            f"key_{i}": {"type": "string", "maxLength": 12}, "n": {"type": "integer", "minimum": i}},
            "required": [f"key_{i}", "n"], "additionalProperties": False}}}]


def test_load_32_clients_4_requests_each_answer_its_own_request(server):
    c = openai.AsyncOpenAI(base_url=server.base, api_key="none", max_retries=0, timeout=600)

    async def one(i):
        tools = tool_list(i)
        r = await c.chat.completions.create(
            model="smollm2-135m", messages=[{"role": "user", "content": f"Look up item {i}."}],
            tools=tools, tool_choice="required", parallel_tool_calls=False, temperature=0.7, seed=i,
            max_tokens=48)
        return i, tools, r

    async def client_loop(k):
        return [await one(k * 4 + j) for j in range(4)]

    async def main():
        done = await asyncio.gather(*(client_loop(k) for k in range(32)))
        return [x for xs in done for x in xs]

    results = asyncio.run(main())
    assert len(results) == 128
    with_calls = 0
    for i, tools, r in results:
        calls = r.choices[0].message.tool_calls
        if not calls:
            # Only a call cut short by max_tokens may be missing.
            assert r.choices[0].finish_reason == "length", (i, r)
            continue
        with_calls += 1
        check_calls(calls, tools)
        for call in calls:
            assert call.function.name == f"lookup_{i}"
            assert f"key_{i}" in json.loads(call.function.arguments)
    assert with_calls >= 100, with_calls
