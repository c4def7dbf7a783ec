//! The BFCL AST checker against BFCL's own data (`scripts/fetch-bfcl.sh` → `data/bfcl`): every
//! case's first possible answer, written as calls in a call style and read back by the parser,
//! scores correct — in every category, for every case whose answer can be met at all — and
//! deliberately broken variants of it (a wrong value, a missing required argument, an extra call,
//! a wrong function) score wrong. Small hand-written cases pin the type and comparison rules
//! without the data.

mod common;

use serde_json::{json, Map, Value};
use structgen::bfcl::checker::{answer_defects, check, Call};
use structgen::bfcl::data::{Case, Category, CheckKind, Expected, Function, Param};
use structgen::bfcl::lang::Language;
use structgen::bfcl::run::{failure_as_bfcl, ground_truth};
use structgen::bfcl::{load, Mode};
use structgen::frontend::tools::style;
use structgen::frontend::tools::FormatSet;

fn all_cases(test: &str) -> Option<Vec<Case>> {
    let dir = common::bfcl_data(test)?;
    Some(load(&dir, &single_turn()).unwrap_or_else(|e| panic!("{e}")))
}

/// The categories checked by the AST checker (multi-turn and memory conversations are BFCL's
/// to check: see tests/bfcl_multi_turn.rs).
fn single_turn() -> Vec<Category> {
    Category::ALL
        .into_iter()
        .filter(|c| !c.check_kind().is_conversation())
        .collect()
}

/// The ground-truth calls of `case` (first acceptable values), as the parser read them back.
fn truth_calls(case: &Case) -> Vec<Call> {
    let r = ground_truth(case, style("hermes").unwrap(), FormatSet::All);
    assert_eq!(r.mode, Mode::GroundTruth);
    r.scored
        .calls
        .iter()
        .map(|c| Call {
            name: c.name.clone(),
            arguments: c.arguments.as_object().cloned().unwrap_or_default(),
        })
        .collect()
}

#[test]
fn ground_truth_scores_correct_in_every_category_and_style() {
    let Some(cases) = all_cases("ground_truth_scores_correct_in_every_category_and_style") else {
        return;
    };
    for c in single_turn() {
        assert!(
            cases.iter().filter(|k| k.category == c).count() > 0,
            "no cases for {}",
            c.name()
        );
    }
    let mut defective = Vec::new();
    for s in [
        "hermes",
        "llama",
        "llama_json",
        "harmony",
        "deepseek",
        "mistral",
    ] {
        for case in &cases {
            let r = ground_truth(case, style(s).unwrap(), FormatSet::All);
            let defects = answer_defects(case);
            if defects.is_empty() {
                assert!(
                    r.scored.correct,
                    "{s}: {}: {} (text {:?})",
                    case.id, r.scored.verdict, r.text
                );
                assert!(r.scored.parse_errors.is_empty(), "{s}: {}", case.id);
            } else {
                assert!(
                    !r.scored.correct,
                    "{}: defects {defects:?} yet correct",
                    case.id
                );
                if s == "hermes" {
                    defective.push(case.id.clone());
                }
            }
        }
    }
    eprintln!(
        "{} of {} cases have no answer BFCL's rules accept: {defective:?}",
        defective.len(),
        cases.len()
    );
    assert!(defective.len() * 100 < cases.len(), "{defective:?}");
}

/// A value no answer lists: another string, a far-off number, the other boolean, a longer list,
/// a dict with one more key.
fn wrong(v: &Value) -> Value {
    match v {
        Value::String(s) => Value::String(format!("{s} structgen wrong value")),
        Value::Number(n) if n.is_f64() => json!(n.as_f64().unwrap_or_default() * 7.0 + 1234567.5),
        Value::Number(n) => json!(n.as_i64().unwrap_or_default().wrapping_mul(7) + 1234567),
        Value::Bool(b) => Value::Bool(!b),
        Value::Array(a) => {
            let mut a = a.clone();
            a.push(a.first().cloned().unwrap_or(json!("structgen")));
            Value::Array(a)
        }
        Value::Object(m) => {
            let mut m = m.clone();
            m.insert("structgen_extra".into(), json!(1));
            Value::Object(m)
        }
        Value::Null => json!("structgen wrong value"),
    }
}

