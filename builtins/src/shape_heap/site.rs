//! `match_shape` and `make_shape` specialised to a call site whose `ndim`, codes and error
//! context are fixed operands (as TVM emits them): the codes are decided when the program is
//! loaded, so a call runs a list of plain steps with its slots checked once, not each slot's
//! code and bounds one by one.
//!
//! A step list runs when the value is a tensor or shape of the right rank and the heap reaches
//! every slot the steps name; it then applies them in order, as the general function does, and
//! reports the first mismatch as the general function would. Anything else (a value of another
//! kind, a missing or short heap, a heap another reader holds) goes to the general function,
//! which reports it, before any slot is stored: re-running steps after a store would be wrong
//! when a check of a slot comes before a store to it (it would then see the new value).

use super::{
    apply_match, build_shape, constant_mismatch, heap_mismatch, make_pairs, Heap, MatchPlan, Subject, INLINE_RANK,
};
use crate::args;
use relaxvm::storage::words::Words;
use relaxvm::{DataType, Error, PackedFunc, Result, Shape, Storage, Value};
use smallvec::SmallVec;
use std::ops::Range;
use std::sync::atomic::{AtomicI64, Ordering};

/// What a specialised `match_shape` does with one dimension.
#[derive(Clone, Copy)]
enum Check {
    /// Code 0: the dimension must equal this.
    Equal(i64),
    /// Code 1: the dimension goes into this slot.
    Store(usize),
    /// Code 2: nothing.
    Skip,
    /// Code 3: the dimension must equal this slot.
    EqualSlot(usize),
}

/// What a specialised `make_shape` puts in one dimension.
#[derive(Clone, Copy)]
enum Make {
    /// Code 0: this.
    Imm(i64),
    /// Code 1: this slot.
    Slot(usize),
}

/// The number of slots the steps name: one past the highest.
fn reach<T>(steps: &[T], slot: impl Fn(&T) -> Option<usize>) -> usize {
    steps.iter().filter_map(slot).map(|s| s + 1).max().unwrap_or(0)
}

/// The steps of a match's pairs; `None` when a code is unknown or a slot negative (the general
/// function then serves every call, and reports it).
fn checks(pairs: &[(i64, i64)]) -> Option<SmallVec<[Check; 4]>> {
    let slot = |v: i64| usize::try_from(v).ok();
    pairs
        .iter()
        .map(|&(code, v)| match code {
            0 => Some(Check::Equal(v)),
            1 => slot(v).map(Check::Store),
            2 => Some(Check::Skip),
            3 => slot(v).map(Check::EqualSlot),
            _ => None,
        })
        .collect()
}

/// `match_shape` for a call whose `ndim`, pairs and error context are fixed.
pub(super) fn specialize_match_shape(name: &'static str, fixed: &[Option<&Value>]) -> Option<PackedFunc> {
    let args = args::fixed_from(fixed, 2)?;
    let plan = MatchPlan::parse(name, &args).ok()?;
    let steps = checks(&plan.pairs);
    let (pairs, stores, err_ctx) = (plan.pairs, plan.stores, plan.err_ctx.map(str::to_owned));
    let f = match steps {
        Some(steps) => {
            let slots = reach(&steps, |c| match c {
                Check::Store(s) | Check::EqualSlot(s) => Some(*s),
                Check::Equal(_) | Check::Skip => None,
            });
            let site = Site { name, steps: steps.into_iter().collect(), slots, stores, err_ctx };
            PackedFunc::from_fn(name, move |args| match run_checks(&site, args) {
                Some(done) => done.map(|()| Value::Null),
                None => apply_match(name, args, &pairs, stores, site.err_ctx.as_deref()),
            })
        }
        None => PackedFunc::from_fn(name, move |args| apply_match(name, args, &pairs, stores, err_ctx.as_deref())),
    };
    // It reads the value and the heap; the rest are the fixed operands parsed here.
    Some(f.reading_first(2))
}

