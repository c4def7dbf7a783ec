//! BFCL function documents → OpenAI tools, the way BFCL's own OpenAI-style handlers convert them.
//!
//! In: a case's [`Function`]s. Out: an OpenAI `tools` array. Function names have `.` replaced
//! by `_` (OpenAI names allow neither `.` nor most punctuation); [`FunctionNames`] maps them
//! back. Descriptions get BFCL's language hint; Java and JavaScript parameters first go through
//! BFCL's preprocessing ([`lang::prepare_properties`]: every value a string). BFCL's parameter types become JSON Schema types
//! (`dict` → `object`, `float` → `number` with `format: "float"` and a note in the
//! description, `tuple` → `array`, `any` → `string`, unknown or missing → `string`), recursively
//! through `properties` and `items`. Everything else in the document (descriptions, `enum`,
//! `default`, `required`) is kept as it is.

use serde_json::{Map, Value};

use super::data::Function;
use super::lang::{self, append_description, Language};

/// What BFCL appends to a `float` parameter's description.
const FLOAT_NOTE: &str = " This is a float type value.";

/// The name a function is offered under: `.` → `_`.
pub fn offered_name(name: &str) -> String {
    name.replace('.', "_")
}

/// Offered names → BFCL names for one case.
#[derive(Debug, Clone, Default)]
pub struct FunctionNames(Vec<(String, String)>);

impl FunctionNames {
    /// The names of `functions`.
    pub fn new(functions: &[Function]) -> FunctionNames {
        FunctionNames(
            functions
                .iter()
                .map(|f| (offered_name(&f.name), f.name.clone()))
                .collect(),
        )
    }

    /// The BFCL name of the function offered as `offered`.
    pub fn original(&self, offered: &str) -> Option<&str> {
        self.0
            .iter()
            .find(|(o, _)| o == offered)
            .map(|(_, n)| n.as_str())
    }
}

/// The OpenAI `tools` array for `functions`, written in `language`.
pub fn openai_tools(functions: &[Function], language: Language) -> Vec<Value> {
    functions.iter().map(|f| openai_tool(f, language)).collect()
}

fn openai_tool(f: &Function, language: Language) -> Value {
    let mut doc = match &f.doc {
        Value::Object(m) => m.clone(),
        _ => Map::new(),
    };
    doc.insert("name".into(), Value::String(offered_name(&f.name)));
    append_description(&mut doc, lang::hint(language));
    let mut params = match doc.remove("parameters") {
        Some(Value::Object(p)) => p,
        _ => Map::new(),
    };
    params.insert("type".into(), Value::String("object".into()));
    if let Some(Value::Object(props)) = params.get_mut("properties") {
        lang::prepare_properties(language, props);
        cast_properties(props);
    }
    doc.insert("parameters".into(), Value::Object(params));
    serde_json::json!({"type": "function", "function": Value::Object(doc)})
}

/// The JSON Schema type of a BFCL type name.
fn json_type(bfcl: &str) -> &'static str {
    match bfcl {
        "integer" | "byte" | "short" | "long" | "Bigint" => "integer",
        "number" | "float" | "double" => "number",
        "boolean" | "bool" => "boolean",
        "array" | "list" | "tuple" | "ArrayList" | "Array" | "Queue" | "Stack" => "array",
        "dict" | "object" | "HashMap" | "Hashtable" => "object",
        _ => "string",
    }
}

fn cast_properties(props: &mut Map<String, Value>) {
    for p in props.values_mut() {
        let Value::Object(p) = p else { continue };
        let declared = p.get("type").and_then(Value::as_str);
        let is_float = declared == Some("float");
        let ty = declared.map_or("string", json_type);
        if is_float {
            p.insert("format".into(), Value::String("float".into()));
            append_description(p, FLOAT_NOTE);
        }
        p.insert("type".into(), Value::String(ty.into()));
        cast_nested(p, ty);
    }
}

/// Casts the `properties` of an object, or the `items` of an array.
fn cast_nested(p: &mut Map<String, Value>, ty: &str) {
    if ty != "array" && ty != "object" {
        return;
    }
    if let Some(Value::Object(props)) = p.get_mut("properties") {
        cast_properties(props);
    } else if let Some(Value::Object(items)) = p.get_mut("items") {
        if let Some(t) = items.get("type").and_then(Value::as_str) {
            let t = json_type(t);
            items.insert("type".into(), Value::String(t.into()));
            cast_nested(items, t);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bfcl::data::Param;
    use serde_json::json;

    #[test]
    fn types_names_and_notes_follow_bfcl() {
        let doc = json!({"name": "math.hypot", "description": "Norm.", "parameters": {"type": "dict",
            "properties": {
                "x": {"type": "float", "description": "X."},
                "pts": {"type": "array", "items": {"type": "tuple", "items": {"type": "float"}}},
                "opts": {"type": "dict", "properties": {"mode": {"type": "any"}, "k": {}}},
                "rows": {"type": "array", "items": {"type": "dict", "properties": {"n": {"type": "integer"}}}}
            }, "required": ["x"]}});
        let f = Function {
            name: "math.hypot".into(),
            params: vec![(
                "x".into(),
                Param {
                    ty: "float".into(),
                    items: None,
                },
            )],
            required: vec!["x".into()],
            doc,
        };
        let tools = openai_tools(std::slice::from_ref(&f), Language::Python);
        let t = &tools[0]["function"];
        assert_eq!(t["name"], "math_hypot");
        assert_eq!(
            t["description"],
            format!("Norm.{}", lang::hint(Language::Python))
        );
        let p = &t["parameters"];
        assert_eq!(p["type"], "object");
        assert_eq!(p["required"], json!(["x"]));
        assert_eq!(
            p["properties"]["x"],
            json!({"type": "number", "format": "float", "description": "X. This is a float type value."})
        );
        assert_eq!(
            p["properties"]["pts"],
            json!({"type": "array", "items": {"type": "array", "items": {"type": "number"}}})
        );
        assert_eq!(
            p["properties"]["opts"]["properties"]["mode"]["type"],
            "string"
        );
        assert_eq!(p["properties"]["opts"]["properties"]["k"]["type"], "string");
        assert_eq!(
            p["properties"]["rows"]["items"]["properties"]["n"]["type"],
            "integer"
        );
        let names = FunctionNames::new(&[f]);
        assert_eq!(names.original("math_hypot"), Some("math.hypot"));
        assert_eq!(names.original("math.hypot"), None);
    }
}