#[test]
fn broken_variants_score_wrong() {
    let Some(cases) = all_cases("broken_variants_score_wrong") else {
        return;
    };
    let (mut values, mut missing, mut extra, mut renamed) = (0, 0, 0, 0);
    let with_answers: Vec<&Case> = cases
        .iter()
        .filter(|c| {
            !matches!(
                c.category.check_kind(),
                CheckKind::NoCall | CheckKind::AnyCall
            ) && answer_defects(c).is_empty()
        })
        .collect();
    for case in &with_answers {
        let calls = truth_calls(case);
        assert!(check(case, &calls).is_ok(), "{}", case.id);
        // A wrong value: the first argument whose changed value no answer accepts.
        let mutated = calls[0].arguments.keys().find_map(|k| {
            let mut c = calls.clone();
            let v = c[0].arguments[k].clone();
            // A Java or JavaScript value is read by pattern, so text around it may not change
            // it: the whole value is replaced.
            let bad = match case.category.language() {
                Language::Python => wrong(&v),
                _ => json!("structgen wrong value"),
            };
            c[0].arguments.insert(k.clone(), bad);
            let expected = case.answers.iter().find(|e| e.values(k).is_some())?;
            let still_listed = expected.values(k)?.iter().any(|a| a == &c[0].arguments[k]);
            (!still_listed).then_some(c)
        });
        if let Some(c) = mutated {
            assert!(
                check(case, &c).is_err(),
                "{}: wrong value accepted: {:?}",
                case.id,
                c[0]
            );
            values += 1;
        }
        // A missing required argument.
        let f = case
            .functions
            .iter()
            .find(|f| f.name == case.answers[0].name);
        let required = f.and_then(|f| {
            f.required
                .iter()
                .find(|r| calls.iter().any(|c| c.arguments.contains_key(r.as_str())))
        });
        if let Some(r) = required {
            let mut c = calls.clone();
            for call in &mut c {
                call.arguments.remove(r.as_str());
            }
            assert!(
                check(case, &c).is_err(),
                "{}: missing {r:?} accepted",
                case.id
            );
            missing += 1;
        }
        // An extra call.
        let mut c = calls.clone();
        c.push(calls[0].clone());
        assert!(check(case, &c).is_err(), "{}: extra call accepted", case.id);
        extra += 1;
        // A wrong function: not offered, and (when there is one) another offered function.
        let mut c = calls.clone();
        c[0].name = "structgen_not_offered".into();
        assert!(
            check(case, &c).is_err(),
            "{}: unknown function accepted",
            case.id
        );
        let other = case
            .functions
            .iter()
            .map(|f| f.name.replace('.', "_"))
            .find(|n| *n != calls[0].name && !calls.iter().any(|c| &c.name == n));
        if let Some(other) = other {
            let mut c = calls.clone();
            c[0].name = other;
            assert!(
                check(case, &c).is_err(),
                "{}: other function accepted",
                case.id
            );
        }
        renamed += 1;
    }
    let n = with_answers.len();
    eprintln!("{n} cases: {values} wrong values, {missing} missing required, {extra} extra calls, {renamed} wrong functions");
    assert!(
        values * 10 >= n * 9,
        "only {values} of {n} cases got a wrong value"
    );
    assert!(
        missing * 2 >= n,
        "only {missing} of {n} cases had a required argument"
    );
    for case in cases
        .iter()
        .filter(|c| c.category.check_kind() == CheckKind::NoCall)
    {
        assert!(check(case, &[]).is_ok(), "{}", case.id);
        let Some(f) = case.functions.first() else {
            continue;
        };
        let call = Call {
            name: f.name.replace('.', "_"),
            arguments: Map::new(),
        };
        assert!(
            check(case, &[call]).is_err(),
            "{}: a call accepted",
            case.id
        );
    }
    // Relevance: any call of an offered function is right, whatever its arguments; none is wrong.
    let relevance: Vec<&Case> = cases
        .iter()
        .filter(|c| c.category.check_kind() == CheckKind::AnyCall)
        .collect();
    assert!(!relevance.is_empty(), "no relevance cases");
    for case in relevance {
        assert!(check(case, &[]).is_err(), "{}: no call accepted", case.id);
        let f = case
            .functions
            .first()
            .expect("a relevance case offers a function");
        let call = Call {
            name: f.name.replace('.', "_"),
            arguments: Map::new(),
        };
        assert!(check(case, &[call]).is_ok(), "{}: a call refused", case.id);
    }
}