/// A specialised `match_shape` call site: its steps, the number of slots they name, whether
/// one stores, and its error context.
struct Site {
    name: &'static str,
    steps: Box<[Check]>,
    slots: usize,
    stores: bool,
    err_ctx: Option<String>,
}

/// The storage of a heap argument that is a contiguous 1-D `int64` view of word storage (what
/// `alloc_shape_heap` makes) with at least `slots` slots, and the words that hold its first
/// `slots`; `None` for any other argument, which [`Heap::arg`] then serves (and reports, when it
/// is wrong). Where [`Heap::arg`] works out the geometry of any view with overflow checks, a
/// contiguous one's slot `s` is word `byte_offset / 8 + s`. The caller takes the words to read
/// ([`Storage::words`]) or to write ([`Storage::words_for_write`]: not when frozen).
#[inline(always)]
fn word_slots(arg: Option<&Value>, slots: usize) -> Option<(&Storage, Range<usize>)> {
    let Some(Value::Tensor(t)) = arg else { return None };
    let offset = t.byte_offset();
    let storage = t.storage();
    if !storage.is_words() || t.dtype() != DataType::I64 || !t.is_contiguous() || offset % 8 != 0 {
        return None;
    }
    let &[len] = t.shape().dims() else { return None };
    // `len` slots from word `offset / 8` lie inside the storage (a view is checked against its
    // storage when made); checked here too, for the `slots` used, rather than assumed.
    let first = offset / 8;
    if usize::try_from(len).is_ok_and(|len| len >= slots) && first + slots <= storage.len() / 8 {
        Some((storage, first..first + slots))
    } else {
        None
    }
}

/// Runs a match's steps: `None`, with nothing stored, when the general function must run
/// instead (to report what it finds wrong); else the outcome, the first mismatch reported as
/// the general function reports it.
#[inline]
fn run_checks(site: &Site, args: &[Value]) -> Option<Result<()>> {
    let dims: &[i64] = match args.first() {
        Some(Value::Tensor(t)) => t.shape(),
        Some(Value::Shape(s)) => s,
        _ => return None,
    };
    if dims.len() != site.steps.len() {
        return None;
    }
    // A word heap (frozen, it refuses the stores: the general function says so).
    if let Some((storage, range)) = word_slots(args.get(1), site.slots) {
        let checked = match site.stores {
            true => check_all(dims, &site.steps, (0, 1), &mut storage.words_for_write().ok()??.get(range)?),
            false => check_all(dims, &site.steps, (0, 1), &mut storage.words()?.get(range)?),
        };
        return Some(checked.map_err(|m| m.error(site, dims)));
    }
    let heap = Heap::arg(site.name, args, 1).ok()?;
    if site.slots > heap.reach {
        return None;
    }
    let at = (heap.base, heap.step);
    let checked = match heap.tensor {
        // No step names a slot (`slots` is 0, as a null heap's `reach` is).
        None => check_all(dims, &site.steps, at, &mut (&[] as &[u8])),
        // A view of word storage whose slots are not the fast path's (a strided one).
        Some(t) if heap.words.is_some() => match site.stores {
            true => check_all(dims, &site.steps, word_geometry(&heap), &mut t.storage().words_for_write().ok()??),
            false => check_all(dims, &site.steps, word_geometry(&heap), &mut heap.words?),
        },
        Some(t) if site.stores => t.storage().write_with(|mut b| check_all(dims, &site.steps, at, &mut b)).ok()?,
        Some(t) => t.storage().read_with(|mut b| check_all(dims, &site.steps, at, &mut b)),
    };
    Some(checked.map_err(|m| m.error(site, dims)))
}

/// The first step that failed: its dimension, and the value it was compared with (the
/// immediate, or the slot's value).
struct Mismatch {
    dim: usize,
    expected: i64,
}

