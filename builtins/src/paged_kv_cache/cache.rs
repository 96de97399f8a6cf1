//! The cache object: configuration, kernels, page tensors, scratch tensors, and the page table
//! behind a lock.
//!
//! The lock: one per cache, so calls from several threads are serialised. A call made while
//! the calling thread (or the thread whose pool task it runs) already holds the lock, e.g. from
//! a kernel that calls back into the cache, is refused with an error instead of waiting for
//! itself. Every operation that changes the table works on it in place and puts back a
//! snapshot on failure, so a refused call leaves the cache as it was.

use super::create::{Config, Kernels};
use super::forward::{Limits, Plan};
use super::pool::{PageCopy, Pool};
use relaxvm::pool::{is_me_or_my_launcher, thread_key};
use relaxvm::{CallCtx, Device, Error, NamedObject, Result, Shape, Storage, Tensor, Value};
use std::any::Any;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard};

mod step_arrays;

/// A step begun by `begin_forward`: its plan and the plan's arrays as int32 tensors.
pub(crate) struct Step {
    pub(crate) plan: Plan,
    pub(crate) aux: AuxTensors,
    /// Set by `end_forward`: attention needs a new step, `commit_accepted_token_tree_nodes`
    /// still reads this one.
    pub(crate) ended: bool,
    /// Set when the table changed for one of the step's sequences after it ended: its page
    /// positions are stale, so a commit that moves K/V by them is refused.
    pub(crate) stale: bool,
}

impl State {
    /// Refuses a change to sequence `id`'s pages while a step that will write them is running
    /// (attack finding kvcache/05: a removed sequence's planned appends landed in pages given to
    /// another); see [`State::touched`] for a step that has ended.
    pub(crate) fn guard_step(&self, id: i64, what: &str) -> Result<()> {
        if let Some(step) = &self.step {
            if !step.ended && step.plan.seq_ids.contains(&id) {
                return Err(Error::value(format!(
                    "{what}: sequence {id} is in the running forward step: call vm.builtin.kv_state_end_forward first"
                )));
            }
        }
        Ok(())
    }

    /// Records that sequence `id`'s pages changed: an ended step holding it is stale.
    pub(crate) fn touched(&mut self, id: i64) {
        if let Some(step) = self.step.as_mut() {
            if step.plan.seq_ids.contains(&id) {
                step.stale = true;
            }
        }
    }
}

/// One depth's arrays as tensors.
#[derive(Clone)]
pub(crate) struct DepthTensors {
    pub(crate) qo_indptr: Value,
    pub(crate) page_indptr: Value,
    pub(crate) page_indices: Value,
    pub(crate) page_indices_len: usize,
    pub(crate) length_info: Value,
    pub(crate) k_rope_pos_offset: Value,
    pub(crate) page_indptr_sliding: Value,
    pub(crate) page_indices_sliding: Value,
    pub(crate) length_info_sliding: Value,
    pub(crate) k_rope_pos_offset_sliding: Value,
    /// The token-tree mask of this depth (`None` when its trees are chains).
    pub(crate) tree: Option<(Value, Value)>,
}

/// The step's arrays as the kernels take them.
pub(crate) struct AuxTensors {
    pub(crate) depths: Vec<DepthTensors>,
    pub(crate) cur_append_length_indptr: Value,
    pub(crate) k_ragged_rope_pos_offset: Value,
    pub(crate) q_rope_position_map: Value,
    pub(crate) append_position_map: Value,
    /// The scratch views of the step's size, made once per step instead of once per layer.
    pub(crate) views: ScratchViews,
    /// The storage the arrays are views of, and its layout ([`Packer::layout`]): the next step
    /// writes its arrays into it when its layout is the same (a decode step after a decode
    /// step, mostly), instead of allocating a storage and twenty-odd tensors again.
    storage: Storage,
    layout: std::sync::Arc<[(usize, usize)]>,
    /// The step's tokens, the size of `views`.
    total: i64,
}

