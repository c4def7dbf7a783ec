"""structgen's bridge to BFCL's own code: the multi-turn backends, their checker and the model
handlers' decoders, from the bfcl-eval wheel, driven by `structgen bfcl` over stdin/stdout.

Protocol: one JSON object per line in, one per line out, in order. Every answer has "ok"; a
failed request answers {"ok": false, "error": "..."} and the bridge carries on. What the
backends print goes to stderr, so stdout carries answers only.

  {"op": "hello"}                       -> {"ok": true, "bfcl_eval": VERSION}
  {"op": "execute", "session": S, "entry": E, "calls": [{"name", "arguments"}]}
      runs the calls on session S's backend instances (made from E's initial_config on first use)
      -> {"ok": true, "calls": [call text], "results": [result text]}
  {"op": "end", "session": S}           -> drops S's instances
  {"op": "decode", "calls": [{"name", "arguments"}]}
      -> {"ok": true, "calls": [call text]}  (BFCL's convert_to_function_call)
  {"op": "decode", "handler": "module.Class", "text": T, "kind": "execute"|"ast", "language": L}
      the handler's decode_execute / decode_ast of T
      -> {"ok": true, "calls": [call text] | [{name: arguments}], "empty": bool (ast: BFCL's
         is_empty_output)} or {"ok": false, "error"} when the decoder raises
  {"op": "check", "entry": E, "ground_truth": [[call text]], "steps": [[[call text]]]}
      BFCL's multi_turn_checker over the decoded calls of every step of every turn
      -> {"ok": true, "valid": bool, "error_type": ..., "error_message": ...}
  {"op": "truth", "entry": E, "ground_truth": [[call text]]}
      the ground truth's calls with every argument named (positional ones by the backend
      method's signature) -> {"ok": true, "turns": [[{"name", "arguments"}]]}
  {"op": "holdout_message", "functions": [doc]}
      -> {"ok": true, "text": BFCL's user message announcing the functions}
  {"op": "memory_prompt", "session": S, "entry": E, "first_turn": [message]}
      the first turn of a memory entry as BFCL's handler sends it: the memory backend's
      instructions with its core memory as loaded (and, outside the prerequisite
      conversations, the agentic answer format) as the system message
      -> {"ok": true, "messages": [message]}
  {"op": "memory_flush", "session": S, "entry": E}
      saves S's memory as the snapshot the scenario's next entries load
      -> {"ok": true, "snapshot": {"core_memory", "archival_memory", ...}}
  {"op": "memory_restore", "entry": E, "snapshot": snapshot | null}
      makes `snapshot` the one E's scenario loads next (null: none, memory starts empty)
  {"op": "agentic_check", "text": T, "answers": [text]}
      BFCL's agentic_checker -> {"ok": true, "valid": bool, "error_type", "error_message"}

E is {"id", "category", "initial_config", "involved_classes"}. A memory backend's initial_config
names "model_result_dir", the folder its snapshots live under (structgen's, per mode).
"""

import ast
import collections
import copy
import importlib
import inspect
import json
import pathlib
import re
import sys
import types


def install_stubs():
    """Modules bfcl-eval imports but the parts used here never call.

    `constants.model_config` imports every model handler and its SDK; only `underscore_to_dot`
    is read from it (by the AST checker). The tree-sitter parsers decode Java and JavaScript
    answers only; `openai` is the client of a local server the handlers are not asked to start.
    """

    def stub(name, **attrs):
        if name in sys.modules:
            return
        try:
            importlib.import_module(name)
            return
        except Exception:
            pass
        m = types.ModuleType(name)
        m.__dict__.update(attrs)
        sys.modules[name] = m

    class Config:
        underscore_to_dot = False

    mc = types.ModuleType("bfcl_eval.constants.model_config")
    mc.MODEL_CONFIG_MAPPING = collections.defaultdict(Config)
    sys.modules["bfcl_eval.constants.model_config"] = mc

    def unavailable(*_args, **_kwargs):
        raise RuntimeError("not available in structgen's bridge")

    stub("bfcl_eval.model_handler.parser.java_parser", parse_java_function_call=unavailable)
    stub("bfcl_eval.model_handler.parser.js_parser", parse_javascript_function_call=unavailable)
    stub("openai", OpenAI=unavailable)


install_stubs()

