//! A tool list + a call style + options → the structural tag that constrains an answer
//! ([`tools_structural_tag`]). The style table and the tool list are read in [`super::tools`]; the
//! call formats other than the style's own come from `super::call_formats`.

use serde_json::{json, Value};

use super::call_formats::{extra_call_excludes, extra_call_tags};
use super::tools::{
    check_satisfiable, tools_error, FormatSet, StyleSpec, Tool, ToolChoice, ToolOptions,
    ToolsError, THINK,
};

/// The structural tag for `tools` in `style` under `options`.
pub fn tools_structural_tag(
    tools: &[Tool],
    style: &StyleSpec,
    options: &ToolOptions,
) -> Result<Value, ToolsError> {
    let chosen: Vec<&Tool> = match &options.tool_choice {
        ToolChoice::Named(n) => {
            let t = tools.iter().find(|t| &t.name == n).ok_or_else(|| {
                tools_error(
                    "/".into(),
                    format!("tool_choice names {n:?}, which is not in the tool list"),
                )
            })?;
            vec![t]
        }
        _ => tools.iter().collect(),
    };
    let calls = if options.tool_choice == ToolChoice::None || chosen.is_empty() {
        if options.tool_choice != ToolChoice::None && options.tool_choice != ToolChoice::Auto {
            return Err(tools_error(
                "/".into(),
                "tool_choice requires a call but the tool list is empty",
            ));
        }
        let mut excludes = vec![style.trigger.to_string()];
        if options.formats == FormatSet::All {
            excludes.extend(extra_call_excludes(style));
        }
        json!({"type": "any_text", "excludes": excludes})
    } else {
        for t in &chosen {
            check_satisfiable(&t.name, &t.parameters, &t.parameters_at)?;
        }
        let at_least_one = options.tool_choice != ToolChoice::Auto;
        let one = !options.parallel_tool_calls;
        let call_tags: Vec<Value> = chosen
            .iter()
            .map(|t| {
                let content = if style.xml_args {
                    json!({"type": "json_schema", "json_schema": t.parameters, "style": "qwen_xml"})
                } else {
                    json!({"type": "json_schema", "json_schema": t.parameters})
                };
                json!({"type": "tag", "begin": style.begin.replace("{name}", &t.name), "content": content, "end": style.end})
            })
            .collect();
        let mut tags = match style.block {
            None => call_tags,
            Some((begin, separator, end)) => vec![json!({
                "type": "tag",
                "begin": begin,
                "content": {"type": "tags_with_separator", "tags": call_tags, "separator": separator,
                            "at_least_one": true, "stop_after_first": one},
                "end": end,
            })],
        };
        let mut triggers = vec![style.trigger.to_string()];
        if options.formats == FormatSet::All {
            let (extra_triggers, extra_tags) = extra_call_tags(style, &chosen, one);
            // A canonical trigger that starts with an extra one (llama_json's `{"name": "`) is
            // reached through it: a tag begin may start with only one trigger.
            if extra_triggers
                .iter()
                .any(|t| style.trigger.starts_with(t.as_str()))
            {
                triggers.clear();
            }
            triggers.extend(extra_triggers);
            tags.extend(extra_tags);
        }
        json!({"type": "triggered_tags", "triggers": triggers, "tags": tags,
               "at_least_one": at_least_one, "stop_after_first": one})
    };
    let reasoning = options.reasoning.unwrap_or(style.reasoning_default);
    let format = match (reasoning, style.reasoning_off) {
        (true, _) => {
            let (begin, end) = style.reasoning;
            let mut elements = vec![
                json!({"type": "tag", "begin": begin, "content": {"type": "any_text"}, "end": end}),
            ];
            if begin == THINK.0 {
                elements.push(json!({"type": "regex", "pattern": "\\n{0,2}"}));
            }
            elements.push(calls);
            json!({"type": "sequence", "elements": elements})
        }
        (false, Some(forced)) if options.reasoning == Some(false) => {
            json!({"type": "sequence", "elements": [{"type": "const_string", "value": forced}, calls]})
        }
        (false, _) => calls,
    };
    Ok(json!({"type": "structural_tag", "format": format}))
}
