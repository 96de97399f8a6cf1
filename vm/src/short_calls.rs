//! Which calls ran short: a record per function of how long its last call took, for calls the
//! static analysis ([`crate::long_calls`]) cannot bound — a model whose input shapes are
//! symbolic calls kernels whose cost depends on them. A caller that holds a lock others wait
//! for (Python's GIL) keeps it for a call whose last call with the same argument shapes ran
//! short, where releasing and retaking it would cost a noticeable part of the call.

use crate::Value;
use std::hash::{Hash, Hasher};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// A call that ran for less than this keeps the lock the next time it is made with arguments
/// of the same shapes and values: releasing and retaking Python's GIL costs a few hundred
/// nanoseconds, about 1% of this, so keeping it for longer calls saves little, while other
/// Python threads (CPython hands the GIL over every 5 ms) barely notice a hold this short.
pub const SHORT_CALL: Duration = Duration::from_micros(20);

/// What the last call of a function took. One entry per function (the last arguments' key):
/// a model called again and again with the same shapes, as inference loops do, keeps the lock
/// from its second call on; a call with other shapes, or after a long one, releases it. A kept
/// call may still turn out long (same shapes, but data that makes it loop longer): the caller
/// bounds that one through the VM's poll hook (Python hands the GIL to other threads there),
/// and it is recorded long (by its poll or by the clock), so the next call releases.
#[derive(Debug, Default)]
pub struct ShortRecord {
    /// The last call's key with bit 0 set when it ran short (keys have bit 0 clear); 0 before
    /// the first call.
    last: AtomicU64,
}

impl ShortRecord {
    /// Whether the last call was made with arguments of `key` and ran short.
    #[inline]
    pub fn ran_short(&self, key: u64) -> bool {
        self.last.load(Ordering::Relaxed) == key | 1
    }

    /// Notes that a call with arguments of `key` took `elapsed`.
    #[inline]
    pub fn note(&self, key: u64, elapsed: Duration) {
        self.last.store(key | u64::from(elapsed < SHORT_CALL), Ordering::Relaxed);
    }

    /// Runs `call` (given whether it may keep the lock) and records how long it took, when
    /// `args` have a key (see [`args_key`]); a call without a key is told to release it.
    /// Every call is timed (two clock reads), kept calls too: a call that keeps the lock may
    /// turn out long with the same key (its cost depends on data or state its arguments do not
    /// show) without its caller noticing, and must then make the next call release it.
    #[inline]
    pub fn run<R>(&self, args: &[Value], call: impl FnOnce(bool) -> R) -> R {
        self.run_reporting(args, |keep| (call(keep), false))
    }

    /// As [`run`](Self::run), for a `call` that also tells whether it ran long (returns its
    /// result and that: a VM's call reached its poll hook, which runs every
    /// [`crate::POLL_INTERVAL`] steps and while a parallel kernel waits for its workers). A
    /// call that says so is recorded long whatever the clock says; one that does not is
    /// recorded as the clock says (a kept call whose builtins or kernels turn slow, with fewer
    /// steps than the poll interval, never reaches the hook).
    #[inline]
    pub fn run_reporting<R>(&self, args: &[Value], call: impl FnOnce(bool) -> (R, bool)) -> R {
        self.run_clocked(args, Instant::now, call)
    }

    /// [`run_reporting`](Self::run_reporting) reading the time from `now` (tests give it a
    /// clock of their own, so that what they assert does not depend on the machine's load).
    #[inline]
    fn run_clocked<R>(
        &self,
        args: &[Value],
        mut now: impl FnMut() -> Instant,
        call: impl FnOnce(bool) -> (R, bool),
    ) -> R {
        let Some(key) = args_key(args) else { return call(false).0 };
        let keep = self.ran_short(key);
        let start = now();
        let (out, long) = call(keep);
        let elapsed = now().saturating_duration_since(start);
        self.note(key, if long { elapsed.max(SHORT_CALL) } else { elapsed });
        out
    }
}

