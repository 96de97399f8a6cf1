//! The step's arrays as int32 tensors: packed into one storage when a step begins, refilled in
//! place when the next step has the same shape (a decode step after a decode step), and the
//! scratch views for the step's token count.

use super::super::forward::Plan;
use super::super::packed::{self, Packer};
use super::{int_tensor, AuxTensors, DepthTensors, PagedKvCache, ScratchViews};
use relaxvm::{Error, Result, Shape, Storage, Tensor, Value};

/// Per depth, the indices of its arrays in a [`Packer`].
type PerDepth = smallvec::SmallVec<[[usize; 9]; 2]>;

impl PagedKvCache {
    /// Calls `f` with each of the plan's arrays (its rows: one for a vector, three for a
    /// matrix) in the order the tensors are made: per depth its nine arrays, then the four of
    /// the step. One source of the order for [`PagedKvCache::pack`] and
    /// [`PagedKvCache::refill_aux`].
    fn each_array<'a>(&self, plan: &'a Plan, mut f: impl FnMut(&[&'a [i32]])) {
        for d in &plan.depths {
            let info = [&d.last_page_len[..], &d.sliding_window_offset, &d.sink_size];
            f(&[&d.qo_indptr]);
            f(&[&d.page_indptr]);
            f(&[&d.page_indices]);
            if self.cfg.support_sliding_window {
                f(&info);
            } else {
                f(&[&d.last_page_len]);
            }
            f(&[&d.k_rope_pos_offset]);
            f(&[&d.page_indptr_sliding]);
            f(&[&d.page_indices_sliding]);
            f(&info);
            f(&[&d.k_rope_pos_offset_sliding]);
        }
        f(&[&plan.cur_append_length_indptr]);
        f(&[&plan.k_ragged_rope_pos_offset]);
        f(&[&plan.q_rope_position_map]);
        f(&[&plan.append_position_map]);
    }

    /// Adds the plan's arrays to a packer ([`PagedKvCache::each_array`]'s order): per depth
    /// the indices of its nine arrays, then the four of the step.
    fn pack<'a>(&self, plan: &'a Plan) -> (Packer<'a>, PerDepth, [usize; 4]) {
        let mut p = Packer::default();
        self.each_array(plan, |rows| {
            p.matrix(rows);
        });
        let per_depth: PerDepth = (0..plan.depths.len()).map(|d| std::array::from_fn(|j| 9 * d + j)).collect();
        let first = 9 * plan.depths.len();
        (p, per_depth, std::array::from_fn(|k| first + k))
    }

    /// Writes the plan's arrays into the last step's `aux` in place (TVM's
    /// SyncAuxArrayToDevice, into the same tensors) when their layout is the plan's and
    /// neither has a token tree; returns false, changing nothing, otherwise. Nothing is
    /// changed on an error either. The tensors stay the same objects: a decode step after a
    /// decode step makes no tensor, no vector and no reference count change for its arrays.
    pub(crate) fn refill_aux(&self, plan: &Plan, aux: &mut AuxTensors) -> Result<bool> {
        let has_tree = plan.tree.is_chain.iter().take(plan.depths.len()).any(|c| !c);
        if has_tree || aux.depths.iter().any(|d| d.tree.is_some()) {
            return Ok(false);
        }
        // The layout is checked before anything is written (no packer is built: a decode
        // step's refill is a compare and a copy per array, #32 item 8), placed as a packer
        // places its arrays.
        let (mut layout, mut i, mut same) = (packed::Layout::default(), 0, true);
        self.each_array(plan, |rows| {
            let placed = layout.place(rows);
            same &= placed.even && aux.layout.get(i) == Some(&placed.shape);
            i += 1;
        });
        if !same || i != aux.layout.len() {
            return Ok(false);
        }
        if layout.bytes() != aux.storage.len() {
            return Err(Error::value("internal error: refilling step arrays of another layout"));
        }
        let total = plan.total_len();
        // The views first: a failure leaves the previous step's arrays as they were.
        let views = if aux.total == total { None } else { Some(self.scratch_views(total)?) };
        aux.storage.write_with(|buf| {
            let mut layout = packed::Layout::default();
            self.each_array(plan, |rows| packed::write_rows(buf, layout.place(rows).offset, rows));
        })?;
        for (dt, d) in aux.depths.iter_mut().zip(&plan.depths) {
            dt.page_indices_len = d.page_indices.len();
        }
        if let Some(v) = views {
            aux.views = v;
            aux.total = total;
        }
        Ok(true)
    }

    /// The plan's arrays as tensors (TVM's SyncAuxArrayToDevice), all views of one new
    /// storage (see [`PagedKvCache::refill_aux`] for the step after).
    pub(crate) fn aux_tensors(&self, plan: &Plan) -> Result<AuxTensors> {
        let (p, per_depth, step) = self.pack(plan);
        let total = plan.total_len();
        let layout = p.layout().into();
        let (storage, t) = p.finish()?;
        let depths = plan
            .depths
            .iter()
            .zip(&per_depth)
            .enumerate()
            .map(|(i, (d, ix))| {
                let tree = if plan.tree.is_chain[i] {
                    None
                } else {
                    let mask = &plan.tree.mask[i];
                    let pairs = Tensor::from_vec(Shape::from(vec![mask.len() as i64 / 2, 2]), mask.clone())?;
                    Some((int_tensor(&plan.tree.mn_indptr[i])?, Value::Tensor(pairs)))
                };
                Ok(DepthTensors {
                    qo_indptr: t[ix[0]].clone(),
                    page_indptr: t[ix[1]].clone(),
                    page_indices: t[ix[2]].clone(),
                    page_indices_len: d.page_indices.len(),
                    length_info: t[ix[3]].clone(),
                    k_rope_pos_offset: t[ix[4]].clone(),
                    page_indptr_sliding: t[ix[5]].clone(),
                    page_indices_sliding: t[ix[6]].clone(),
                    length_info_sliding: t[ix[7]].clone(),
                    k_rope_pos_offset_sliding: t[ix[8]].clone(),
                    tree,
                })
            })
            .collect::<Result<Vec<_>>>()?;
        Ok(AuxTensors {
            depths,
            cur_append_length_indptr: t[step[0]].clone(),
            k_ragged_rope_pos_offset: t[step[1]].clone(),
            q_rope_position_map: t[step[2]].clone(),
            append_position_map: t[step[3]].clone(),
            views: self.scratch_views(total)?,
            storage,
            layout,
            total,
        })
    }

