//! Moving an executable's constants into read-only pages (see `docs/memory.md`).

use crate::error::Result;
use crate::storage::read_only::ReadOnlyPages;
use crate::storage::{Storage, ALIGNMENT};
use crate::tensor::Tensor;
use crate::value::Value;
use std::collections::HashMap;
use std::sync::Arc;

/// Where a tensor or storage constant sits in `constants`.
enum Slot<'a> {
    Tensor(&'a mut Tensor),
    Storage(&'a mut Storage),
}

impl Slot<'_> {
    fn storage(&self) -> &Storage {
        match self {
            Slot::Tensor(t) => t.storage(),
            Slot::Storage(s) => s,
        }
    }
}

/// Replaces every tensor and storage constant (nested in tuples and closures too) whose bytes
/// are not in read-only pages yet by one viewing a copy of them in one new block of read-only
/// pages, and freezes the rest (empty storages): afterwards no code — a native kernel writing
/// through a raw pointer included — can change a constant's bytes. Constants that shared a
/// storage share its copy; constants already sealed (a file mapped read-only) stay as they
/// are. Iterative, so a deeply nested constant cannot overflow the stack. Tuples and closures
/// shared with values outside `constants` are copied, not changed.
pub fn seal_constants(constants: &mut [Value]) -> Result<()> {
    let mut slots: Vec<Slot<'_>> = Vec::new();
    let mut work: Vec<&mut Value> = constants.iter_mut().collect();
    while let Some(v) = work.pop() {
        match v {
            Value::Tensor(t) => slots.push(Slot::Tensor(t)),
            Value::Storage(s) => slots.push(Slot::Storage(s)),
            Value::Tuple(items) => work.extend(Arc::make_mut(items).iter_mut()),
            Value::Func(closure) => work.extend(Arc::make_mut(closure).captured.iter_mut()),
            _ => {}
        }
    }
    // Each distinct storage (by its memory) gets a 64-byte-aligned place in the block.
    let mut places: HashMap<(usize, usize), usize> = HashMap::new();
    let mut sources: Vec<(Storage, usize)> = Vec::new();
    let mut total = 0usize;
    for slot in &slots {
        let s = slot.storage();
        if s.is_sealed() || s.is_empty() {
            s.freeze();
            continue;
        }
        places.entry((s.as_ptr() as usize, s.len())).or_insert_with(|| {
            let at = total.next_multiple_of(ALIGNMENT);
            total = at + s.len();
            sources.push((s.clone(), at));
            at
        });
    }
    if sources.is_empty() {
        return Ok(());
    }
    let pages = Arc::new(ReadOnlyPages::filled(total, |block| {
        for (s, at) in &sources {
            s.read_with(|bytes| block[*at..*at + bytes.len()].copy_from_slice(bytes));
        }
        Ok(())
    })?);
    drop(sources);
    let mut sealed: HashMap<(usize, usize), Storage> = HashMap::with_capacity(places.len());
    for (key, at) in places {
        sealed.insert(key, Storage::from_read_only_pages(pages.clone(), at, key.1)?);
    }
    for slot in slots {
        let key = (slot.storage().as_ptr() as usize, slot.storage().len());
        let Some(copy) = sealed.get(&key) else { continue };
        match slot {
            Slot::Storage(s) => *s = copy.clone(),
            Slot::Tensor(t) => {
                let strides = (!t.is_contiguous()).then(|| t.strides());
                *t = Tensor::from_parts(copy.clone(), t.byte_offset(), t.shape().clone(), strides, t.dtype())?;
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::device::Device;
    use crate::dtype::DataType;
    use crate::value::{Callable, Closure};

    fn f32s(t: &Tensor) -> Vec<f32> {
        t.to_vec::<f32>().unwrap()
    }

    #[test]
    fn constants_move_to_read_only_pages_with_their_bytes_and_sharing() {
        let a = Tensor::from_vec([3], vec![1.0f32, 2.0, 3.0]).unwrap();
        let strided = Tensor::from_parts(a.storage().clone(), 4, [2].into(), Some(vec![1]), DataType::F32).unwrap();
        let heap = Storage::alloc(16, Device::cpu(0)).unwrap();
        heap.write(0, &[5; 16]).unwrap();
        let empty = Tensor::zeros([0], DataType::F32, Device::cpu(0)).unwrap();
        let closure = Value::Func(Arc::new(Closure {
            callable: Callable::Bytecode { index: 0, name: "f".into(), program: None },
            captured: vec![Value::Tensor(a.clone())],
        }));
        let outside = Arc::new(vec![Value::Tensor(a.clone()), Value::Storage(heap.clone())]);
        let mut constants = vec![
            Value::Tensor(a.clone()),
            Value::Tuple(outside.clone()),
            Value::Tensor(strided),
            Value::Tensor(empty.clone()),
            closure,
            Value::Int(4),
        ];
        seal_constants(&mut constants).unwrap();
        let Value::Tensor(sa) = &constants[0] else { panic!() };
        assert!(sa.storage().is_sealed() && sa.storage().is_frozen());
        assert_eq!(f32s(sa), [1.0, 2.0, 3.0]);
        assert!(crate::storage::read_only::contains(sa.data_ptr() as usize));
        assert!((sa.data_ptr() as usize).is_multiple_of(ALIGNMENT));
        // The tuple shared with `outside` was copied; its tensor shares the sealed storage.
        let Value::Tuple(items) = &constants[1] else { panic!() };
        assert!(!Arc::ptr_eq(items, &outside) && !outside[0].as_tensor().unwrap().storage().is_frozen());
        assert!(items[0].as_tensor().unwrap().shares_storage(sa));
        let Value::Storage(sh) = &items[1] else { panic!() };
        assert!(sh.is_sealed() && sh.bytes().iter().all(|b| *b == 5));
        let Value::Tensor(ss) = &constants[2] else { panic!() };
        assert!(ss.shares_storage(sa) && f32s(ss) == [2.0, 3.0]);
        // An empty tensor has no bytes to move: it is frozen in place.
        let Value::Tensor(se) = &constants[3] else { panic!() };
        assert!(se.shares_storage(&empty) && se.storage().is_frozen() && !se.storage().is_sealed());
        let Value::Func(c) = &constants[4] else { panic!() };
        assert!(c.captured[0].as_tensor().unwrap().shares_storage(sa));
        // The originals are untouched and writable; the sealed copy refuses writes.
        a.storage().write(0, &[0; 4]).unwrap();
        assert_eq!(f32s(sa), [1.0, 2.0, 3.0]);
        assert!(sa.storage().write(0, &[0; 4]).unwrap_err().to_string().contains("read-only"));
        // Sealing again keeps what is sealed.
        let before = sa.data_ptr();
        seal_constants(&mut constants).unwrap();
        assert_eq!(constants[0].as_tensor().unwrap().data_ptr(), before);
    }
}
