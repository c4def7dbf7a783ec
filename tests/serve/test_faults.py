"""Bad input and faults: each gets OpenAI's error object naming the field, the server never
crashes, a full queue answers 503, a client that leaves mid-stream frees its slot, SIGTERM lets the
requests in flight finish."""
import json
import re
import signal
import threading
import time

import httpx
import pytest

TOOLS = [{"type": "function", "function": {"name": "f", "parameters": {
    "type": "object", "properties": {"x": {"type": "integer"}}, "required": ["x"]}}}]
MSG = [{"role": "user", "content": "hi"}]


def post(server, body, path="/chat/completions", **kw):
    data = body if isinstance(body, (bytes, str)) else json.dumps(body)
    return httpx.post(server.base + path, content=data, headers={"content-type": "application/json"},
                      timeout=300, **kw)


def error_of(r, status):
    assert r.status_code == status, (r.status_code, r.text)
    e = r.json()["error"]
    assert e["message"] and e["type"]
    return e


@pytest.mark.parametrize("body,status,param", [
    (b"{not json", 400, None),
    ({"messages": "hi"}, 400, "messages"),
    ({"messages": MSG, "max_tokens": "many"}, 400, "max_tokens"),
    ({"messages": MSG, "n": 2}, 400, "n"),
    ({"messages": MSG, "logprobs": True}, 400, "logprobs"),
    ({"messages": MSG, "temperature": -1}, 400, "temperature"),
    ({"messages": [{"role": "user", "content": [{"type": "image_url", "image_url": {"url": "x"}}]}]}, 400,
     "messages[0].content[0].type"),
    ({"messages": MSG, "tools": [{"type": "function", "function": {"name": "f", "parameters": {
        "type": "object", "properties": {"x": {"type": "string", "pattern": "(unclosed"}}}}}]}, 400,
     "tools[0].function.parameters.properties.x.pattern"),
    ({"messages": MSG, "tools": TOOLS, "tool_choice": {"type": "function", "function": {"name": "g"}}}, 400,
     "tool_choice.function.name"),
    ({"messages": MSG, "response_format": {"type": "json_schema", "json_schema": {"name": "s",
      "schema": {"type": "object", "required": 5}}}}, 400, "response_format.json_schema.schema.required"),
    ({"messages": [{"role": "user", "content": "word " * 9000}]}, 400, "messages"),
    ({"messages": MSG, "max_tokens": 100000000}, 400, "max_tokens"),
    ({"messages": MSG, "model": "gpt-4o"}, 404, "model"),
])
def test_bad_requests_name_the_field(server, body, status, param):
    e = error_of(post(server, body), status)
    if param is not None:
        assert e["param"] == param, e
    # The server is still up and answering.
    assert httpx.get(server.url + "/health", timeout=30).status_code == 200


def test_completions_take_vllm_grammar_fields(server):
    r = post(server, {"prompt": "The answer is", "guided_choice": ["yes", "no"], "max_tokens": 8,
                      "temperature": 0}, path="/completions")
    assert r.status_code == 200, r.text
    assert r.json()["choices"][0]["text"] in ("yes", "no")
    r = post(server, {"prompt": "Number:", "structured_outputs": {"regex": "[0-9]{3}"}, "max_tokens": 8,
                      "temperature": 0}, path="/completions")
    assert re.fullmatch("[0-9]{3}", r.json()["choices"][0]["text"]), r.text
    e = error_of(post(server, {"prompt": "x", "guided_grammar": "root ::= (", "max_tokens": 4},
                      path="/completions"), 400)
    assert e["param"] == "guided_grammar"


def test_unenforced_keywords_are_named(server, spawn):
    schema = {"type": "object", "properties": {"tags": {"type": "array", "items": {"type": "string"},
                                                         "contains": {"const": "a"}, "minItems": 2}}}
    body = {"messages": MSG, "max_tokens": 16, "temperature": 0,
            "response_format": {"type": "json_schema", "json_schema": {"name": "s", "schema": schema}}}
    r = post(server, body)
    assert r.status_code == 200, r.text
    un = r.json()["structgen"]["unenforced"]
    assert un and un[0]["path"] == "/properties/tags/contains", un
    assert r.headers["x-structgen-unenforced"].startswith(f"{len(un)}; first: response_format.json_schema.schema")
    strict = spawn("--schema-policy", "refuse")
    e = error_of(post(strict, body), 400)
    assert e["param"] == "response_format.json_schema.schema.properties.tags.contains", e
    assert e["code"] == "schema_not_enforceable"