/// Views of the scratch storages for a step of `total` tokens.
#[derive(Clone)]
pub(crate) struct ScratchViews {
    /// The split q, k, v: `(total, heads, qk_head_dim)`.
    pub(crate) q: Value,
    pub(crate) k: Value,
    pub(crate) v: Value,
    /// A partial output `(total, num_qo_heads, v_head_dim)` and log-sum-exps `(total, num_qo_heads)`.
    pub(crate) out: Value,
    pub(crate) lse: Value,
    /// The merged log-sum-exps, `(total, num_qo_heads)`.
    pub(crate) merged_lse: Value,
}

/// What the lock guards.
pub(crate) struct State {
    pub(crate) pool: Pool,
    pub(crate) step: Option<Step>,
    /// A checkpoint import begun by `prepare_import` and not finished.
    pub(crate) import: Option<Import>,
    /// The plan of the step before the current one, whose buffers the next `begin_forward`
    /// fills again instead of allocating its twenty-odd arrays (TVM keeps its host arrays too).
    pub(crate) spare_plan: Option<Plan>,
}

/// A checkpoint import begun by `prepare_import`: which layers have been imported.
#[derive(Clone, Debug)]
pub(crate) struct Import {
    pub(crate) imported: Vec<bool>,
}

/// The paged KV cache (`relax.vm.PagedAttentionKVCache`).
pub struct PagedKvCache {
    pub(crate) cfg: Config,
    pub(crate) kernels: Kernels,
    /// One tensor per local layer: `(num_total_pages, 2, num_kv_heads, page_size, qk_head_dim)`.
    pub(crate) pages: Vec<Value>,
    /// Scratch storage of the split q/k/v, of partial outputs and of the log-sum-exps (TVM
    /// keeps these between calls, and so do we: views of them are passed to the kernels).
    pub(crate) scratch: Scratch,
    state: Mutex<State>,
    /// The thread key of the lock's holder (0: none), to refuse re-entry.
    owner: AtomicU64,
}

/// Preallocated scratch buffers sized for a full prefill chunk.
pub(crate) struct Scratch {
    pub(crate) q: Storage,
    pub(crate) k: Storage,
    pub(crate) v: Storage,
    pub(crate) out: Storage,
    pub(crate) lse: Storage,
    pub(crate) merged_lse: Storage,
}

/// The lock held: the state, and the owner mark cleared on drop.
pub(crate) struct Held<'a> {
    guard: MutexGuard<'a, State>,
    owner: &'a AtomicU64,
}

impl std::ops::Deref for Held<'_> {
    type Target = State;
    fn deref(&self) -> &State {
        &self.guard
    }
}

impl std::ops::DerefMut for Held<'_> {
    fn deref_mut(&mut self) -> &mut State {
        &mut self.guard
    }
}

impl Drop for Held<'_> {
    fn drop(&mut self) {
        self.owner.store(0, Ordering::Release);
    }
}

/// Storage for the product of `dims` elements of `dtype`, zeroed. The product is taken in
/// `i128`: each factor is a positive `i64` the create call admitted, so three of them and an
/// item size cannot overflow it, and `alloc_checked` refuses what no allocation can hold.
fn alloc(dims: &[i64], dtype: relaxvm::DataType) -> Result<Storage> {
    let elems = dims.iter().fold(1i128, |n, &d| n.saturating_mul(i128::from(d)));
    Storage::alloc_checked(elems.saturating_mul(dtype.itemsize() as i128), Device::default())
}

/// An int32 tensor holding `v`.
pub(crate) fn int_tensor(v: &[i32]) -> Result<Value> {
    Ok(Value::Tensor(Tensor::from_vec(Shape::from(vec![v.len() as i64]), v.to_vec())?))
}

