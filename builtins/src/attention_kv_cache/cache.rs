//! The legacy attention KV cache object (TVM's `relax.vm.AttentionKVCacheLegacy`): a growable
//! tensor whose leading axis holds one entry per token, a fill count, and, for windowed
//! attention, the position the next entry overwrites.
//!
//! Every operation checks its whole plan — sizes, dtypes, the rows it writes — before it
//! changes anything, so a refused call leaves the cache as it was (TVM checks some conditions
//! only after growing the storage or copying a first part). The storage is allocated zeroed:
//! rows that were never written read as zeros (TVM's read as whatever its allocator held).

use relaxvm::{Error, NamedObject, Result, Shape, Tensor};
use std::any::Any;
use std::fmt;
use std::sync::{Mutex, MutexGuard};

/// The legacy KV cache: one tensor reserved ahead, filled from row 0.
pub struct LegacyKvCache {
    state: Mutex<State>,
}

/// What a cache holds; `fill_count <= rows(data)` and `window_pos <= rows(data)` always.
struct State {
    /// The reserved rows (`data.shape[0]`), contiguous, of the cache's dtype.
    data: Tensor,
    /// How many rows hold entries.
    fill_count: i64,
    /// The row the next windowed write starts at (`window_override*` only).
    window_pos: i64,
}

/// One copy of rows: `rows` rows from row `src` of the value to row `dst` of the cache.
struct RowCopy {
    src: i64,
    dst: i64,
    rows: i64,
}

/// A value error saying what was expected and found, with the operation's name.
fn err(op: &str, msg: impl fmt::Display) -> Error {
    Error::value(format!("attention_kv_cache {op}: {msg}"))
}

