//! The constant pool under construction: equal constants are stored once.

use crate::error::BuildError;
use relaxvm::format::MAX_TUPLE_DEPTH;
use relaxvm::Value;
use std::collections::hash_map::DefaultHasher;
use std::collections::HashMap;
use std::hash::{Hash, Hasher};

/// Constants in pool order, with a hash index for deduplication.
#[derive(Clone, Default)]
pub(crate) struct ConstantPool {
    values: Vec<Value>,
    by_hash: HashMap<u64, Vec<u32>>,
}

impl ConstantPool {
    /// The index of a constant equal to `v` ([`Value::content_eq`]), adding `v` if there is none.
    /// Tuples of constants are constants too (TVM's `Array` constants), nested at most
    /// [`MAX_TUPLE_DEPTH`] deep, as the binary format stores them.
    pub fn intern(&mut self, v: Value) -> Result<u32, BuildError> {
        let interned = self.intern_with(&v, |_| Ok::<_, std::convert::Infallible>(v.clone()));
        interned.unwrap_or_else(|never| match never {})
    }

    /// Like [`intern`](Self::intern), but when `v` is new the pool keeps `own(v)` instead (a copy
    /// that does not alias the caller's memory), made only then, after one hash of `v`. The outer
    /// error is `own`'s, the inner one the pool's.
    pub fn intern_with<E>(
        &mut self,
        v: &Value,
        own: impl FnOnce(&Value) -> Result<Value, E>,
    ) -> Result<Result<u32, BuildError>, E> {
        let Some(h) = content_hash(v, 0) else { return Ok(Err(BuildError::UnsupportedConstant(v.type_name()))) };
        let candidates = self.by_hash.entry(h).or_default();
        if let Some(&i) = candidates.iter().find(|&&i| self.values[i as usize].content_eq(v)) {
            return Ok(Ok(i));
        }
        let Ok(i) = u32::try_from(self.values.len()) else {
            return Ok(Err(BuildError::UnsupportedConstant("4294967296th constant")));
        };
        let owned = own(v)?;
        self.by_hash.entry(h).or_default().push(i);
        self.values.push(owned);
        Ok(Ok(i))
    }

    /// The constants, in pool order.
    pub fn values(&self) -> &[Value] {
        &self.values
    }
}

/// A hash consistent with [`Value::content_eq`] for the kinds a constant may be (tuples of them
/// included, `depth` levels in); `None` for the others (functions, storage, objects...) and
/// for tuples nested too deep.
fn content_hash(v: &Value, depth: usize) -> Option<u64> {
    let mut h = DefaultHasher::new();
    if let Value::Tuple(items) = v {
        if depth >= MAX_TUPLE_DEPTH {
            return None;
        }
        9u8.hash(&mut h);
        for item in items.iter() {
            content_hash(item, depth + 1)?.hash(&mut h);
        }
        return Some(h.finish());
    }
    match v {
        Value::Null => 0u8.hash(&mut h),
        Value::Int(i) => (1u8, i).hash(&mut h),
        Value::Float(x) => (2u8, x.to_bits()).hash(&mut h),
        Value::Bool(b) => (3u8, b).hash(&mut h),
        Value::Str(s) => (4u8, &**s).hash(&mut h),
        Value::Shape(s) => (5u8, s.dims()).hash(&mut h),
        Value::DType(d) => (6u8, d).hash(&mut h),
        Value::Device(d) => (7u8, d).hash(&mut h),
        // Without a digest (a strided view too large to copy) the tensor is still a constant,
        // hashed by dtype and shape only: it is then not deduplicated against contiguous equals,
        // and keeping it (a copy) reports the allocation that fails.
        Value::Tensor(t) => (8u8, t.dtype(), t.shape().dims(), tensor_digest(t)).hash(&mut h),
        _ => return None,
    }
    Some(h.finish())
}