impl Mismatch {
    /// The error the general function reports for it.
    #[cold]
    fn error(&self, site: &Site, dims: &[i64]) -> Error {
        let (actual, what, err_ctx) = (dims[self.dim], Subject::Dim(self.dim), site.err_ctx.as_deref());
        match site.steps[self.dim] {
            Check::EqualSlot(s) => heap_mismatch(site.name, err_ctx, what, actual, self.expected, s as i64),
            _ => constant_mismatch(site.name, err_ctx, what, actual, self.expected),
        }
    }
}

/// Applies the steps to `dims` in order, with the heap's bytes or words (slot `s` at `base + s *
/// step` in them), up to the first mismatch.
#[inline(always)]
fn check_all(
    dims: &[i64],
    steps: &[Check],
    (base, step): (usize, usize),
    bytes: &mut impl HeapBytes,
) -> Result<(), Mismatch> {
    let at = |s: usize| base + s * step;
    for (dim, (&actual, step)) in dims.iter().zip(steps).enumerate() {
        match *step {
            Check::Equal(v) if actual != v => return Err(Mismatch { dim, expected: v }),
            Check::Store(s) => bytes.store(at(s), actual),
            Check::EqualSlot(s) => {
                let expected = bytes.load(at(s));
                if expected != actual {
                    return Err(Mismatch { dim, expected });
                }
            }
            Check::Equal(_) | Check::Skip => {}
        }
    }
    Ok(())
}

/// A heap's bytes as held for a call, read by slot offset (offsets of slots below the heap's
/// `reach`, so inside the bytes).
trait HeapBytes {
    /// The slot at byte offset `at`.
    fn load(&self, at: usize) -> i64;
    /// Stores `v` in the slot at `at` (a match with a store holds the bytes for writing, so
    /// read-only bytes are never asked).
    fn store(&mut self, at: usize, v: i64);
}

impl HeapBytes for &[u8] {
    #[inline(always)]
    fn load(&self, at: usize) -> i64 {
        i64::from_ne_bytes(self[at..at + 8].try_into().expect("a slot is 8 bytes"))
    }

    fn store(&mut self, _: usize, _: i64) {
        unreachable!("a match with a store holds the heap for writing")
    }
}

/// A word heap's words lent to read, where `at` is a word index (the fast path's slots are words
/// `0, 1, ...`; [`Heap`]'s byte offsets are divided by 8 by the caller's geometry: see
/// [`word_geometry`]).
impl HeapBytes for Words<'_> {
    #[inline(always)]
    fn load(&self, at: usize) -> i64 {
        Words::load(self, at)
    }

    fn store(&mut self, _: usize, _: i64) {
        unreachable!("a match with a store takes the words to write")
    }
}

/// A word heap's words lent to write, indexed as [`Words`] are.
impl HeapBytes for &[AtomicI64] {
    #[inline(always)]
    fn load(&self, at: usize) -> i64 {
        self[at].load(Ordering::Relaxed)
    }

    #[inline(always)]
    fn store(&mut self, at: usize, v: i64) {
        self[at].store(v, Ordering::Relaxed);
    }
}

/// A word heap's slot geometry in words: [`Heap::arg`] gives it in bytes, a multiple of 8 for a
/// word heap (`words` is set only then).
fn word_geometry(heap: &Heap<'_>) -> (usize, usize) {
    (heap.base / 8, heap.step / 8)
}

impl HeapBytes for &mut [u8] {
    #[inline(always)]
    fn load(&self, at: usize) -> i64 {
        (&**self).load(at)
    }

    #[inline(always)]
    fn store(&mut self, at: usize, v: i64) {
        self[at..at + 8].copy_from_slice(&v.to_ne_bytes());
    }
}