def test_body_limit_and_api_key(spawn):
    s = spawn("--api-key", "sekret", "--max-body-bytes", "2000")
    e = error_of(httpx.get(s.base + "/models", timeout=30), 401)
    assert e["code"] == "invalid_api_key"
    ok = httpx.get(s.base + "/models", headers={"authorization": "Bearer sekret"}, timeout=30)
    assert ok.status_code == 200
    big = {"messages": [{"role": "user", "content": "x" * 5000}]}
    r = httpx.post(s.base + "/chat/completions", json=big, headers={"authorization": "Bearer sekret"},
                   timeout=30)
    error_of(r, 413)


def test_a_full_queue_answers_503(spawn):
    s = spawn("--parallel", "1", "--max-queue", "2")
    results = []

    def go():
        results.append(post(s, {"messages": MSG, "max_tokens": 48, "temperature": 0}))

    threads = [threading.Thread(target=go) for _ in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    codes = sorted(r.status_code for r in results)
    assert codes.count(200) >= 2 and 503 in codes, codes
    busy = next(r for r in results if r.status_code == 503)
    assert busy.headers["retry-after"] == "1"


def metric(server, name):
    text = httpx.get(server.url + "/metrics", timeout=30).text
    m = re.search(rf"^structgen_{name} (\S+)$", text, re.M)
    return float(m.group(1)) if m else None


def test_a_client_leaving_mid_stream_frees_its_slot(spawn):
    s = spawn("--parallel", "2")
    body = {"messages": MSG, "max_tokens": 2000, "temperature": 0.8, "stream": True}
    with httpx.stream("POST", s.base + "/chat/completions", json=body, timeout=60) as r:
        for i, _ in enumerate(r.iter_lines()):
            if i > 4:
                break
    deadline = time.time() + 30
    while time.time() < deadline and metric(s, "active_sequences") != 0:
        time.sleep(0.1)
    assert metric(s, "active_sequences") == 0
    assert metric(s, "in_flight_requests") == 0


def test_sigterm_drains_requests_in_flight(spawn):
    s = spawn()
    out = {}

    def go():
        out["r"] = post(s, {"messages": MSG, "max_tokens": 40, "temperature": 0})

    t = threading.Thread(target=go)
    t.start()
    time.sleep(1.0)
    code = s.stop(signal.SIGTERM)
    t.join()
    assert out["r"].status_code == 200, out["r"].text
    assert code == 0, "".join(s.log)


def test_wrong_method_and_history_edge_cases(server):
    r = httpx.get(server.base + "/chat/completions", timeout=30)
    e = error_of(r, 405)
    assert e["code"] == "method_not_allowed"
    history = [{"role": "user", "content": "hi"},
               {"role": "assistant", "content": None, "tool_calls": [
                   {"id": "c0", "type": "function", "function": {"name": "f", "arguments": ""}}]},
               {"role": "tool", "tool_call_id": "c0", "content": "{}"}]
    r = post(server, {"messages": history, "tools": TOOLS, "max_tokens": 8, "temperature": 0})
    assert r.status_code == 200, r.text
    history[1]["tool_calls"][0]["function"]["arguments"] = "[1]"
    e = error_of(post(server, {"messages": history, "tools": TOOLS, "max_tokens": 8}), 400)
    assert e["param"] == "messages[1].tool_calls[0].function.arguments"


def test_stop_strings_never_cut_a_call(server):
    r = post(server, {"messages": MSG, "tools": TOOLS, "tool_choice": "required", "stop": ["\n", "x"],
                      "max_tokens": 64, "temperature": 0})
    assert r.status_code == 200, r.text
    m = r.json()["choices"][0]["message"]
    assert m["tool_calls"] and json.loads(m["tool_calls"][0]["function"]["arguments"])["x"] is not None
    assert "\n" not in (m["content"] or "")


def test_a_client_leaving_during_prefill_frees_its_slot(spawn):
    s = spawn("--parallel", "2")
    body = {"messages": [{"role": "user", "content": "word " * 3000}], "tools": TOOLS,
            "tool_choice": "required", "max_tokens": 1500, "temperature": 0.8, "stream": True}
    with httpx.stream("POST", s.base + "/chat/completions", json=body, timeout=60) as r:
        for _ in r.iter_lines():
            break
    deadline = time.time() + 30
    while time.time() < deadline and metric(s, "in_flight_requests") != 0:
        time.sleep(0.1)
    assert metric(s, "in_flight_requests") == 0
    assert metric(s, "active_sequences") == 0
