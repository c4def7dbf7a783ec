//! Lowered schemas kept between grammars: a compiler that sees the same tool again imports its
//! argument rules instead of reading and lowering the schema again.
//!
//! A fragment is the self-contained grammar [`add_schema_rule`] produces for one schema (its root
//! rule and helper rules) with the warnings, keyed by a [`fingerprint`] of the root rule's name,
//! the schema JSON (member order included), the options and the limits, so a hit is exactly what
//! lowering would have produced. Failures are not kept: a schema that fails is lowered (and fails) again.
//!
//! A fragment is kept optimized ([`passes::optimize`]: the compiler would apply the same passes to
//! the whole grammar) with its structurally equal rules merged, and with the structural key of
//! each rule ([`rule_keys`]), so importing it into a grammar that already holds other tools'
//! arguments adds only the rules they do not share ([`GrammarBuilder::import_interned`]): fewer
//! rules, and fewer states in the automaton the compiler builds.

use std::hash::Hash;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use rustc_hash::FxHashMap;
use serde_json::Value;

use super::{add_schema_rule, JsonSchemaOptions, SchemaError, SchemaWarning};
use crate::grammar::intern::rule_keys;
use crate::grammar::{passes, Grammar, GrammarBuilder};
use crate::util::{Fingerprint, Limits, RuleId};

/// Most fragments kept before the table starts over.
const MAX_FRAGMENTS: usize = 4096;

/// One schema's lowered rules and warnings.
#[derive(Debug)]
struct Fragment {
    grammar: Grammar,
    /// [`rule_keys`] of `grammar`.
    keys: Vec<Option<u128>>,
    warnings: Vec<SchemaWarning>,
}

/// Lowered argument schemas by fingerprint, shared by the grammars of one compiler.
#[derive(Debug, Default)]
pub struct SchemaFragments {
    map: Mutex<FxHashMap<u128, Arc<Fragment>>>,
    hits: AtomicU64,
}

impl SchemaFragments {
    /// An empty table.
    pub fn new() -> SchemaFragments {
        SchemaFragments::default()
    }

    /// How many schemas were imported instead of lowered.
    pub fn hits(&self) -> u64 {
        self.hits.load(Ordering::Relaxed)
    }

    /// Adds to `builder` a rule named after `name` matching the JSON values `schema` allows (with
    /// its helper rules) and returns it with the warnings: [`add_schema_rule`], from the table when
    /// the same schema was lowered before with the same options and limits.
    pub fn add_schema(
        &self,
        builder: &mut GrammarBuilder,
        name: &str,
        schema: &Value,
        options: &JsonSchemaOptions,
        limits: &Limits,
    ) -> Result<(RuleId, Vec<SchemaWarning>), SchemaError> {
        let mut key = Fingerprint::new();
        name.hash(&mut key);
        key.write_json(schema);
        options.hash(&mut key);
        limits.hash(&mut key);
        let key = key.finish128();
        let cached = self.lock().get(&key).cloned();
        let fragment = match cached {
            Some(f) => {
                self.hits.fetch_add(1, Ordering::Relaxed);
                f
            }
            None => {
                let mut own = GrammarBuilder::new(limits);
                let root = own.declare(name)?;
                let warnings = add_schema_rule(&mut own, root, schema, options, limits)?;
                let lowered = passes::optimize(own.build(name)?);
                let mut merged = GrammarBuilder::new(limits);
                let root = merged.import_interned(&lowered, &rule_keys(&lowered))?;
                let grammar = merged.build_rooted(root)?;
                let fragment = Arc::new(Fragment {
                    keys: rule_keys(&grammar),
                    grammar,
                    warnings,
                });
                let mut map = self.lock();
                if map.len() >= MAX_FRAGMENTS {
                    map.clear();
                }
                map.insert(key, Arc::clone(&fragment));
                fragment
            }
        };
        // The rules the builder does not hold yet come in under names made fresh from their own.
        let rule = builder.import_interned(&fragment.grammar, &fragment.keys)?;
        Ok((rule, fragment.warnings.clone()))
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, FxHashMap<u128, Arc<Fragment>>> {
        self.map.lock().unwrap_or_else(|e| e.into_inner())
    }
}
