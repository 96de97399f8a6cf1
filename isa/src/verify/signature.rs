//! Well-formed signatures: what a signature must satisfy before a VM checks arguments with it.

use crate::names::is_plain_name;
use crate::types::{negative_dimension, types_too_deep, Dim, Signature, Type, MAX_TYPE_DEPTH};
use std::collections::HashSet;

/// Checks that a signature is well formed: parameter names distinct and not empty, types nested
/// at most [`MAX_TYPE_DEPTH`] deep, dict keys distinct and sorted (the order slots are passed
/// in), static dimensions not negative and symbolic dimensions plain names (so that the text
/// form reads back). The error says what is wrong and where.
pub fn verify_signature(sig: &Signature) -> std::result::Result<(), String> {
    let mut seen = HashSet::new();
    for (name, t) in &sig.params {
        if name.is_empty() {
            return Err("a parameter has an empty name".to_string());
        }
        if !seen.insert(name.as_str()) {
            return Err(format!("two parameters are named {name:?}"));
        }
        verify_type(t, 1).map_err(|e| format!("parameter {name:?}: {e}"))?;
    }
    verify_type(&sig.result, 1).map_err(|e| format!("result: {e}"))
}

fn verify_type(t: &Type, depth: usize) -> std::result::Result<(), String> {
    if depth > MAX_TYPE_DEPTH {
        return Err(types_too_deep());
    }
    match t {
        Type::Any | Type::Scalar(_) | Type::Str | Type::Object | Type::Shape(_) => Ok(()),
        Type::Tensor { dims, .. } => {
            for d in dims.iter().flatten() {
                match d {
                    Dim::Static(n) if *n < 0 => return Err(negative_dimension(*n)),
                    Dim::Symbolic(s) if !is_plain_name(s) => {
                        return Err(format!("symbolic dimension {s:?} is not a plain name"))
                    }
                    _ => {}
                }
            }
            Ok(())
        }
        Type::Tuple(items) => items.iter().try_for_each(|t| verify_type(t, depth + 1)),
        Type::List(item) => verify_type(item, depth + 1),
        Type::Dict(slots) => {
            for w in slots.windows(2) {
                if w[0].0 >= w[1].0 {
                    return Err(format!(
                        "dict keys {:?} and {:?} are not distinct and sorted (slots are passed in key order)",
                        w[0].0, w[1].0
                    ));
                }
            }
            slots.iter().try_for_each(|(_, t)| verify_type(t, depth + 1))
        }
    }
}