fn function(name: &str, params: &[(&str, &str, Option<&str>)], required: &[&str]) -> Function {
    Function {
        name: name.into(),
        params: params
            .iter()
            .map(|(n, ty, items)| {
                (
                    n.to_string(),
                    Param {
                        ty: ty.to_string(),
                        items: items.map(str::to_string),
                    },
                )
            })
            .collect(),
        required: required.iter().map(|s| s.to_string()).collect(),
        doc: json!({}),
    }
}

fn case(category: Category, functions: Vec<Function>, answers: Value) -> Case {
    let answers = answers
        .as_array()
        .unwrap()
        .iter()
        .map(|a| {
            let (name, params) = a.as_object().unwrap().iter().next().unwrap();
            Expected {
                name: name.clone(),
                params: params
                    .as_object()
                    .unwrap()
                    .iter()
                    .map(|(k, v)| (k.clone(), v.as_array().unwrap().clone()))
                    .collect(),
            }
        })
        .collect();
    Case {
        id: "t".into(),
        category,
        messages: Vec::new(),
        functions,
        answers,
        multi_turn: None,
    }
}

fn call(name: &str, args: Value) -> Call {
    Call {
        name: name.into(),
        arguments: args.as_object().unwrap().clone(),
    }
}

#[test]
fn type_and_value_rules_follow_bfcl() {
    let f = function(
        "geo.area",
        &[
            ("side", "float", None),
            ("count", "integer", None),
            ("unit", "string", None),
            ("tags", "array", Some("string")),
            ("opts", "dict", None),
            ("rows", "array", Some("dict")),
        ],
        &["side"],
    );
    let c = case(
        Category::SimplePython,
        vec![f],
        json!([{"geo.area": {
            "side": [5.0], "count": [3, ""], "unit": ["Square Meters", ""],
            "tags": [["New York", "LA"], ""], "opts": [{"mode": ["fast"], "depth": [2, ""]}, ""],
            "rows": [[{"k": ["a"]}, {"k": ["b"]}], ""]
        }}]),
    );
    let ok = |args: Value| check(&c, &[call("geo_area", args)]);
    assert!(
        ok(json!({"side": 5})).is_ok(),
        "an int is widened for float"
    );
    assert!(ok(json!({"side": 5.0, "count": 3})).is_ok());
    assert_eq!(
        ok(json!({"side": 5.0, "count": 3.0})).unwrap_err().kind,
        "type"
    );
    assert_eq!(
        ok(json!({"side": 5.0, "count": true})).unwrap_err().kind,
        "type"
    );
    assert!(
        ok(json!({"side": 5.0, "unit": "square-meters"})).is_ok(),
        "normalised"
    );
    assert!(ok(json!({"side": 5.0, "tags": ["new york", "L.A."]})).is_ok());
    assert!(
        ok(json!({"side": 5.0, "tags": ["LA", "New York"]})).is_err(),
        "list order counts"
    );
    assert!(
        ok(json!({"side": 5.0, "opts": {"mode": "FAST"}})).is_ok(),
        "optional key left out"
    );
    assert!(
        ok(json!({"side": 5.0, "opts": {"depth": 2}})).is_err(),
        "required key missing"
    );
    assert!(ok(json!({"side": 5.0, "opts": {"mode": "fast", "x": 1}})).is_err());
    assert!(ok(json!({"side": 5.0, "rows": [{"k": "a"}, {"k": "B"}]})).is_ok());
    assert!(ok(json!({"side": 5.0, "rows": [{"k": "b"}, {"k": "a"}]})).is_err());
    assert_eq!(ok(json!({})).unwrap_err().kind, "missing_required");
    assert_eq!(
        ok(json!({"side": 5.0, "zoom": 1})).unwrap_err().kind,
        "unexpected_param"
    );
    assert_eq!(
        check(&c, &[call("geo.area", json!({"side": 5.0}))])
            .unwrap_err()
            .kind,
        "wrong_function",
        "names are compared as offered, `.` → `_`"
    );
}

