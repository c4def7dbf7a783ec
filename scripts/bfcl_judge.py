"""Re-scores a `structgen bfcl --out` results file with BFCL's own checker and reports every case
where its verdict and ours differ.

The checker is `bfcl_eval.eval_checker.ast_eval.ast_checker` from the bfcl-eval wheel on PyPI,
imported as it is. Its module imports `MODEL_CONFIG_MAPPING`, whose module pulls in every model
handler and their SDKs; only `underscore_to_dot` is read from it, so that one module is replaced
by a mapping whose entries say False (the calls handed over carry BFCL's original names, dots
included). Relevance categories are judged by eval_runner's rule: irrelevance is right when no
call was made, relevance when at least one was. Multi-turn results are judged by BFCL's
multi_turn_checker and memory results by its agentic_checker, on the saved steps. The
leaderboard summary is computed again by eval_runner_helper.generate_leaderboard_csv from the
same verdicts and compared with the one saved.

For every result: the calls we read from the answer go to BFCL's checker, with the case's
function documents (as in the data: the checker reads Java and JavaScript types from them) and
possible answer from the data folder, in the category's language; its verdict is compared with ours
(`correct`). Results that could not run (`error`) are compared as "no call". Exit status 1 when
any verdict differs or a case is missing from the data.

Usage: python bfcl_judge.py RESULTS.json [--data DIR]   (with bfcl-eval importable)
"""

import argparse
import collections
import importlib
import glob
import json
import os
import sys
import types


def load_checker():
    stub = types.ModuleType("bfcl_eval.constants.model_config")

    class _Config:
        underscore_to_dot = False
        # What eval_runner_helper's leaderboard tables print for a model.
        display_name, url, org, license = "structgen", "", "", ""
        input_price = output_price = None

    class _FcConfig:
        underscore_to_dot = True

    stub.MODEL_CONFIG_MAPPING = collections.defaultdict(_Config)
    # The FC handlers' models are offered names with `.` written `_`, and BFCL's checker maps
    # them back for such models (underscore_to_dot): the reading by a handler is judged so.
    stub.MODEL_CONFIG_MAPPING["structgen-fc"] = _FcConfig()
    sys.modules["bfcl_eval.constants.model_config"] = stub
    # The model handlers import the tree-sitter parsers (Java/JavaScript answers of
    # prompting models) and the OpenAI client; neither is used to decode here.
    for name in ("bfcl_eval.model_handler.parser.java_parser", "bfcl_eval.model_handler.parser.js_parser", "openai"):
        try:
            importlib.import_module(name)
        except Exception:
            m = types.ModuleType(name)
            m.parse_java_function_call = m.parse_javascript_function_call = m.OpenAI = None
            sys.modules[name] = m
    from bfcl_eval.constants.enums import Language
    from bfcl_eval.eval_checker.ast_eval.ast_checker import ast_checker

    return ast_checker, Language


def load_handler(path):
    """The BFCL model handler `module.Class` (under bfcl_eval.model_handler), unconstructed:
    decoding needs no server."""
    if not path:
        return None
    module, _, cls = path.rpartition(".")
    cls = getattr(importlib.import_module(f"bfcl_eval.model_handler.{module}"), cls)
    return object.__new__(cls)


def multi_turn_verdict(handler, result, questions, answers):
    """eval_runner's multi-turn rule on the handler's decoding of every step's text."""
    from bfcl_eval.eval_checker.multi_turn_eval.multi_turn_checker import multi_turn_checker
    from bfcl_eval.eval_checker.multi_turn_eval.multi_turn_utils import is_empty_execute_response

    if result.get("error"):
        return False, "did not run"
    gt = answers[result["id"]]["ground_truth"]
    turns = result.get("turns", [])
    if len(turns) != len(gt):
        return False, "force-terminated"
    decoded = []
    for turn in turns:
        steps = []
        for step in turn:
            try:
                calls = handler.decode_execute(step["text"], has_tool_call_tag=False)
            except Exception:
                continue
            if not is_empty_execute_response(calls):
                steps.append(calls)
        decoded.append(steps)
    entry = dict(questions[result["id"]])
    global judged
    judged += 1
    verdict = multi_turn_checker(decoded, gt, entry, result["category"], f"judge{judged}")
    return bool(verdict["valid"]), verdict.get("error_message", "")


judged = 0


def memory_verdicts(handler, result, answers):
    """eval_runner's agentic rule (agentic_checker on the last step that is not a call) on the
    saved steps, as structgen read them (a step whose calls were executed is a call) and as the
    handler decodes them."""
    from bfcl_eval.eval_checker.agentic_eval.agentic_checker import agentic_checker
    from bfcl_eval.eval_checker.multi_turn_eval.multi_turn_utils import is_empty_execute_response

    if result.get("error"):
        return (False, "did not run"), (False, "did not run")
    gt = answers[result["id"]]["ground_truth"]
    steps = (result.get("turns") or [[]])[0]

    def judge(last):
        if last is None:
            return False, "no last message"
        v = agentic_checker(last, gt)
        return bool(v["valid"]), v.get("error_message", "")

    ours = judge(next((s["text"] for s in reversed(steps) if not s.get("executed")), None))
    if handler is None:
        return ours, None
    last = None
    for s in steps:
        try:
            calls = handler.decode_execute(s["text"], has_tool_call_tag=False)
        except Exception:
            last = s["text"]
            continue
        if is_empty_execute_response(calls):
            last = s["text"]
    return ours, judge(last)