/// A key for the shapes and values of `args` that decide how long a call of a function with
/// them runs: each tensor's dtype, device and dimensions (not its data), each shape, each
/// scalar, each object's and function's identity. `None` for arguments of other kinds (strings,
/// tuples...), whose calls then release the lock. Bit 0 is clear (see [`ShortRecord`]).
pub fn args_key(args: &[Value]) -> Option<u64> {
    let mut h = KeyHasher(args.len() as u64);
    for a in args {
        match a {
            Value::Tensor(t) => {
                h.add(1);
                t.dtype().hash(&mut h);
                t.device().hash(&mut h);
                h.dims(t.shape().dims());
            }
            Value::Shape(s) => {
                h.add(2);
                h.dims(s.dims());
            }
            Value::Int(i) => h.add(3 ^ ((*i as u64) << 3)),
            Value::Float(f) => h.add(4 ^ f.to_bits().rotate_left(3)),
            Value::Bool(b) => h.add(5 ^ (u64::from(*b) << 3)),
            Value::Null => h.add(6),
            Value::DType(d) => {
                h.add(7);
                d.hash(&mut h);
            }
            Value::Device(d) => {
                h.add(8);
                d.hash(&mut h);
            }
            // An object (a KV cache...) or a function by identity: its cost may depend on its
            // state (a cache's length), which the timing of every call catches. An address
            // reused after a free costs at most one kept call that should have released.
            Value::Object(o) => h.add(9 ^ ((Arc::as_ptr(o) as usize as u64) << 4)),
            Value::Func(c) => h.add(10 ^ ((Arc::as_ptr(c) as usize as u64) << 4)),
            _ => return None,
        }
    }
    Some(h.0 & !1)
}

/// A multiply-rotate hash (as rustc's FxHasher) over a call's shapes: a few instructions per
/// dimension. A collision costs at most one call with the lock held that should have released
/// it (bounded as any kept call that runs long).
struct KeyHasher(u64);

impl KeyHasher {
    #[inline]
    fn add(&mut self, x: u64) {
        self.0 = (self.0.rotate_left(5) ^ x).wrapping_mul(0x51_7c_c1_b7_27_22_0a_95);
    }

    #[inline]
    fn dims(&mut self, dims: &[i64]) {
        self.add(dims.len() as u64);
        for d in dims {
            self.add(*d as u64);
        }
    }
}