/// A digest of a tensor's bytes in C order, read in place when contiguous: XXH3 of them, or for
/// more than one chunk ([`relaxvm::chunks`]), XXH3 of the chunks' XXH3s, computed on every core
/// (a 256 MiB weight hashes in tens of milliseconds on one; SipHash over a copy took most of a
/// second). `None` when a strided tensor is too large to copy (it is then not deduplicated).
fn tensor_digest(t: &relaxvm::Tensor) -> Option<u64> {
    use relaxvm::chunks::{map_chunks, CHUNK};
    use xxhash_rust::xxh3::xxh3_64;
    t.with_contiguous_bytes(|b| {
        if b.len() <= CHUNK {
            return xxh3_64(b);
        }
        let digests = map_chunks(relaxvm::pool::global(), b.len(), CHUNK, |r| xxh3_64(&b[r]));
        xxh3_64(&digests.iter().flat_map(|d| d.to_le_bytes()).collect::<Vec<u8>>())
    })
    .ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use relaxvm::{DataType, Device, Shape, Tensor};

    #[test]
    fn equal_constants_share_an_index() {
        let mut p = ConstantPool::default();
        let t = |v: Vec<f32>| Value::Tensor(Tensor::from_vec([v.len() as i64], v).unwrap());
        let items = [
            Value::Int(1),
            Value::str("a"),
            Value::Shape(Shape::from([2, 3])),
            Value::DType(DataType::F32),
            t(vec![1.0, 2.0]),
            Value::Float(1.0),
            Value::Bool(true),
            Value::Null,
            Value::Device(Device::cpu(0)),
        ];
        let first: Vec<u32> = items.iter().map(|v| p.intern(v.clone()).unwrap()).collect();
        assert_eq!(first, (0..items.len() as u32).collect::<Vec<_>>());
        assert_eq!(p.intern(Value::Int(1)).unwrap(), 0);
        assert_eq!(p.intern(Value::str("a")).unwrap(), 1);
        assert_eq!(p.intern(Value::Shape(Shape::from([2, 3]))).unwrap(), 2);
        assert_eq!(p.intern(Value::DType(DataType::F32)).unwrap(), 3);
        assert_eq!(p.intern(t(vec![1.0, 2.0])).unwrap(), 4, "tensors by content");
        assert_eq!(p.intern(t(vec![1.0, 3.0])).unwrap(), items.len() as u32);
        assert_eq!(p.values().len(), items.len() + 1);
    }

    #[test]
    fn imported_tuples_are_deduplicated_by_content() {
        let mut p = ConstantPool::default();
        let t = || Value::tuple(vec![Value::Int(1), Value::tuple(vec![Value::str("a")])]);
        assert_eq!(p.intern(t()).unwrap(), 0);
        assert_eq!(p.intern(t()).unwrap(), 0);
        assert_eq!(p.intern(Value::tuple(vec![Value::Int(2)])).unwrap(), 1);
        assert_eq!(
            format!("{:?}", p.intern(Value::tuple(vec![Value::VmState])).expect_err("an error")),
            r#"UnsupportedConstant("tuple")"#
        );
        let mut deep = Value::Int(0);
        for _ in 0..MAX_TUPLE_DEPTH + 1 {
            deep = Value::tuple(vec![deep]);
        }
        assert!(p.intern(deep).unwrap_err().to_string().contains("nested at most 32 deep"));
    }

    #[test]
    fn non_constant_kinds_are_rejected() {
        let mut p = ConstantPool::default();
        let e = p.intern(Value::tuple(vec![Value::VmState])).unwrap_err().to_string();
        assert!(e.contains("a tuple cannot be a constant") && e.contains("tuples of these"), "{e}");
        assert_eq!(
            format!("{:?}", p.intern(Value::VmState).expect_err("an error")),
            r#"UnsupportedConstant("vm_state")"#
        );
        assert!(p.values().is_empty());
    }

    #[test]
    fn large_tensors_are_deduplicated_by_chunked_digests() {
        // Past one chunk: the digest and the comparison are split over the pool's threads.
        let n = relaxvm::chunks::CHUNK / 4 * 3 + 5;
        let t = |change: Option<usize>| {
            let mut v: Vec<f32> = (0..n).map(|i| (i % 1000) as f32).collect();
            if let Some(at) = change {
                v[at] += 1.0;
            }
            Value::Tensor(Tensor::from_vec([n as i64], v).unwrap())
        };
        let mut p = ConstantPool::default();
        assert_eq!(p.intern(t(None)).unwrap(), 0);
        assert_eq!(p.intern(t(None)).unwrap(), 0, "an equal copy is shared");
        assert_eq!(content_hash(&t(None), 0), content_hash(&t(None), 0));
        for (k, at) in [0, n / 2, n - 1].into_iter().enumerate() {
            assert_ne!(content_hash(&t(Some(at)), 0), content_hash(&t(None), 0), "a change at element {at}");
            assert_eq!(p.intern(t(Some(at))).unwrap(), k as u32 + 1);
        }
    }
}