/// `make_shape` for a call whose `ndim` and pairs are fixed. A shape of immediates only is made
/// here, once. A shape with heap slots is most often the same as the one the call site made
/// last (a model called again with inputs of the same shape), so the site keeps that one in its
/// cache ([`relaxvm::CallCtx::site_cache`]).
pub(super) fn specialize_make_shape(name: &'static str, fixed: &[Option<&Value>]) -> Option<PackedFunc> {
    let pairs = make_pairs(name, &args::fixed_from(fixed, 1)?).ok()?;
    if pairs.iter().all(|&(code, _)| code == 0) {
        let shape = Value::Shape(pairs.iter().map(|&(_, v)| v).collect());
        let f = PackedFunc::from_fn(name, move |args| {
            Heap::arg(name, args, 0)?;
            Ok(shape.clone())
        });
        return Some(f.reading_first(1));
    }
    let steps: Option<Box<[Make]>> = pairs
        .iter()
        .map(|&(code, v)| match code {
            0 => Some(Make::Imm(v)),
            1 => usize::try_from(v).ok().map(Make::Slot),
            _ => None,
        })
        .collect();
    let steps = steps.filter(|s| s.len() <= INLINE_RANK);
    let slots = steps.as_ref().map_or(0, |s| {
        reach(s, |m| match m {
            Make::Slot(s) => Some(*s),
            Make::Imm(_) => None,
        })
    });
    // It reads the heap; the rest are the fixed operands parsed here.
    let f = PackedFunc::new(name, move |ctx, args| {
        let last = ctx.site_cache();
        match steps.as_deref().and_then(|steps| Some((make_dims(name, args, steps, slots)?, steps.len()))) {
            Some((dims, n)) => Ok(recent_or_last(&dims[..n], last)),
            None => build_shape(name, args, &pairs, last),
        }
    });
    Some(f.reading_first(1))
}

/// The dimensions a make's steps give (at most [`INLINE_RANK`] of them), or `None` when the
/// heap is not one that reaches their slots (the general function reports it).
#[inline]
fn make_dims(name: &'static str, args: &[Value], steps: &[Make], slots: usize) -> Option<[i64; INLINE_RANK]> {
    if let Some((storage, range)) = word_slots(args.first(), slots) {
        return Some(make_all(steps, (0, 1), &storage.words()?.get(range)?));
    }
    let heap = Heap::arg(name, args, 0).ok()?;
    let t = heap.tensor?;
    if slots > heap.reach {
        return None;
    }
    Some(match heap.words {
        Some(words) => make_all(steps, word_geometry(&heap), &words),
        None => t.storage().read_with(|b| make_all(steps, (heap.base, heap.step), &b)),
    })
}

/// The dimensions `steps` make, with the heap's bytes or words (at most [`INLINE_RANK`]; the
/// rest are 0).
#[inline(always)]
fn make_all(steps: &[Make], (base, step): (usize, usize), bytes: &impl HeapBytes) -> [i64; INLINE_RANK] {
    let mut dims = [0i64; INLINE_RANK];
    for (d, make) in dims.iter_mut().zip(steps) {
        *d = match *make {
            Make::Imm(v) => v,
            Make::Slot(s) => bytes.load(base + s * step),
        };
    }
    dims
}