def handler_verdict(checker, language, handler, result, questions, answers):
    """eval_runner's single-turn rules on the handler's decode_ast of the answer."""
    from bfcl_eval.utils import is_empty_output

    category = result["category"]
    lang = {"simple_java": language.JAVA, "simple_javascript": language.JAVASCRIPT}.get(
        category, language.PYTHON
    )
    try:
        if result.get("error"):
            raise ValueError("the case did not run")
        from bfcl_eval.constants.enums import ReturnFormat

        decoded = handler.decode_ast(result["text"], ReturnFormat[lang.name], has_tool_call_tag=False)
    except Exception as e:
        return "irrelevance" in category, f"decoder failed: {e}"
    if "irrelevance" in category:
        return bool(is_empty_output(decoded)), ""
    if "relevance" in category:
        return not is_empty_output(decoded), ""
    case = questions[result["id"]]
    try:
        verdict = checker(case["function"], decoded, answers[result["id"]]["ground_truth"], lang, category, "structgen-fc")
    except Exception as e:
        return False, f"BFCL's checker raised {type(e).__name__}: {e}"
    return bool(verdict["valid"]), "; ".join(map(str, verdict.get("error", [])))


def read_jsonl(path, category=None):
    """The entries of a data file by id; the memory categories' shared file's ids renamed as
    bfcl-eval renames them (`memory_0-…` → `memory_kv_0-…`)."""
    with open(path, encoding="utf-8") as f:
        entries = [json.loads(line) for line in f if line.strip()]
    if category and category.startswith("memory"):
        return {e["id"].replace("memory", category): e for e in entries}
    return {e["id"]: e for e in entries}


def category_file(data, folder, category):
    """The highest-version file of a category (v3's `simple` name included)."""
    v3 = {"simple_python": "simple", "simple_java": "java", "simple_javascript": "javascript"}
    if category.startswith("memory"):
        category = "memory"
    names = [category] + ([v3[category]] if category in v3 else [])
    found = []
    for n in names:
        for path in glob.glob(os.path.join(data, folder, f"BFCL_v*_{n}.json")):
            version = os.path.basename(path)[len("BFCL_v") :].split("_", 1)[0]
            if version.isdigit() and os.path.basename(path) == f"BFCL_v{version}_{n}.json":
                found.append((int(version), path))
    return max(found)[1] if found else None


def bfcl_verdict(checker, language, result, questions, answers):
    category = result["category"]
    calls = [] if result.get("error") else result.get("calls", [])
    if "irrelevance" in category:
        return len(calls) == 0, "call made" if calls else ""
    if "relevance" in category:
        return len(calls) > 0, "" if calls else "no call"
    case = questions[result["id"]]
    output = [{c.get("function") or c["name"]: c["arguments"]} for c in calls]
    if not output:
        return False, "no call"
    if category == "simple_java":
        lang = language.JAVA
    elif category == "simple_javascript":
        lang = language.JAVASCRIPT
    else:
        lang = language.PYTHON
    try:
        verdict = checker(
            case["function"],
            output,
            answers[result["id"]]["ground_truth"],
            lang,
            category,
            "structgen",
        )
    except Exception as e:  # its converters raise on types they do not handle (Set, Queue, ...)
        return False, f"BFCL's checker raised {type(e).__name__}: {e}"
    return bool(verdict["valid"]), "; ".join(map(str, verdict.get("error", [])))


# The leaderboard summary's fields and eval_runner_helper's data_overall.csv columns for them.
SUMMARY_COLUMNS = [
    ("overall", "Overall Acc"),
    ("non_live", "Non-Live AST Acc"),
    ("live", "Live Acc"),
    ("multi_turn", "Multi Turn Acc"),
    ("relevance", "Relevance Detection"),
    ("irrelevance", "Irrelevance Detection"),
]


