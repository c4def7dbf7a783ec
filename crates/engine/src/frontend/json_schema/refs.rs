//! The documents a `$ref` can point into: the schema being read ([`Doc::Root`]) and the bundled
//! official meta-schemas ([`Doc::Meta`]: draft-04, -06, -07, 2019-09 and 2020-12 with its
//! vocabularies). Where a reference points inside them is [`super::resources`]' business.

use serde_json::Value;

/// A document a reference can point into.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Doc {
    /// The schema being read.
    Root,
    /// The bundled meta-schema [`META`]`[i]`.
    Meta(usize),
}

/// A bundled meta-schema: its URI (without `#`) and its document.
pub struct MetaSchema {
    /// The `$id` / `id`, without a trailing `#`.
    pub uri: &'static str,
    /// The document.
    pub value: fn() -> &'static Value,
    /// For 2019-09 and 2020-12: the draft's top meta-schema, which 2019-09's `$recursiveRef`
    /// resolves to when validation starts there (2020-12's `$dynamicRef` finds it through its
    /// `$dynamicAnchor`).
    pub dynamic_root: Option<&'static str>,
}

macro_rules! meta {
    ($uri:expr, $value:ident, $root:expr) => {
        MetaSchema {
            uri: $uri,
            value: || &**referencing::meta::$value,
            dynamic_root: $root,
        }
    };
}

const D2019: Option<&str> = Some("https://json-schema.org/draft/2019-09/schema");
const D2020: Option<&str> = Some("https://json-schema.org/draft/2020-12/schema");

/// The official meta-schemas, as the `referencing` crate bundles them.
pub static META: [MetaSchema; 19] = [
    meta!("http://json-schema.org/draft-04/schema", DRAFT4, None),
    meta!("http://json-schema.org/draft-06/schema", DRAFT6, None),
    meta!("http://json-schema.org/draft-07/schema", DRAFT7, None),
    meta!(
        "https://json-schema.org/draft/2019-09/schema",
        DRAFT201909,
        D2019
    ),
    meta!(
        "https://json-schema.org/draft/2019-09/meta/core",
        DRAFT201909_CORE,
        D2019
    ),
    meta!(
        "https://json-schema.org/draft/2019-09/meta/applicator",
        DRAFT201909_APPLICATOR,
        D2019
    ),
    meta!(
        "https://json-schema.org/draft/2019-09/meta/validation",
        DRAFT201909_VALIDATION,
        D2019
    ),
    meta!(
        "https://json-schema.org/draft/2019-09/meta/meta-data",
        DRAFT201909_META_DATA,
        D2019
    ),
    meta!(
        "https://json-schema.org/draft/2019-09/meta/format",
        DRAFT201909_FORMAT,
        D2019
    ),
    meta!(
        "https://json-schema.org/draft/2019-09/meta/content",
        DRAFT201909_CONTENT,
        D2019
    ),
    meta!(
        "https://json-schema.org/draft/2020-12/schema",
        DRAFT202012,
        D2020
    ),
    meta!(
        "https://json-schema.org/draft/2020-12/meta/core",
        DRAFT202012_CORE,
        D2020
    ),
    meta!(
        "https://json-schema.org/draft/2020-12/meta/applicator",
        DRAFT202012_APPLICATOR,
        D2020
    ),
    meta!(
        "https://json-schema.org/draft/2020-12/meta/unevaluated",
        DRAFT202012_UNEVALUATED,
        D2020
    ),
    meta!(
        "https://json-schema.org/draft/2020-12/meta/validation",
        DRAFT202012_VALIDATION,
        D2020
    ),
    meta!(
        "https://json-schema.org/draft/2020-12/meta/meta-data",
        DRAFT202012_META_DATA,
        D2020
    ),
    meta!(
        "https://json-schema.org/draft/2020-12/meta/format-annotation",
        DRAFT202012_FORMAT_ANNOTATION,
        D2020
    ),
    meta!(
        "https://json-schema.org/draft/2020-12/meta/format-assertion",
        DRAFT202012_FORMAT_ASSERTION,
        D2020
    ),
    meta!(
        "https://json-schema.org/draft/2020-12/meta/content",
        DRAFT202012_CONTENT,
        D2020
    ),
];

/// The root value of `doc` (`root` for the schema being read).
pub fn doc_root(doc: Doc, root: &Value) -> &Value {
    match doc {
        Doc::Root => root,
        Doc::Meta(i) => (META[i].value)(),
    }
}