from bfcl_eval.constants.default_prompts import (  # noqa: E402
    DEFAULT_USER_PROMPT_FOR_ADDITIONAL_FUNCTION_PROMPTING,
)
from bfcl_eval.constants.executable_backend_config import CLASS_FILE_PATH_MAPPING  # noqa: E402
from bfcl_eval.eval_checker.multi_turn_eval import multi_turn_utils  # noqa: E402
from bfcl_eval.eval_checker.multi_turn_eval.multi_turn_checker import (  # noqa: E402
    multi_turn_checker,
)
from bfcl_eval.model_handler.utils import convert_to_function_call  # noqa: E402

MODEL = "structgen"
sessions_made = collections.Counter()


def instance_prefix(model_name):
    return re.sub(r"[-./:]", "_", model_name) + "_"


def drop_instances(model_name):
    """Forgets the backend instances BFCL keeps in its module's globals for `model_name`."""
    prefix = instance_prefix(model_name)
    g = multi_turn_utils.__dict__
    for key in [k for k in g if k.startswith(prefix)]:
        del g[key]


def long_context(entry):
    category = entry.get("category", "")
    return "long_context" in category or "composite" in category


def initial_config(entry):
    """E's initial_config with a memory backend's folder as the Path BFCL's backends expect."""
    config = copy.deepcopy(entry["initial_config"])
    for c in config.values():
        if isinstance(c, dict) and isinstance(c.get("model_result_dir"), str):
            c["model_result_dir"] = pathlib.Path(c["model_result_dir"])
    return config


def instances(session, entry, calls=()):
    """Runs `calls` on the session's backends (made on first use): (results, instances)."""
    return multi_turn_utils.execute_multi_turn_func_call(
        list(calls),
        initial_config(entry),
        entry["involved_classes"],
        f"{MODEL}_{session}",
        entry["id"],
        long_context=long_context(entry),
        is_evaL_run=False,
    )


def calls_text(calls):
    return convert_to_function_call([{c["name"]: c["arguments"]} for c in calls])


def op_execute(req):
    entry = req["entry"]
    calls = calls_text(req["calls"])
    results, _ = instances(req["session"], entry, calls)
    return {"calls": calls, "results": [str(r) for r in results]}


def op_end(req):
    drop_instances(f"{MODEL}_{req['session']}")
    return {}


def handler(path):
    module, _, cls = path.rpartition(".")
    cls = getattr(importlib.import_module(f"bfcl_eval.model_handler.{module}"), cls)
    # Decoding needs no server or tokenizer: skip the constructor that would set them up.
    return object.__new__(cls)


def op_decode(req):
    if "calls" in req:
        return {"calls": calls_text(req["calls"])}
    h = handler(req["handler"])
    if req.get("kind") == "ast":
        from bfcl_eval.constants.enums import ReturnFormat

        from bfcl_eval.utils import is_empty_output

        fmt = ReturnFormat[req.get("language", "python").upper()]
        calls = h.decode_ast(req["text"], fmt, has_tool_call_tag=False)
        return {"calls": calls, "empty": bool(is_empty_output(calls))}
    calls = h.decode_execute(req["text"], has_tool_call_tag=False)
    return {"calls": calls, "empty": bool(multi_turn_utils.is_empty_execute_response(calls))}


def op_check(req):
    entry = dict(req["entry"])
    sessions_made["check"] += 1
    name = f"{MODEL}_check{sessions_made['check']}"
    try:
        verdict = multi_turn_checker(
            req["steps"], req["ground_truth"], entry, entry["category"], name
        )
    finally:
        drop_instances(name)
    return {
        "valid": bool(verdict.get("valid")),
        "error_type": verdict.get("error_type", ""),
        "error_message": verdict.get("error_message", ""),
    }