#[test]
fn parallel_calls_match_in_any_order() {
    let f = function("f", &[("x", "integer", None)], &["x"]);
    let c = case(
        Category::Parallel,
        vec![f],
        json!([{"f": {"x": [1]}}, {"f": {"x": [2]}}]),
    );
    let (one, two) = (call("f", json!({"x": 1})), call("f", json!({"x": 2})));
    assert!(check(&c, &[two.clone(), one.clone()]).is_ok());
    assert!(check(&c, &[one.clone(), two.clone()]).is_ok());
    assert_eq!(
        check(&c, &[one.clone(), one.clone()]).unwrap_err().kind,
        "no_match"
    );
    assert_eq!(check(&c, &[one]).unwrap_err().kind, "wrong_count");
}

#[test]
fn a_failed_case_reads_as_bfcl_reads_it() {
    let f = || function("f", &[("x", "integer", None)], &["x"]);
    let none = case(Category::Irrelevance, vec![f()], json!([]));
    let simple = case(
        Category::SimplePython,
        vec![f()],
        json!([{"f": {"x": [1]}}]),
    );
    for (c, right) in [(&none, true), (&simple, false)] {
        let mut r = structgen::bfcl::CaseResult::failed(c, Mode::Free, "out of memory".into());
        assert!(
            !r.scored.correct,
            "structgen's rule: every failure is wrong"
        );
        failure_as_bfcl(c, &mut r);
        // BFCL stores the error text as the answer; it decodes to no call.
        assert_eq!(r.scored.correct, right, "{:?}", c.category);
        assert_eq!(r.error.as_deref(), Some("out of memory"));
    }
}

#[test]
fn the_summary_combines_categories_as_bfcl_eval_does() {
    use structgen::bfcl::leaderboard::summaries;
    let f = || function("f", &[("x", "integer", None)], &["x"]);
    let mut results = Vec::new();
    // (category, correct answers, wrong answers)
    for (category, right, wrong) in [
        (Category::SimplePython, 1, 1),
        (Category::LiveSimple, 1, 0),
        (Category::LiveMultiple, 0, 3),
        (Category::Irrelevance, 1, 0),
        (Category::MultiTurnBase, 1, 1),
    ] {
        let c = case(category, vec![f()], json!([]));
        for k in 0..right + wrong {
            let mut r = structgen::bfcl::CaseResult::failed(&c, Mode::Free, "x".into());
            r.scored.correct = k < right;
            results.push(r);
        }
    }
    // Absent live categories weigh their full size in the data.
    let size = |c: &str| match c {
        "live_parallel" => 16,
        "live_parallel_multiple" => 24,
        _ => 100,
    };
    let s = &summaries(&results, &size)[0];
    let close = |a: f64, b: f64| assert!((a - b).abs() < 1e-12, "{a} vs {b}");
    // simple = mean(0.5, java 0, javascript 0); non-live = mean(simple, 0, 0, 0).
    close(s.non_live, 0.5 / 3.0 / 4.0);
    // live = (1·1 + 0·3 + 0·16 + 0·24) / 44.
    close(s.live, 1.0 / 44.0);
    close(s.irrelevance, 0.5);
    close(s.multi_turn, 0.5 / 4.0);
    close(s.agentic, 0.0);
    let overall = (s.non_live * 10.0 + s.live * 10.0 + 0.5 * 10.0 + 0.125 * 30.0) / 100.0;
    close(s.overall, overall);
    assert!(s.absent.contains(&"simple_java".to_string()));
    assert!(!s.absent.contains(&"live_simple".to_string()));
    close(s.correct_call_rate, 4.0 / 9.0);
}