def summary_disagreements(saved):
    """bfcl-eval's own summary (eval_runner_helper.generate_leaderboard_csv, fed each
    category's accuracy and count) against the `leaderboard` structgen saved, per mode and
    reader: the overall score and the group scores the CSV prints as numbers."""
    import tempfile
    from pathlib import Path

    from bfcl_eval.eval_checker import eval_runner_helper

    out = []
    for s in saved.get("leaderboard", []):
        per = {}
        for r in saved["results"]:
            if r["mode"] != s["mode"]:
                continue
            ok = r["correct"] if s["reader"] == "structgen" else (r.get("bfcl") or {}).get("correct")
            n_ok = per.setdefault(r["category"], [0, 0])
            n_ok[0] += 1
            n_ok[1] += bool(ok)
        table = {"structgen": {c: {"accuracy": ok / n, "total_count": n} for c, (n, ok) in per.items()}}
        with tempfile.TemporaryDirectory() as tmp:
            eval_runner_helper.generate_leaderboard_csv(table, Path(tmp))
            with open(Path(tmp) / "data_overall.csv", encoding="utf-8") as f:
                header, row = [line.rstrip("\n").split(",") for line in f][:2]
        theirs = dict(zip(header, row))
        for field, column in SUMMARY_COLUMNS:
            value = theirs[column]
            if value == "N/A":
                continue
            ours = f"{s[field] * 100:.2f}%"
            if ours != value:
                out.append(f"{s['mode']}, {s['reader']}: {column} ours {ours}, bfcl-eval's {value}")
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("results")
    ap.add_argument("--data", default=os.path.join(os.path.dirname(__file__), "..", "data", "bfcl"))
    args = ap.parse_args()
    checker, language = load_checker()
    with open(args.results, encoding="utf-8") as f:
        saved = json.load(f)
    results = saved["results"]
    handler = load_handler(saved.get("bfcl_handler"))
    questions, answers = {}, {}
    tally = collections.OrderedDict()
    disagreements, unpassable, missing = [], [], []
    for r in results:
        category = r["category"]
        if category not in tally:
            tally[category] = [0, 0]
            q = category_file(args.data, "", category)
            if q is None:
                sys.exit(f"{args.data}: no question file for {category}")
            questions.update(read_jsonl(q, category))
            a = category_file(args.data, "possible_answer", category)
            if a is not None:
                answers.update(read_jsonl(a, category))
        if r["id"] not in questions:
            missing.append(r["id"])
            continue
        tally[category][0] += 1
        if category.startswith("multi_turn"):
            # The multi-turn verdicts come from BFCL's checker run by structgen's bridge: the
            # judge runs it again on the handler's decoding of the saved texts.
            if handler is None:
                missing.append(f"{r['id']} (no bfcl_handler in the results to decode it)")
                continue
            ok, why = multi_turn_verdict(handler, r, questions, answers)
            ours = r.get("bfcl", {}).get("correct")
            if ok != ours or (r["mode"] == "ground-truth" and ok != bool(r["correct"])):
                tally[category][1] += 1
                disagreements.append((r["id"], r["mode"], r["correct"], ok, why))
            continue
        if category.startswith("memory"):
            (ok, why), theirs = memory_verdicts(handler, r, answers)
            if ok != bool(r["correct"]):
                tally[category][1] += 1
                disagreements.append((r["id"], r["mode"], r["correct"], ok, why))
            if theirs is not None and "bfcl" in r and theirs[0] != bool(r["bfcl"]["correct"]):
                tally[category][1] += 1
                disagreements.append((r["id"], r["mode"] + ", BFCL reading", r["bfcl"]["correct"], *theirs))
            continue
        ok, why = bfcl_verdict(checker, language, r, questions, answers)
        if ok != bool(r["correct"]):
            tally[category][1] += 1
            disagreements.append((r["id"], r["mode"], r["correct"], ok, why))
        elif not ok and r["mode"] == "ground-truth":
            unpassable.append((r["id"], why))
        if handler is not None and "bfcl" in r:
            ok, why = handler_verdict(checker, language, handler, r, questions, answers)
            if ok != bool(r["bfcl"]["correct"]):
                tally[category][1] += 1
                disagreements.append((r["id"], r["mode"] + ", BFCL reading", r["bfcl"]["correct"], ok, why))
    summary = summary_disagreements(saved) if "leaderboard" in saved else []
    print(f"{'category':<24} {'cases':>6} {'disagree':>9}")
    for category, (n, bad) in tally.items():
        print(f"{category:<24} {n:>6} {bad:>9}")
    total = sum(n for n, _ in tally.values())
    print(f"{'all':<24} {total:>6} {len(disagreements):>9}")
    if unpassable:
        print(f"\nground-truth answers BFCL's checker itself rejects ({len(unpassable)}):")
        for id_, why in unpassable:
            print(f"  {id_}: {why}")
    for id_, mode, ours, theirs, why in disagreements:
        print(f"DISAGREE {id_} [{mode}]: ours {ours}, BFCL {theirs}: {why}")
    for id_ in missing:
        print(f"MISSING {id_}: not in the data folder or not judged")
    if "leaderboard" in saved:
        print(f"leaderboard summary: {len(saved['leaderboard'])} mode/reader rows, {len(summary)} disagreements")
    for line in summary:
        print(f"DISAGREE summary {line}")
    sys.exit(1 if disagreements or missing or summary else 0)


if __name__ == "__main__":
    main()