def op_truth(req):
    entry = req["entry"]
    methods = {}
    for cls_name in entry["involved_classes"]:
        module = importlib.import_module(CLASS_FILE_PATH_MAPPING[cls_name])
        cls = getattr(module, cls_name)
        for name, m in inspect.getmembers(cls, predicate=inspect.isfunction):
            if not name.startswith("_"):
                methods[name] = m
    turns = []
    for turn in req["ground_truth"]:
        calls = []
        for text in turn:
            call = ast.parse(text, mode="eval").body
            if not isinstance(call, ast.Call) or not isinstance(call.func, ast.Name):
                raise ValueError(f"{text}: not a call of a backend method")
            name = call.func.id
            if name not in methods:
                raise ValueError(f"{text}: {name} is not a method of {entry['involved_classes']}")
            sig = inspect.signature(methods[name])
            bound = [p for p in sig.parameters if p != "self"]
            args = {}
            for i, a in enumerate(call.args):
                if i >= len(bound):
                    raise ValueError(f"{text}: more positional arguments than parameters")
                args[bound[i]] = ast.literal_eval(a)
            for k in call.keywords:
                args[k.arg] = ast.literal_eval(k.value)
            calls.append({"name": name, "arguments": args})
        turns.append(calls)
    return {"turns": turns}


def op_holdout_message(req):
    text = DEFAULT_USER_PROMPT_FOR_ADDITIONAL_FUNCTION_PROMPTING.format(functions=req["functions"])
    return {"text": text}


def memory_instance(session, entry):
    _, made = instances(session, entry)
    if len(made) != 1:
        raise ValueError(f"{entry['id']}: a memory entry has one backend, not {list(made)}")
    return next(iter(made.values()))


def op_memory_prompt(req):
    from bfcl_eval.constants.default_prompts import (
        ADDITIONAL_SYSTEM_PROMPT_FOR_AGENTIC_RESPONSE_FORMAT,
    )
    from bfcl_eval.model_handler.utils import add_memory_instruction_system_prompt
    from bfcl_eval.utils import is_memory_prereq

    entry = req["entry"]
    first = copy.deepcopy(req["first_turn"])
    # As bfcl-eval's loader (process_agentic_test_case) and handler (inference_multi_turn) do.
    if not is_memory_prereq(entry["id"]):
        first.insert(
            0, {"role": "system", "content": ADDITIONAL_SYSTEM_PROMPT_FOR_AGENTIC_RESPONSE_FORMAT}
        )
    scenario = next(iter(entry["initial_config"].values()))["scenario"]
    prompts = add_memory_instruction_system_prompt(
        [first],
        entry["id"].rsplit("_", 1)[0],
        scenario,
        memory_instance(req["session"], entry),
    )
    return {"messages": prompts[0]}


def op_memory_flush(req):
    memory = memory_instance(req["session"], req["entry"])
    memory._flush_memory_to_local_file()
    with open(memory.latest_snapshot_file) as f:
        return {"snapshot": json.load(f)}


def op_memory_restore(req):
    entry = req["entry"]
    (cls_name,) = entry["involved_classes"]
    module = importlib.import_module(CLASS_FILE_PATH_MAPPING[cls_name])
    memory = getattr(module, cls_name)()
    # Sets the snapshot paths as the backend will when it loads.
    memory._prepare_snapshot(initial_config(entry)[cls_name])
    path = memory.latest_snapshot_file
    if req["snapshot"] is None:
        path.unlink(missing_ok=True)
    else:
        with open(path, "w") as f:
            json.dump(req["snapshot"], f, indent=4)
    return {}


def op_agentic_check(req):
    from bfcl_eval.eval_checker.agentic_eval.agentic_checker import agentic_checker

    verdict = agentic_checker(req["text"], req["answers"])
    return {
        "valid": bool(verdict.get("valid")),
        "error_type": verdict.get("error_type", ""),
        "error_message": verdict.get("error_message", ""),
    }


def op_hello(_req):
    from importlib.metadata import version

    return {"bfcl_eval": version("bfcl-eval")}


OPS = {
    "hello": op_hello,
    "execute": op_execute,
    "end": op_end,
    "decode": op_decode,
    "check": op_check,
    "truth": op_truth,
    "holdout_message": op_holdout_message,
    "memory_prompt": op_memory_prompt,
    "memory_flush": op_memory_flush,
    "memory_restore": op_memory_restore,
    "agentic_check": op_agentic_check,
}


def main():
    out = sys.stdout
    sys.stdout = sys.stderr
    for line in sys.stdin:
        if not line.strip():
            continue
        try:
            req = json.loads(line)
            answer = OPS[req["op"]](req)
            answer["ok"] = True
        except Exception as e:  # a failure is an answer; the bridge carries on
            answer = {"ok": False, "error": f"{type(e).__name__}: {e}"}
        out.write(json.dumps(answer, default=str) + "\n")
        out.flush()


main()