impl LegacyKvCache {
    /// TVM's `AttentionKVCacheLegacy::Create`: reserves `reserve` (its first dimension the rows,
    /// at least 1: the cache grows by doubling), appends `init`, then, when `init_fill_count` is
    /// not negative, sets the fill count and the window position to it (at most the rows
    /// reserved).
    pub fn create(init: &Tensor, reserve: &Shape, init_fill_count: i64) -> Result<LegacyKvCache> {
        if reserve.is_empty() {
            return Err(err("create", "the reserved shape needs at least one dimension (the token axis), found ()"));
        }
        if reserve[0] < 1 {
            return Err(err(
                "create",
                format!(
                    "the reserved shape's first dimension must be at least 1 (the cache doubles it to grow), found {}",
                    reserve[0]
                ),
            ));
        }
        let data = Tensor::zeros(reserve.clone(), init.dtype(), init.device())?;
        let cache = LegacyKvCache { state: Mutex::new(State { data, fill_count: 0, window_pos: 0 }) };
        cache.append(init)?;
        if init_fill_count >= 0 {
            let mut s = cache.lock();
            let rows = s.rows();
            if init_fill_count > rows {
                return Err(err(
                    "create",
                    format!("init_fill_count must be at most the {rows} rows reserved, found {init_fill_count}"),
                ));
            }
            s.fill_count = init_fill_count;
            s.window_pos = init_fill_count;
        }
        Ok(cache)
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        // No code panics while holding the lock; a poisoned lock still holds a consistent state.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// How many rows hold entries.
    pub fn fill_count(&self) -> i64 {
        self.lock().fill_count
    }

    /// The shape of the cache's entries so far: `(fill_count, rest of the reserved shape)`.
    pub fn filled_shape(&self) -> Shape {
        let s = self.lock();
        let mut dims = s.data.shape().to_vec();
        dims[0] = s.fill_count;
        Shape::from(dims)
    }

    /// `Append`: writes `value`'s rows after the filled ones, doubling the reserved rows until
    /// they fit.
    pub fn append(&self, value: &Tensor) -> Result<()> {
        let mut s = self.lock();
        let n = s.check_value("append", value)?;
        let needed = rows_after("append", s.fill_count, n)?;
        let rows = grown_rows(s.rows(), needed);
        let copy = RowCopy { src: 0, dst: s.fill_count, rows: n };
        s.apply("append", value, rows, &[copy])?;
        s.fill_count = needed;
        Ok(())
    }

    /// `Update`: overwrites the filled rows with `value`, which must have exactly that many.
    pub fn update(&self, value: &Tensor) -> Result<()> {
        let mut s = self.lock();
        let n = s.check_value("update", value)?;
        if n != s.fill_count {
            return Err(err("update", format!("the value must have the {} rows filled, found {n}", s.fill_count)));
        }
        let rows = s.rows();
        s.apply("update", value, rows, &[RowCopy { src: 0, dst: 0, rows: n }])
    }

    /// `WindowOverride`: appends `value` into a window of `max_cache_size` rows whose first
    /// `sinks` rows are kept; past the window's end, writing wraps to row `sinks`.
    pub fn window_override(&self, value: &Tensor, max_cache_size: i64, sinks: i64) -> Result<()> {
        let op = "window_override";
        let mut s = self.lock();
        let n = s.check_value(op, value)?;
        if sinks < 0 || sinks > max_cache_size {
            return Err(err(op, format!("num_attention_sinks must be in 0..={max_cache_size}, found {sinks}")));
        }
        if n > max_cache_size - sinks {
            return Err(err(
                op,
                format!(
                    "the value may have at most max_cache_size - num_attention_sinks = {} rows, found {n}",
                    max_cache_size - sinks
                ),
            ));
        }
        if s.window_pos > max_cache_size {
            return Err(err(
                op,
                format!("the window position {} is past max_cache_size {max_cache_size}", s.window_pos),
            ));
        }
        let filled = rows_after(op, s.fill_count, n)?;
        let rows = if filled <= max_cache_size { grown_rows(s.rows(), filled) } else { s.rows() };
        let first = n.min(max_cache_size - s.window_pos);
        let fill_count = filled.min(max_cache_size);
        let mut window_pos = rows_after(op, s.window_pos, n)?.min(max_cache_size);
        let mut copies = vec![RowCopy { src: 0, dst: s.window_pos, rows: first }];
        if first < n {
            // TVM's checks before it wraps: the window is full and the position at its end.
            if fill_count != max_cache_size || fill_count != window_pos {
                return Err(err(
                    op,
                    format!(
                        "wrapping around needs a full window at its end: fill count {fill_count} and position {window_pos} must both be max_cache_size {max_cache_size}"
                    ),
                ));
            }
            copies.push(RowCopy { src: first, dst: sinks, rows: n - first });
            window_pos = n - first + sinks;
        }
        s.apply(op, value, rows, &copies)?;
        s.fill_count = fill_count;
        s.window_pos = window_pos;
        Ok(())
    }

    /// `View`: the filled rows, sharing the cache's memory (a later write that grows the cache
    /// moves it to new memory; the view keeps the old). `shape` must be the filled shape.
    pub fn view(&self, shape: Option<&Shape>) -> Result<Tensor> {
        let s = self.lock();
        let filled = {
            let mut dims = s.data.shape().to_vec();
            dims[0] = s.fill_count;
            Shape::from(dims)
        };
        if let Some(shape) = shape {
            if shape.len() != filled.len() {
                return Err(err(
                    "view",
                    format!("expected a shape of {} dimensions {filled}, found {shape}", filled.len()),
                ));
            }
            if shape[0] != s.fill_count {
                return Err(err(
                    "view",
                    format!("the requested shape {shape} must start with the filled count {}", s.fill_count),
                ));
            }
            if let Some(i) = (1..shape.len()).find(|&i| shape[i] != filled[i]) {
                return Err(err(
                    "view",
                    format!(
                        "dimension {i} of the requested shape {shape} must be {} (the cache's {filled})",
                        filled[i]
                    ),
                ));
            }
        }
        Tensor::from_parts(s.data.storage().clone(), 0, filled, None, s.data.dtype())
    }

    /// `PopN`'s check: removing `n` entries must leave a count of zero or more.
    pub fn check_popn(&self, n: i64) -> Result<()> {
        let fill = self.fill_count();
        if n < 0 || n > fill {
            return Err(err("array_popn", format!("can remove 0 to {fill} entries (the fill count), asked {n}")));
        }
        Ok(())
    }

    /// `PopN`: forgets the last `n` entries (checked with [`check_popn`](Self::check_popn)).
    pub fn popn(&self, n: i64) -> Result<()> {
        self.check_popn(n)?;
        self.lock().fill_count -= n;
        Ok(())
    }

    /// `Clear`: no entries, the window back at row 0.
    pub fn clear(&self) {
        let mut s = self.lock();
        s.fill_count = 0;
        s.window_pos = 0;
    }
}

/// The reserved rows after growing by doubling until `needed` fit (TVM's loop).
/// `filled + n` rows: a count of rows past `i64` (zero-width rows make any count cheap) is refused.
pub(super) fn rows_after(op: &str, filled: i64, n: i64) -> Result<i64> {
    filled.checked_add(n).ok_or_else(|| err(op, format!("{filled} rows and {n} more do not fit in a 64-bit row count")))
}

fn grown_rows(mut rows: i64, needed: i64) -> i64 {
    while rows < needed {
        rows = rows.saturating_mul(2);
    }
    rows
}

impl State {
    fn rows(&self) -> i64 {
        self.data.shape()[0]
    }

