//! Copies of values that later writes cannot change, and what they cost.

use crate::error::Result;
use crate::storage::Storage;
use crate::tensor::Tensor;
use crate::value::Value;
use std::collections::{HashMap, HashSet};
use std::sync::Arc;

/// Tuples nested deeper than this are kept by reference rather than copied (tuples themselves
/// are immutable; only tensors inside them could change), so that copying never recurses
/// without bound.
pub(super) const MAX_COPY_DEPTH: usize = 32;

/// What one value costs the budget besides its tensor bytes.
const VALUE_OVERHEAD: usize = std::mem::size_of::<Value>();

/// A copy of `v` that later writes to `v`'s tensors do not reach. Tensors get storage of their
/// own; tuples are copied element by element; everything else is immutable or opaque
/// (functions, storage, objects) and is kept by reference. A tuple shared in several places is
/// copied once and its copy shared the same way, so a value whose sharing makes it
/// exponentially large when unfolded costs time and memory linear in its distinct tuples.
pub(super) fn copy_value(v: &Value) -> Result<Value> {
    // An empty map does not allocate: values without tuples cost nothing extra.
    copy_at(v, 0, &mut HashMap::new())
}

/// The tuples copied so far, by the address of the original's items (alive while `v` is
/// borrowed, so no address is reused during one copy).
type Copied = HashMap<*const Vec<Value>, Value>;

fn copy_at(v: &Value, depth: usize, copied: &mut Copied) -> Result<Value> {
    Ok(match v {
        Value::Tensor(t) => Value::Tensor(copy_tensor(t)?),
        Value::Tuple(items) if depth < MAX_COPY_DEPTH => {
            if let Some(done) = copied.get(&Arc::as_ptr(items)) {
                return Ok(done.clone());
            }
            let copy =
                Value::Tuple(Arc::new(items.iter().map(|x| copy_at(x, depth + 1, copied)).collect::<Result<_>>()?));
            copied.insert(Arc::as_ptr(items), copy.clone());
            copy
        }
        other => other.clone(),
    })
}

/// A contiguous copy of `t` in storage of its own.
fn copy_tensor(t: &Tensor) -> Result<Tensor> {
    if !t.is_contiguous() {
        // The compact copy of a strided tensor is already a fresh block.
        return t.contiguous();
    }
    let (start, n) = (t.byte_offset(), t.nbytes());
    let read = t.storage().bytes();
    let storage = Storage::alloc_filled(n, t.device(), |dst| {
        dst.copy_from_slice(&read[start..start + n]);
        Ok(())
    })?;
    Tensor::from_parts(storage, 0, t.shape().clone(), None, t.dtype())
}

/// The bytes copying `v` costs (tensor data plus a fixed amount per value), saturating. A
/// shared tuple counts once, as [`copy_value`] copies it once.
pub(super) fn value_bytes(v: &Value) -> usize {
    // An empty set does not allocate: values without tuples cost nothing extra.
    bytes_at(v, 0, &mut HashSet::new())
}

fn bytes_at(v: &Value, depth: usize, seen: &mut HashSet<*const Vec<Value>>) -> usize {
    match v {
        Value::Tensor(t) => t.nbytes().saturating_add(VALUE_OVERHEAD),
        Value::Tuple(items) if depth < MAX_COPY_DEPTH => {
            if !seen.insert(Arc::as_ptr(items)) {
                return VALUE_OVERHEAD;
            }
            items.iter().fold(VALUE_OVERHEAD, |sum, x| sum.saturating_add(bytes_at(x, depth + 1, seen)))
        }
        Value::Str(s) => s.len().saturating_add(VALUE_OVERHEAD),
        _ => VALUE_OVERHEAD,
    }
}

/// True when the tensors have the same dtype, shape and bytes: whether a call changed an
/// argument it was given.
pub(super) fn same_contents(before: &Tensor, after: &Tensor) -> bool {
    if before.dtype() != after.dtype() || before.shape() != after.shape() {
        return false;
    }
    if before.is_contiguous() && after.is_contiguous() {
        let (a, b) = (before.storage().bytes(), after.storage().bytes());
        let n = before.nbytes();
        return a[before.byte_offset()..before.byte_offset() + n] == b[after.byte_offset()..after.byte_offset() + n];
    }
    before.content_eq(after)
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;

    #[test]
    fn copies_do_not_share_storage_and_strided_views_are_compacted() {
        let t = Tensor::from_vec([2, 2], vec![1.0f32, 2.0, 3.0, 4.0]).unwrap();
        let c = copy_value(&Value::Tensor(t.clone())).unwrap().as_tensor().unwrap().clone();
        assert!(!c.shares_storage(&t) && c.content_eq(&t));
        t.storage().write(0, &9.0f32.to_ne_bytes()).unwrap();
        assert_eq!(c.to_vec::<f32>().unwrap(), vec![1.0, 2.0, 3.0, 4.0]);
        let col = Tensor::from_parts(t.storage().clone(), 4, [2].into(), Some(vec![2]), t.dtype()).unwrap();
        let c = copy_value(&Value::Tensor(col)).unwrap().as_tensor().unwrap().clone();
        assert_eq!(c.to_vec::<f32>().unwrap(), vec![2.0, 4.0]);
        assert!(c.is_contiguous());
    }

    #[test]
    fn tuples_copy_to_a_bounded_depth() {
        let t = Value::Tensor(Tensor::from_vec([1], vec![1i64]).unwrap());
        let mut v = Value::tuple(vec![t]);
        for _ in 0..MAX_COPY_DEPTH + 5 {
            v = Value::tuple(vec![v]);
        }
        let c = copy_value(&v).unwrap();
        assert!(c.content_eq(&v) && !c.same_object(&v));
        assert!(value_bytes(&v) >= 8);
    }

    /// `(v, v)` nested `n` deep: `2^n` leaves from `n + 1` tuples.
    pub(in crate::trace) fn doubled(n: usize) -> Value {
        let mut v = Value::Tensor(Tensor::from_vec([1], vec![1i64]).unwrap());
        for _ in 0..n {
            v = Value::tuple(vec![v.clone(), v]);
        }
        v
    }

    #[test]
    fn shared_tuples_are_copied_and_counted_once() {
        // 2^30 leaves unfolded: only linear work finishes.
        let v = doubled(30);
        let c = copy_value(&v).unwrap();
        let Value::Tuple(items) = &c else { panic!("a tuple") };
        let (Value::Tuple(x), Value::Tuple(y)) = (&items[0], &items[1]) else { panic!("two tuples") };
        assert!(Arc::ptr_eq(x, y));
        assert!(!c.same_object(&v));
        // Each level above the first: the tuple, and its second item (counted already) as one
        // value; the first level: the tuple and its two (unshared) tensors.
        assert_eq!(value_bytes(&v), 29 * 2 * VALUE_OVERHEAD + VALUE_OVERHEAD + 2 * (8 + VALUE_OVERHEAD));
    }

    #[test]
    fn same_contents_sees_a_changed_byte() {
        let a = Tensor::from_vec([3], vec![1u8, 2, 3]).unwrap();
        let b = Tensor::from_vec([3], vec![1u8, 2, 4]).unwrap();
        assert!(same_contents(&a, &a.clone()) && !same_contents(&a, &b));
        let c = Tensor::from_vec([1, 3], vec![1u8, 2, 3]).unwrap();
        assert!(!same_contents(&a, &c));
    }
}
