"""The official JSON Schema Test Suite (draft 2020-12) through structgen's Python package and its
peers' (xgrammar, llguidance), with the same semantics for all three where each API allows it:
members in any order (xgrammar's `any_order`; llguidance's default), unlisted members allowed
(`strict_mode=False`), instances written compactly (xgrammar's `separators=(",", ":")`;
llguidance's flexible whitespace). Numbers are not compared by value (no such option in
xgrammar's API), so `1.0` for an integer counts as refused by all.

For each engine and file: schemas compiled, valid instances accepted, invalid ones rejected. A
schema an engine refuses accepts none of its instances, so its invalid ones count as rejected: the
last column counts the invalid instances of the schemas each engine compiled. Acceptance is whole-string
(xgrammar's and structgen's `testing._is_grammar_accept_string`); llguidance's is token by token
through its matcher on the given tokenizer. Only the engines whose packages import are run.

Usage: python scripts/suite_peers.py SUITE_DIR TOKENIZER_JSON [--out FILE.json]
"""

import argparse
import importlib
import json
import pathlib
import sys


def compact(v):
    return json.dumps(v, separators=(",", ":"), ensure_ascii=False)


def xgrammar_like(module_name):
    """An engine with xgrammar's API (xgrammar itself, or structgen's package)."""
    mod = importlib.import_module(module_name)

    def compile_schema(schema):
        return mod.Grammar.from_json_schema(
            json.dumps(schema),
            any_whitespace=False,
            separators=(",", ":"),
            strict_mode=False,
            any_order=True,
        )

    def accepts(grammar, text):
        return bool(mod.testing._is_grammar_accept_string(grammar, text))

    return compile_schema, accepts


def llguidance_engine(tokenizer_json):
    import llguidance
    import llguidance.hf
    from transformers import PreTrainedTokenizerFast

    tok = llguidance.hf.from_tokenizer(PreTrainedTokenizerFast(tokenizer_file=tokenizer_json))

    def compile_schema(schema):
        grammar = llguidance.LLMatcher.grammar_from_json_schema(
            json.dumps(schema), defaults={"whitespace_flexible": True}
        )
        failed, messages = llguidance.LLMatcher.validate_grammar_with_warnings(grammar, tok)
        if failed:
            raise ValueError("; ".join(messages))
        return grammar

    def accepts(grammar, text):
        m = llguidance.LLMatcher(tok, grammar)
        if m.is_error():
            return False
        if not m.consume_tokens(tok.tokenize_str(text)):
            return False
        return m.is_accepting()

    return compile_schema, accepts


def run(engine, files):
    compile_schema, accepts = engine
    table = {}
    for path in files:
        row = dict(
            schemas=0,
            compiled=0,
            valid=0,
            valid_ok=0,
            invalid=0,
            invalid_rejected=0,
            invalid_compiled=0,
            invalid_compiled_rejected=0,
        )
        for group in json.loads(path.read_text()):
            row["schemas"] += 1
            try:
                grammar = compile_schema(group["schema"])
            except Exception:  # noqa: BLE001 - any refusal counts the same
                grammar = None
            if grammar is not None:
                row["compiled"] += 1
            for case in group["tests"]:
                valid = case["valid"]
                ok = False
                if grammar is not None:
                    try:
                        ok = accepts(grammar, compact(case["data"]))
                    except Exception:  # noqa: BLE001
                        ok = False
                if valid:
                    row["valid"] += 1
                    row["valid_ok"] += ok
                else:
                    row["invalid"] += 1
                    row["invalid_rejected"] += not ok
                    if grammar is not None:
                        row["invalid_compiled"] += 1
                        row["invalid_compiled_rejected"] += not ok
        table[path.stem] = row
    return table


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("suite")
    ap.add_argument("tokenizer")
    ap.add_argument("--out")
    args = ap.parse_args()
    files = sorted(
        p
        for p in pathlib.Path(args.suite).glob("*.json")
        if p.stem not in ("refRemote",)
    )
    engines = {}
    for name, make in (
        ("structgen", lambda: xgrammar_like("structgen")),
        ("xgrammar", lambda: xgrammar_like("xgrammar")),
        ("llguidance", lambda: llguidance_engine(args.tokenizer)),
    ):
        try:
            engines[name] = make()
        except Exception as e:  # noqa: BLE001
            print(f"{name}: not run ({e})", file=sys.stderr)
    results = {name: run(e, files) for name, e in engines.items()}
    print(
        "| engine | schemas compiled | valid accepted | invalid rejected "
        "| invalid rejected, of compiled schemas |"
    )
    print("|---|--:|--:|--:|--:|")
    for name, table in results.items():
        t = {k: sum(r[k] for r in table.values()) for k in next(iter(table.values()))}
        print(
            f"| {name} | {t['compiled']}/{t['schemas']} | {t['valid_ok']}/{t['valid']} "
            f"| {t['invalid_rejected']}/{t['invalid']} "
            f"| {t['invalid_compiled_rejected']}/{t['invalid_compiled']} |"
        )
    if args.out:
        pathlib.Path(args.out).write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