impl PagedKvCache {
    /// A cache of `cfg` calling `kernels`, its pages and scratch allocated (zeroed).
    pub(crate) fn new(cfg: Config, kernels: Kernels) -> Result<PagedKvCache> {
        let page_shape =
            vec![i64::from(cfg.num_total_pages), 2, cfg.num_kv_heads, i64::from(cfg.page_size), cfg.qk_head_dim];
        let pages = (0..cfg.num_layers)
            .map(|_| Tensor::zeros(Shape::from(page_shape.clone()), cfg.dtype, Device::default()).map(Value::Tensor))
            .collect::<Result<Vec<_>>>()?;
        let n = cfg.prefill_chunk_size;
        let f32t = relaxvm::DataType::F32;
        let scratch = Scratch {
            q: alloc(&[n, cfg.num_qo_heads, cfg.qk_head_dim], cfg.dtype)?,
            k: alloc(&[n, cfg.num_kv_heads, cfg.qk_head_dim], cfg.dtype)?,
            v: alloc(&[n, cfg.num_kv_heads, cfg.v_head_dim], cfg.dtype)?,
            out: alloc(&[n, cfg.num_qo_heads, cfg.v_head_dim], cfg.dtype)?,
            lse: alloc(&[n, cfg.num_qo_heads], f32t)?,
            merged_lse: alloc(&[n, cfg.num_qo_heads], f32t)?,
        };
        let pool = Pool::new(cfg.page_size, cfg.num_total_pages, cfg.support_sliding_window)?;
        Ok(PagedKvCache {
            cfg,
            kernels,
            pages,
            scratch,
            state: Mutex::new(State { pool, step: None, import: None, spare_plan: None }),
            owner: AtomicU64::new(0),
        })
    }

    /// Takes the lock; refuses re-entry from the thread that holds it.
    pub(crate) fn lock(&self, what: &str) -> Result<Held<'_>> {
        if is_me_or_my_launcher(self.owner.load(Ordering::Acquire)) {
            return Err(Error::value(format!(
                "{what}: the paged KV cache is already in use by this call chain (a kernel or callback called back into it)"
            )));
        }
        // A panic while the lock was held cannot leave the table half-changed (`transact`
        // restores it on an error and on a panic alike), so a poisoned lock is taken as is.
        let guard = self.state.lock().unwrap_or_else(|p| p.into_inner());
        self.owner.store(thread_key(), Ordering::Release);
        Ok(Held { guard, owner: &self.owner })
    }

    /// The forward limits of this cache.
    pub(crate) fn limits(&self) -> Limits {
        Limits {
            reserved_num_seqs: self.cfg.reserved_num_seqs,
            prefill_chunk_size: self.cfg.prefill_chunk_size,
            layer_sliding_window: self.cfg.layer_sliding_window,
            inline_rope: self.cfg.rope_mode == super::create::RopeMode::Inline,
        }
    }

    /// Runs the page copies a fork or popn asked for, in every layer.
    pub(crate) fn run_copy(&self, ctx: &mut CallCtx<'_>, copy: Option<PageCopy>) -> Result<()> {
        let Some(c) = copy else { return Ok(()) };
        for page in &self.pages {
            let args = [page.clone(), Value::Int(c.src.into()), Value::Int(c.dst.into()), Value::Int(c.len.into())];
            super::kernel::call_kernel(ctx, &self.kernels.copy_single_page, "copy_single_page", &args)?;
        }
        Ok(())
    }

    /// Changes the table with `f`; on error, or if `f` panics (a broken invariant: reported
    /// as an error), puts the table (and the step) back as they were.
    pub(crate) fn transact<R>(&self, st: &mut State, f: impl FnOnce(&mut State) -> Result<R>) -> Result<R> {
        st.pool.checkpoint();
        let done = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| f(&mut *st)));
        match done {
            Ok(Ok(r)) => {
                st.pool.keep();
                Ok(r)
            }
            Ok(Err(e)) => {
                st.pool.rollback();
                Err(e)
            }
            Err(panic) => {
                st.pool.rollback();
                let what = panic
                    .downcast_ref::<&str>()
                    .map(|s| s.to_string())
                    .or_else(|| panic.downcast_ref::<String>().cloned())
                    .unwrap_or_default();
                Err(Error::value(format!("internal error in the paged KV cache (its table was restored): {what}")))
            }
        }
    }

    /// The one-line state summary (pages in use, sequences and their lengths).
    fn summary(&self) -> String {
        // `try_lock`: describing a cache that is in use (e.g. from a kernel's callback, or
        // another thread mid-call) must neither wait nor deadlock.
        let Ok(st) = self.state.try_lock() else {
            return format!(
                "PagedAttentionKVCache(busy, {} pages of {} tokens)",
                self.cfg.num_total_pages, self.cfg.page_size
            );
        };
        let p = &st.pool;
        let mut seqs = String::new();
        const SHOWN: usize = 16;
        for (i, (id, s)) in p.seqs.iter().enumerate() {
            if i == SHOWN {
                seqs.push_str(&format!(", ... ({} more)", p.seqs.len() - SHOWN));
                break;
            }
            if i > 0 {
                seqs.push_str(", ");
            }
            seqs.push_str(&format!("{id}: {}", s.seq_length));
        }
        format!(
            "PagedAttentionKVCache(pages in use {}/{} of {} tokens, {} layers, sequences {{{}}}{})",
            p.num_total_pages as usize - p.free_pages.len(),
            p.num_total_pages,
            p.page_size,
            self.cfg.num_layers,
            seqs,
            if st.step.is_some() { ", in a forward step" } else { "" }
        )
    }
}