    /// Checks `value` against the cache (dtype, rank, every dimension after the first) and
    /// returns its row count.
    fn check_value(&self, op: &str, value: &Tensor) -> Result<i64> {
        let (want, got) = (self.data.dtype(), value.dtype());
        if want != got {
            return Err(err(op, format!("expected a value of dtype {want} (the cache's), found {got}")));
        }
        let cache_dims = self.data.shape();
        let dims = value.shape();
        let same_tail = dims.len() == cache_dims.len() && dims[1..] == cache_dims[1..];
        if !same_tail {
            let mut expected: Vec<String> = cache_dims.iter().map(i64::to_string).collect();
            expected[0] = "n".into();
            return Err(err(op, format!("expected a value of shape ({}), found {dims}", expected.join(", "))));
        }
        Ok(dims[0])
    }

    /// Grows the storage to `rows` rows when needed (keeping the filled rows), then copies
    /// `value`'s rows as `copies` say; checks every copy against the rows first.
    fn apply(&mut self, op: &str, value: &Tensor, rows: i64, copies: &[RowCopy]) -> Result<()> {
        for c in copies {
            let end = c.dst.checked_add(c.rows);
            if c.rows < 0 || c.dst < 0 || end.is_none_or(|end| end > rows) {
                return Err(err(
                    op,
                    format!("writing {} rows at row {} does not fit the {rows} rows reserved", c.rows, c.dst),
                ));
            }
        }
        let row_bytes = self.data.shape()[1..].iter().product::<i64>() as usize * self.data.dtype().itemsize();
        if rows != self.rows() {
            let mut dims = self.data.shape().to_vec();
            dims[0] = rows;
            let grown = Tensor::zeros(Shape::from(dims), self.data.dtype(), self.data.device())?;
            let old = self.data.contiguous_bytes()?;
            grown.storage().write(0, &old)?;
            self.data = grown;
        }
        if copies.iter().all(|c| c.rows == 0) {
            return Ok(());
        }
        let bytes = value.contiguous_bytes()?;
        for c in copies {
            let (src, len) = (c.src as usize * row_bytes, c.rows as usize * row_bytes);
            self.data.storage().write(c.dst as usize * row_bytes, &bytes[src..src + len])?;
        }
        Ok(())
    }
}

impl LegacyKvCache {
    /// Its state in one line: `dtype=int32, reserved=(4, 2), fill_count=3, window_pos=0`.
    fn summary(&self) -> String {
        let s = self.lock();
        format!(
            "dtype={}, reserved={}, fill_count={}, window_pos={}",
            s.data.dtype(),
            s.data.shape(),
            s.fill_count,
            s.window_pos
        )
    }
}

impl NamedObject for LegacyKvCache {
    fn type_key(&self) -> &str {
        "relax.vm.AttentionKVCacheLegacy"
    }
    fn describe(&self) -> String {
        self.summary()
    }
    fn as_any(&self) -> &dyn Any {
        self
    }
}

impl fmt::Display for LegacyKvCache {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "AttentionKVCacheLegacy({})", self.summary())
    }
}

impl fmt::Debug for LegacyKvCache {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}