/// A shape of `dims`: the one `last` (the call site's cache) holds when it has these
/// dimensions, else a new one ([`Shape::interned`]), which `last` then keeps.
#[inline]
pub(super) fn recent_or_last(dims: &[i64], last: Option<&mut Value>) -> Value {
    match last {
        Some(Value::Shape(s)) if s.has_dims(dims) => Value::Shape(s.clone()),
        Some(last) => {
            let made = Value::Shape(Shape::interned(dims));
            *last = made.clone();
            made
        }
        None => Value::Shape(Shape::interned(dims)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use relaxvm::{DataType, Tensor};

    // That the steps compute what the general functions do is tested against them, for every
    // kind of heap, in `shape_heap::tests`; these show that the steps serve the calls that
    // succeed, and only those.

    #[test]
    fn steps_serve_every_match_they_can_report() {
        // On a heap of ordinary storage (taken under its lock) and on a word heap (the fast path).
        let plain = Tensor::zeros([3], DataType::I64, Default::default()).unwrap();
        let words = relaxvm::Storage::alloc_words(3, Default::default()).unwrap();
        let words = Tensor::from_parts(words, 0, [3].into(), None, DataType::I64).unwrap();
        for heap in [Value::Tensor(plain), Value::Tensor(words)] {
            let value = Value::Shape([5, 7].into());
            let args = [value.clone(), heap.clone()];
            let run = |pairs: &[(i64, i64)], slots: usize| {
                let steps = checks(pairs).unwrap().into_iter().collect();
                let stores = pairs.iter().any(|p| p.0 == 1);
                run_checks(&Site { name: "m", steps, slots, stores, err_ctx: Some("c".into()) }, &args)
            };
            // Stores 5 in slot 2, then finds 7 is not slot 2: reported here, as the general
            // function words it.
            let e = run(&[(1, 2), (3, 2)], 3).unwrap().unwrap_err().to_string();
            assert!(
                e.contains("c match_cast error,  shape[1] mismatch to a previous populated value. (7 vs. 5"),
                "{e}"
            );
            assert!(run(&[(1, 2), (1, 0)], 3).unwrap().is_ok());
            assert_eq!(heap.as_tensor().unwrap().to_vec::<i64>().unwrap(), [7, 0, 5]);
            let e = run(&[(3, 2), (0, 8)], 3).unwrap().unwrap_err().to_string();
            assert!(e.contains("shape[1] mismatch to specified constant. (7 vs. 8)"), "{e}");
            // A heap too short for the slots, or a value of another rank: the general function.
            assert!(run(&[(3, 2), (0, 7)], 4).is_none());
            let steps = checks(&[(2, 0)]).unwrap().into_iter().collect();
            let site = Site { name: "m", steps, slots: 0, stores: false, err_ctx: None };
            assert!(run_checks(&site, &[Value::Shape([5, 1].into()), heap.clone()]).is_none());
            assert!(checks(&[(1, -1)]).is_none() && checks(&[(4, 0)]).is_none());

            let steps = [Make::Slot(2), Make::Imm(3), Make::Slot(0)];
            let made = make_dims("m", std::slice::from_ref(&heap), &steps, 3).unwrap();
            assert_eq!(made[..3], [5, 3, 7]);
            assert!(make_dims("m", &[heap], &[Make::Slot(2)], 4).is_none());
            assert!(make_dims("m", &[Value::Null], &[Make::Imm(2)], 0).is_none());
        }
        // The fast path takes contiguous int64 views of word storage only, reaching the slots.
        let words = relaxvm::Storage::alloc_words(4, Default::default()).unwrap();
        let view = |offset, len, strides, dtype| {
            Value::Tensor(Tensor::from_parts(words.clone(), offset, [len].into(), strides, dtype).unwrap())
        };
        let range = |v: &Value, slots| word_slots(Some(v), slots).map(|(_, r)| r);
        assert_eq!(range(&view(8, 3, None, DataType::I64), 3), Some(1..4));
        assert!(range(&view(8, 3, None, DataType::I64), 4).is_none());
        assert!(range(&view(4, 3, None, DataType::I64), 1).is_none());
        assert!(range(&view(0, 2, Some(vec![2]), DataType::I64), 1).is_none());
        assert!(range(&view(0, 4, None, DataType::F64), 1).is_none());
        assert!(word_slots(Some(&Value::Null), 0).is_none() && word_slots(None, 0).is_none());
        let plain = Tensor::zeros([3], DataType::I64, Default::default()).unwrap();
        assert!(range(&Value::Tensor(plain), 1).is_none());
        // Frozen: a site that stores leaves the call to the general function (which reports
        // it), one that only reads still runs its steps on the words.
        words.freeze();
        let site = |code, stores| {
            let steps = checks(&[(code, 0)]).unwrap().into_iter().collect();
            Site { name: "m", steps, slots: 1, stores, err_ctx: None }
        };
        let args = [Value::Shape([0].into()), view(0, 4, None, DataType::I64)];
        assert!(run_checks(&site(1, true), &args).is_none(), "frozen: no stores");
        assert!(run_checks(&site(3, false), &args).unwrap().is_ok());
    }
}