impl NamedObject for PagedKvCache {
    fn type_key(&self) -> &str {
        "relax.vm.PagedAttentionKVCache"
    }
    fn describe(&self) -> String {
        self.summary()
    }
    fn as_any(&self) -> &dyn Any {
        self
    }
}

/// A cache of one layer (two query heads on one KV head of 4 dimensions, 2 pages of 16, one
/// sequence) whose kernels are named bytecode closures a test's VM handle sees by name;
/// `layer_window`: the layer is `mha_sliding` with that window.
#[cfg(test)]
pub(crate) fn test_cache(layer_window: Option<i32>) -> PagedKvCache {
    use super::create::{AttnKind, Config, Kernels, RopeMode};
    fn kernel(name: &str) -> Value {
        let callable = relaxvm::Callable::Bytecode { index: 0, name: name.into(), program: None };
        Value::Func(std::sync::Arc::new(relaxvm::Closure { callable, captured: Vec::new() }))
    }
    let cfg = Config {
        reserved_num_seqs: 1,
        num_total_pages: 2,
        prefill_chunk_size: 8,
        page_size: 16,
        support_sliding_window: false,
        layer_sliding_window: layer_window,
        layer_begin: 0,
        num_layers: 1,
        num_qo_heads: 2,
        num_kv_heads: 1,
        qk_head_dim: 4,
        v_head_dim: 4,
        attn_kinds: vec![if layer_window.is_some() { AttnKind::MhaSliding } else { AttnKind::Mha }],
        rope_mode: RopeMode::None,
        rotary_scale: 1.0,
        rotary_theta: 10000.0,
        dtype: relaxvm::DataType::F32,
    };
    let kernels = Kernels {
        transpose_append: kernel("append"),
        prefill_ragged: kernel("ragged"),
        prefill: kernel("prefill"),
        decode: kernel("decode"),
        prefill_sliding_window: Some(kernel("paged")),
        decode_sliding_window: None,
        tree_paged: None,
        tree_ragged: None,
        compact_copy: kernel("compact"),
        merge_inplace: vec![kernel("merge")],
        split_rotary: kernel("split"),
        copy_single_page: kernel("copy"),
        debug_get_kv: None,
        rope_ext_factors: None,
    };
    PagedKvCache::new(cfg, kernels).unwrap()
}

#[cfg(test)]
mod alloc_tests {
    use super::alloc;
    use relaxvm::{DataType, ErrorKind};

    fn is_alloc(kind: &ErrorKind) -> bool {
        matches!(kind, ErrorKind::Alloc { .. })
    }

    #[test]
    fn scratch_sizes_past_i64_are_allocation_errors_not_overflows() {
        // 2^31 tokens x 2^20 heads x 2^20 dims: 2^71 elements, past i64 (the create call admits
        // each factor alone).
        let e = alloc(&[1 << 31, 1 << 20, 1 << 20], DataType::F16).unwrap_err();
        assert!(is_alloc(e.kind()), "{e}");
        assert!(e.to_string().contains("exceeds the address space"), "{e}");
        let s = alloc(&[3, 5, 7], DataType::F32).unwrap();
        assert_eq!(s.len(), 3 * 5 * 7 * 4);
    }
}