impl Hasher for KeyHasher {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        for b in bytes {
            self.add(u64::from(*b));
        }
    }

    fn write_u8(&mut self, i: u8) {
        self.add(u64::from(i));
    }

    fn write_i32(&mut self, i: i32) {
        self.add(i as u32 as u64);
    }

    fn write_u64(&mut self, i: u64) {
        self.add(i);
    }

    fn write_usize(&mut self, i: usize) {
        self.add(i as u64);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{DataType, Tensor};

    fn tensor(dims: &[i64]) -> Value {
        Value::Tensor(Tensor::zeros(dims, DataType::F32, Default::default()).unwrap())
    }

    #[test]
    fn keys_tell_shapes_and_scalars_apart_and_refuse_other_kinds() {
        let a = args_key(&[tensor(&[1, 32])]).unwrap();
        assert_eq!(a & 1, 0);
        assert_eq!(Some(a), args_key(&[tensor(&[1, 32])]), "same shape, other tensor: same key");
        assert_ne!(Some(a), args_key(&[tensor(&[2, 32])]));
        assert_ne!(Some(a), args_key(&[tensor(&[32, 1])]));
        assert_ne!(Some(a), args_key(&[tensor(&[1, 32]), Value::Null]));
        assert_ne!(args_key(&[Value::Int(3)]), args_key(&[Value::Int(4)]));
        assert_ne!(args_key(&[Value::Int(3)]), args_key(&[Value::Float(3.0)]));
        assert_eq!(args_key(&[Value::Str("x".into())]), None);
        // Objects (a KV cache) and functions by identity.
        let obj = Value::Object(Arc::new(Box::new(5u8)));
        let other = Value::Object(Arc::new(Box::new(5u8)));
        let key = args_key(&[obj.clone(), Value::Int(1)]).unwrap();
        assert_eq!(Some(key), args_key(&[obj.clone(), Value::Int(1)]), "the same object");
        assert_ne!(Some(key), args_key(&[other, Value::Int(1)]), "another object");
        assert_ne!(Some(key), args_key(&[obj, Value::Int(2)]));
        let closure = || {
            let callable = crate::Callable::Bytecode { index: 0, name: "f".into(), program: None };
            Arc::new(crate::Closure { callable, captured: vec![] })
        };
        let (c, other) = (closure(), closure());
        let key = args_key(&[Value::Func(Arc::clone(&c))]);
        assert!(key.is_some());
        assert_eq!(key, args_key(&[Value::Func(Arc::clone(&c))]), "the same function");
        assert_ne!(key, args_key(&[Value::Func(other)]), "another function");
    }

    #[test]
    fn only_a_short_last_call_with_the_same_key_keeps_the_lock() {
        let r = ShortRecord::default();
        let (k, other) = (args_key(&[Value::Int(1)]).unwrap(), args_key(&[Value::Int(2)]).unwrap());
        assert!(!r.ran_short(k), "no call yet");
        r.note(k, Duration::from_micros(1));
        assert!(r.ran_short(k));
        assert!(!r.ran_short(other));
        r.note(k, SHORT_CALL);
        assert!(!r.ran_short(k), "a call as long as the bound is long");
        r.note(other, Duration::ZERO);
        assert!(r.ran_short(other) && !r.ran_short(k));
    }

    /// A clock that advances by the given steps, one per read, from a fixed start.
    fn clock(steps: &[Duration]) -> impl FnMut() -> Instant + '_ {
        let start = Instant::now();
        let mut at = start;
        let mut steps = steps.iter();
        move || {
            at += *steps.next().expect("read more often than the test planned");
            at
        }
    }

    #[test]
    fn a_call_keeps_the_lock_only_after_a_short_one_with_the_same_key() {
        let r = ShortRecord::default();
        let args = [Value::Int(7)];
        let (short, long, zero) = (SHORT_CALL - Duration::from_nanos(1), SHORT_CALL, Duration::ZERO);
        let mut seen = vec![];
        // Each call reads the clock twice: its start (any step) and its end (its length).
        let mut call = |args: &[Value], length: Duration, reported_long: bool| {
            let steps = [zero, length];
            r.run_clocked(args, clock(&steps), |keep| {
                seen.push(keep);
                ((), reported_long)
            });
        };
        call(&args, short, false); // no record yet: releases
        call(&args, short, false); // the last one ran short: keeps
        call(&[Value::Int(8)], short, false); // other key: releases
        call(&args, short, false); // the last call had another key: releases
        call(&args, long, false); // keeps, and turns out long without saying so
        call(&args, short, false); // so this one releases
        call(&args, zero, true); // keeps; says it ran long (its poll hook ran)
        call(&args, short, false); // releases
        call(&args, short, false); // keeps
        assert_eq!(seen, [false, true, false, false, true, false, true, false, true]);
    }

    #[test]
    fn a_call_that_sleeps_past_the_bound_makes_the_next_release() {
        // The real clock, in the one direction load cannot flake: a call that sleeps for the
        // bound took at least that long.
        let r = ShortRecord::default();
        let args = [Value::Int(7)];
        r.note(args_key(&args).unwrap(), Duration::ZERO);
        assert!(r.run(&args, |keep| {
            std::thread::sleep(SHORT_CALL);
            keep
        }));
        assert!(!r.run(&args, |keep| keep));
        // Arguments without a key always release, and are never recorded.
        let no_key = [Value::Str("s".into())];
        assert!(!r.run(&no_key, |keep| keep));
        assert!(!r.run(&no_key, |keep| keep));
    }
}
