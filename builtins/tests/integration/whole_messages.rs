//! Refusals whose tests held only a part of the message that another message shares (attack
//! finding other/02): each caused here, with its kind and its whole message (what was expected,
//! what was found, and where: the builtin, the argument, the item).

use crate::common::{call, shape, tensor};
use relaxvm::{ErrorKind, Value};

fn i(v: i64) -> Value {
    Value::Int(v)
}

/// The call's error: its kind must pass `kind`, and its message is returned.
fn refused(name: &str, args: &[Value], kind: fn(&ErrorKind) -> bool) -> String {
    match call(name, args) {
        Ok(v) => panic!("{name}: returned {v:?}, expected an error"),
        Err(e) => {
            assert!(kind(e.root().kind()), "{name}: {e} ({:?})", e.root().kind());
            e.to_string()
        }
    }
}

fn value(k: &ErrorKind) -> bool {
    matches!(k, ErrorKind::Value(_))
}

fn type_(k: &ErrorKind) -> bool {
    matches!(k, ErrorKind::Type { .. })
}

#[test]
fn the_legacy_kv_caches_name_the_argument_and_the_item() {
    let cache = call("vm.builtin.attention_kv_cache_create", &[tensor(&[1, 2], vec![1i32, 2]), shape(&[2, 2]), i(0)])
        .expect("a cache");
    let clear = "vm.builtin.attention_kv_cache_array_clear";
    assert_eq!(
        refused(clear, &[i(7)], type_),
        format!("type mismatch: expected tuple of attention_kv_cache (legacy) as argument 0 (caches) of {clear}, found int 7")
    );
    assert_eq!(
        refused(clear, &[Value::tuple(vec![cache.clone(), i(1)])], type_),
        format!("type mismatch: expected attention_kv_cache (legacy) as item 1 of argument 0 (caches) of {clear}, found int 1")
    );
    let view = "vm.builtin.attention_kv_cache_view";
    assert_eq!(
        refused(view, &[cache, shape(&[1])], value),
        format!("{view}: attention_kv_cache view: expected a shape of 2 dimensions (0, 2), found (1,)")
    );
}

#[test]
fn a_token_id_outside_the_logits() {
    let penalty = "vm.builtin.apply_repetition_penalty";
    let logits = tensor(&[1, 4], vec![0.5f32, 2.0, -1.0, 2.0]);
    let ids = tensor(&[1, 3], vec![1i32, 4, 0]);
    assert_eq!(
        refused(penalty, &[logits, ids, Value::Float(2.0)], value),
        format!("{penalty}: token_ids[1] = 4 is outside the 4 logits")
    );
}

#[test]
fn storage_of_a_negative_size() {
    let alloc = "vm.builtin.alloc_storage";
    let args = [Value::VmState, shape(&[4, -2]), i(0), Value::str("uint8")];
    assert_eq!(refused(alloc, &args, value), format!("{alloc}: storage size (4, -2) has negative dimension -2"));
}