    /// The scratch views for a step of `total` tokens.
    fn scratch_views(&self, total: i64) -> Result<ScratchViews> {
        let (c, f32) = (&self.cfg, relaxvm::DataType::F32);
        let view = |s: &Storage, shape: Vec<i64>, dtype| Self::scratch_view(s, shape, dtype);
        Ok(ScratchViews {
            q: view(&self.scratch.q, vec![total, c.num_qo_heads, c.qk_head_dim], c.dtype)?,
            k: view(&self.scratch.k, vec![total, c.num_kv_heads, c.qk_head_dim], c.dtype)?,
            v: view(&self.scratch.v, vec![total, c.num_kv_heads, c.qk_head_dim], c.dtype)?,
            out: view(&self.scratch.out, vec![total, c.num_qo_heads, c.v_head_dim], c.dtype)?,
            lse: view(&self.scratch.lse, vec![total, c.num_qo_heads], f32)?,
            merged_lse: view(&self.scratch.merged_lse, vec![total, c.num_qo_heads], f32)?,
        })
    }

    /// A view of scratch `s` with `shape` and `dtype`.
    pub(crate) fn scratch_view(s: &Storage, shape: Vec<i64>, dtype: relaxvm::DataType) -> Result<Value> {
        Ok(Value::Tensor(Tensor::from_parts(s.clone(), 0, Shape::from(shape), None, dtype)?))
    }
}

#[cfg(test)]
mod refill_tests {
    use super::super::super::forward;
    use super::super::test_cache;
    use relaxvm::Value;

    fn ints(v: &Value) -> Vec<i32> {
        let t = v.as_tensor().unwrap();
        t.with_contiguous_bytes(|b| b.chunks_exact(4).map(|e| i32::from_ne_bytes([e[0], e[1], e[2], e[3]])).collect())
            .unwrap()
    }

    fn same_object(a: &Value, b: &Value) -> bool {
        let (a, b) = (a.as_tensor().unwrap(), b.as_tensor().unwrap());
        a.storage().ptr_eq(b.storage()) && a.byte_offset() == b.byte_offset()
    }

    #[test]
    fn a_decode_step_after_a_decode_step_refills_the_same_tensors() {
        let cache = test_cache(None);
        let mut st = cache.lock("test").unwrap();
        let limits = cache.limits();
        st.pool.add(0).unwrap();
        let mut begin = |len: i64| forward::begin(&mut st.pool, &[0], &[len], None, &limits, None).unwrap();
        let prefill = begin(3);
        let mut aux = cache.aux_tensors(&prefill).unwrap();
        let d1 = begin(1);
        // A prefill's arrays are laid out otherwise: nothing is refilled, nothing changes.
        let before = ints(&aux.q_rope_position_map);
        assert!(!cache.refill_aux(&d1, &mut aux).unwrap());
        assert_eq!(ints(&aux.q_rope_position_map), before);
        let mut aux = cache.aux_tensors(&d1).unwrap();
        let (map, views_q) = (aux.q_rope_position_map.clone(), aux.views.q.clone());
        assert_eq!(ints(&map), [3]);
        let d2 = begin(1);
        assert!(cache.refill_aux(&d2, &mut aux).unwrap());
        // The same tensors (and scratch views) hold the new step's values.
        assert!(same_object(&aux.q_rope_position_map, &map) && same_object(&aux.views.q, &views_q));
        assert_eq!(ints(&map), [4]);
        assert_eq!(ints(&aux.append_position_map), d2.append_position_map);
        assert_eq!(aux.depths[0].page_indices_len, d2.depths[0].page_indices.len());
    }

    #[test]
    fn a_refill_into_a_storage_of_another_size_is_refused_unchanged() {
        let cache = test_cache(None);
        let mut st = cache.lock("test").unwrap();
        let limits = cache.limits();
        st.pool.add(0).unwrap();
        let mut begin = |len: i64| forward::begin(&mut st.pool, &[0], &[len], None, &limits, None).unwrap();
        let d1 = begin(1);
        let mut aux = cache.aux_tensors(&d1).unwrap();
        let d2 = begin(1);
        // The layout matches but the storage is one byte short (a broken invariant): an
        // internal error, and the arrays keep the last step's values.
        let before = ints(&aux.q_rope_position_map);
        aux.storage = relaxvm::Storage::alloc(aux.storage.len() - 1, relaxvm::Device::default()).unwrap();
        let e = cache.refill_aux(&d2, &mut aux).unwrap_err();
        assert!(e.to_string().contains("internal error: refilling step arrays of another layout"), "{e}");
        assert_eq!(ints(&aux.q_rope_position_map), before);
    }
}
