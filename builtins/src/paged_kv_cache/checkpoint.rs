//! Checkpoints of one sequence (TVM's `get_checkpoint_metadata`, `get_layout_hash`,
//! `export_page_group`, `prepare_import`, `import_page_group`, `finish_import`): the metadata
//! JSON (TVM's keys in TVM's order, so the text is TVM's), the layout hash (FNV-1a of TVM's
//! layout descriptor, so a checkpoint moves between TVM and relaxvm), and each layer's pages
//! copied in logical order into a `(1, num_logical_pages, 2, num_kv_heads, page_size, head_dim)`
//! tensor, the unused tail of a partial last page zeroed.

use super::cache::{Import, PagedKvCache, State};
use super::create::{AttnKind, RopeMode};
use super::pool::Tree;
use relaxvm::{Error, Result, Tensor, Value};
#[cfg(feature = "json")]
use serde_json::Value as Json;

const CACHE_TYPE: &str = "relax.vm.PagedAttentionKVCache";
const FORMAT_VERSION: i64 = 1;
const PAGE_GROUP_LAYOUT: &str = "1,num_logical_pages,2,num_kv_heads,page_size,qk_head_dim";

fn err(msg: impl std::fmt::Display) -> Error {
    Error::value(msg.to_string())
}

/// C++ `ostream << double` at `std::numeric_limits<double>::max_digits10` (`%.17g`).
fn g17(x: f64) -> String {
    if !x.is_finite() {
        return if x.is_nan() {
            "nan".into()
        } else if x > 0.0 {
            "inf".into()
        } else {
            "-inf".into()
        };
    }
    if x == 0.0 {
        return if x.is_sign_negative() { "-0".into() } else { "0".into() };
    }
    let sci = format!("{x:.16e}");
    let (mantissa, exp) = sci.split_once('e').expect("{:e} has an exponent");
    let exp: i32 = exp.parse().expect("an integer exponent");
    let trim = |s: &str| -> String {
        if s.contains('.') {
            s.trim_end_matches('0').trim_end_matches('.').to_string()
        } else {
            s.to_string()
        }
    };
    if !(-4..17).contains(&exp) {
        let sign = if exp < 0 { '-' } else { '+' };
        format!("{}e{sign}{:02}", trim(mantissa), exp.abs())
    } else {
        let decimals = (16 - exp).max(0) as usize;
        trim(&format!("{x:.decimals$}"))
    }
}

/// A JSON number as TVM's JSON writer prints a double (`1.0`, `10000.0`, `0.5`).
fn json_f64(x: f64) -> String {
    format!("{x:?}")
}

fn kind_name(k: AttnKind) -> &'static str {
    match k {
        AttnKind::Mha => "mha",
        AttnKind::MhaSliding => "mha_sliding",
    }
}

fn rope_name(m: RopeMode) -> &'static str {
    match m {
        RopeMode::None => "none",
        RopeMode::Normal => "normal",
        RopeMode::Inline => "inline",
    }
}

impl PagedKvCache {
    fn local_kinds(&self) -> &[AttnKind] {
        let c = &self.cfg;
        &c.attn_kinds[c.layer_begin as usize..(c.layer_begin + c.num_layers) as usize]
    }

    /// TVM's CheckCheckpointLayoutSupported.
    pub(crate) fn check_checkpoint_layout(&self) -> Result<()> {
        let c = &self.cfg;
        if self.local_kinds().iter().any(|k| *k != AttnKind::Mha) {
            return Err(err("checkpoints support full-context MHA/GQA layers only"));
        }
        if c.support_sliding_window || c.layer_sliding_window.is_some() {
            return Err(err("checkpoints do not support sliding-window caches"));
        }
        if self.kernels.rope_ext_factors.is_some() {
            return Err(err("checkpoints do not support RoPE extension factors"));
        }
        Ok(())
    }

    /// TVM's CheckCheckpointSequenceState.
    fn check_checkpoint_seq(&self, st: &State, id: i64) -> Result<()> {
        if id != 0 {
            return Err(err(format!("checkpoints support sequence id 0 only, found {id}")));
        }
        let s = st.pool.seq(id)?;
        if !s.tree.committed || !s.tree.is_chain {
            return Err(err("checkpoints need the sequence's token tree committed"));
        }
        if s.sliding_window_size != -1 {
            return Err(err("checkpoints do not support sequences with a sliding window"));
        }
        Ok(())
    }

    /// Export-side checks (TVM's CheckCheckpointSequenceSupported).
    fn check_export(&self, st: &State, id: i64) -> Result<()> {
        self.check_checkpoint_layout()?;
        if st.import.is_some() {
            return Err(err("a checkpoint import is in progress: finish it first"));
        }
        self.check_checkpoint_seq(st, id)
    }

    /// TVM's layout descriptor, whose FNV-1a 64 hash is the layout hash.
    fn layout_descriptor(&self) -> String {
        let c = &self.cfg;
        let kinds: Vec<&str> = self.local_kinds().iter().map(|k| kind_name(*k)).collect();
        format!(
            "format_version={FORMAT_VERSION};cache_type={CACHE_TYPE};page_size={};num_layers={};layer_begin={};layer_end={};num_qo_heads={};num_kv_heads={};qk_head_dim={};v_head_dim={};dtype={};rope_mode={};rotary_scale={};rotary_theta={};has_rope_ext_factors={};support_sliding_window={};support_layer_sliding_window={};page_group_layout={PAGE_GROUP_LAYOUT};attn_kinds={}",
            c.page_size,
            c.num_layers,
            c.layer_begin,
            c.layer_begin + c.num_layers,
            c.num_qo_heads,
            c.num_kv_heads,
            c.qk_head_dim,
            c.v_head_dim,
            c.dtype,
            rope_name(c.rope_mode),
            g17(c.rotary_scale),
            g17(c.rotary_theta),
            u8::from(self.kernels.rope_ext_factors.is_some()),
            u8::from(c.support_sliding_window),
            u8::from(c.layer_sliding_window.is_some()),
            kinds.join(",")
        )
    }

    /// `get_layout_hash`.
    pub(crate) fn layout_hash(&self) -> Result<String> {
        self.check_checkpoint_layout()?;
        let mut h: u64 = 0xcbf2_9ce4_8422_2325;
        for b in self.layout_descriptor().bytes() {
            h ^= u64::from(b);
            h = h.wrapping_mul(0x0000_0100_0000_01b3);
        }
        Ok(format!("{h:016x}"))
    }

    fn page_bytes(&self) -> i64 {
        let c = &self.cfg;
        2 * c.num_kv_heads * i64::from(c.page_size) * c.qk_head_dim * c.dtype.itemsize() as i64
    }

    fn logical_pages(&self, len: i32) -> i64 {
        (i64::from(len) + i64::from(self.cfg.page_size) - 1) / i64::from(self.cfg.page_size)
    }

    /// The layout part of the metadata (TVM's MakeLayoutMetadata), as JSON members.
    fn layout_json(&self) -> String {
        let c = &self.cfg;
        let kinds: Vec<String> = self.local_kinds().iter().map(|k| format!("\"{}\"", kind_name(*k))).collect();
        format!(
            "\"format_version\":{FORMAT_VERSION},\"cache_type\":\"{CACHE_TYPE}\",\"page_size\":{},\"num_layers\":{},\"layer_begin\":{},\"layer_end\":{},\"num_qo_heads\":{},\"num_kv_heads\":{},\"qk_head_dim\":{},\"v_head_dim\":{},\"reserved_num_seqs\":{},\"num_total_pages\":{},\"prefill_chunk_size\":{},\"dtype\":\"{}\",\"attn_kinds\":[{}],\"rope_mode\":\"{}\",\"rotary_scale\":{},\"rotary_theta\":{},\"has_rope_ext_factors\":{},\"support_sliding_window\":{},\"support_layer_sliding_window\":{},\"page_group_layout\":\"{PAGE_GROUP_LAYOUT}\"",
            c.page_size,
            c.num_layers,
            c.layer_begin,
            c.layer_begin + c.num_layers,
            c.num_qo_heads,
            c.num_kv_heads,
            c.qk_head_dim,
            c.v_head_dim,
            c.reserved_num_seqs,
            c.num_total_pages,
            c.prefill_chunk_size,
            c.dtype,
            kinds.join(","),
            rope_name(c.rope_mode),
            json_f64(c.rotary_scale),
            json_f64(c.rotary_theta),
            self.kernels.rope_ext_factors.is_some(),
            c.support_sliding_window,
            c.layer_sliding_window.is_some(),
        )
    }

    /// `get_checkpoint_metadata`.
    pub(crate) fn checkpoint_metadata(&self, st: &State, id: i64) -> Result<String> {
        self.check_export(st, id)?;
        let s = st.pool.seq(id)?;
        let n = self.logical_pages(s.seq_length);
        let ps = i64::from(self.cfg.page_size);
        let pages: Vec<String> = (0..n)
            .map(|i| {
                let len = ps.min(i64::from(s.seq_length) - i * ps);
                format!("{{\"logical_page_index\":{i},\"start_pos\":{},\"length\":{len}}}", i * ps)
            })
            .collect();
        let c = &self.cfg;
        let groups: Vec<String> = (0..c.num_layers)
            .map(|l| {
                format!(
                    "{{\"group_index\":{l},\"layer_begin\":{},\"layer_end\":{},\"num_logical_pages\":{n},\"dtype\":\"{}\",\"shape\":[1,{n},2,{},{},{}],\"nbytes\":{}}}",
                    c.layer_begin + l,
                    c.layer_begin + l + 1,
                    c.dtype,
                    c.num_kv_heads,
                    c.page_size,
                    c.qk_head_dim,
                    n * self.page_bytes()
                )
            })
            .collect();
        Ok(format!(
            "{{{},\"layout_hash\":\"{}\",\"seq_id\":{id},\"seq_length\":{},\"logical_pages\":[{}],\"groups\":[{}]}}",
            self.layout_json(),
            self.layout_hash()?,
            s.seq_length,
            pages.join(","),
            groups.join(",")
        ))
    }

    /// The sequence's pages in logical order, checked against its length.
    fn checkpoint_pages(&self, st: &State, id: i64) -> Result<Vec<i32>> {
        let s = st.pool.seq(id)?;
        let pages: Vec<i32> =
            st.pool.trace(s).iter().flat_map(|&b| st.pool.blocks[b as usize].page_ids.iter().copied()).collect();
        if pages.len() as i64 != self.logical_pages(s.seq_length) || pages.iter().any(|&p| p < 0) {
            return Err(err("the sequence's page table does not match its length"));
        }
        Ok(pages)
    }

    fn check_group(&self, group: i64, t: &Tensor, n: i64, what: &str) -> Result<()> {
        let c = &self.cfg;
        if group < 0 || group >= c.num_layers {
            return Err(err(format!("group {group} is out of range: expected 0 to {}", c.num_layers - 1)));
        }
        let dims = [Some(1), Some(n), Some(2), Some(c.num_kv_heads), Some(i64::from(c.page_size)), Some(c.qk_head_dim)];
        super::checks::check_tensor(t, what, &dims, c.dtype)
    }

    /// `export_page_group`: layer `group`'s pages of sequence `id` into `dst`.
    pub(crate) fn export_page_group(&self, st: &State, id: i64, group: i64, dst: &Tensor) -> Result<()> {
        self.check_export(st, id)?;
        let len = st.pool.seq(id)?.seq_length;
        let n = self.logical_pages(len);
        self.check_group(group, dst, n, "dst")?;
        super::checks::check_writable(dst, "dst")?;
        let pages = self.checkpoint_pages(st, id)?;
        let Value::Tensor(layer) = &self.pages[group as usize] else { unreachable!("pages are tensors") };
        let pb = self.page_bytes() as usize;
        let c = &self.cfg;
        let item = c.dtype.itemsize();
        let row = c.qk_head_dim as usize * item;
        let ps = c.page_size as usize;
        let valid_last = len as usize % ps;
        // Read the source pages first: `dst` may not be written while they are borrowed.
        let mut out = vec![0u8; pages.len() * pb];
        layer.storage().read_with(|src| {
            let base = layer.byte_offset();
            for (i, &p) in pages.iter().enumerate() {
                let from = &src[base + p as usize * pb..base + (p as usize + 1) * pb];
                let to = &mut out[i * pb..(i + 1) * pb];
                if i + 1 == pages.len() && valid_last != 0 {
                    // The partial last page: its valid rows only, per K/V and head.
                    for kh in 0..2 * c.num_kv_heads as usize {
                        let off = kh * ps * row;
                        to[off..off + valid_last * row].copy_from_slice(&from[off..off + valid_last * row]);
                    }
                } else {
                    to.copy_from_slice(from);
                }
            }
        });
        let off = dst.byte_offset();
        dst.storage().write_with(|d| d[off..off + out.len()].copy_from_slice(&out))?;
        Ok(())
    }

    /// `prepare_import`: checks the metadata against this cache, then clears the cache and
    /// makes sequence 0 of the checkpoint's length, its pages to be filled by the imports.
    pub(crate) fn prepare_import(&self, st: &mut State, id: i64, metadata: &str) -> Result<()> {
        self.check_checkpoint_layout()?;
        if id != 0 {
            return Err(err(format!("checkpoint imports support sequence id 0 only, found {id}")));
        }
        let len = self.check_import_metadata(id, metadata)?;
        st.pool.clear();
        st.step = None;
        st.pool.add(0)?;
        let n = self.logical_pages(len);
        let b = st.pool.seqs[&0].last_block as usize;
        for _ in 0..n {
            let p = st.pool.take_page_for_import()?;
            st.pool.blocks[b].page_ids.push(p);
        }
        st.pool.blocks[b].seq_length = len;
        let s = st.pool.seqs.get_mut(&0).expect("just added");
        s.seq_length = len;
        s.tree = Tree::default();
        st.import = Some(Import { imported: vec![false; self.cfg.num_layers as usize] });
        Ok(())
    }

    /// TVM's CheckCheckpointImportMetadata; returns the sequence length.
    #[cfg(feature = "json")]
    fn check_import_metadata(&self, id: i64, text: &str) -> Result<i32> {
        let m: Json =
            serde_json::from_str(text).map_err(|e| err(format!("the checkpoint metadata is not JSON: {e}")))?;
        let obj = m.as_object().ok_or_else(|| err("the checkpoint metadata must be a JSON object"))?;
        let field = |o: &serde_json::Map<String, Json>, k: &str| -> Result<Json> {
            o.get(k).cloned().ok_or_else(|| err(format!("the checkpoint metadata has no field {k:?}")))
        };
        let int = |o: &serde_json::Map<String, Json>, k: &str| -> Result<i64> {
            field(o, k)?.as_i64().ok_or_else(|| err(format!("checkpoint metadata field {k:?} must be an integer")))
        };
        // One message for every field that differs from the cache's.
        let differs = |k: &str, v: &dyn std::fmt::Display, got: &dyn std::fmt::Display| {
            err(format!("checkpoint metadata field {k:?}: expected {v}, found {got}"))
        };
        let want_int = |o: &serde_json::Map<String, Json>, k: &str, v: i64| -> Result<()> {
            let got = int(o, k)?;
            if got != v {
                return Err(differs(k, &v, &got));
            }
            Ok(())
        };
        let want = |k: &str, v: Json| -> Result<()> {
            let got = field(obj, k)?;
            if got != v {
                return Err(differs(k, &v, &got));
            }
            Ok(())
        };
        let c = &self.cfg;
        want_int(obj, "format_version", FORMAT_VERSION)?;
        want("cache_type", Json::from(CACHE_TYPE))?;
        want_int(obj, "page_size", c.page_size.into())?;
        want_int(obj, "num_layers", c.num_layers)?;
        want_int(obj, "layer_begin", c.layer_begin)?;
        want_int(obj, "layer_end", c.layer_begin + c.num_layers)?;
        want_int(obj, "num_qo_heads", c.num_qo_heads)?;
        want_int(obj, "num_kv_heads", c.num_kv_heads)?;
        want_int(obj, "qk_head_dim", c.qk_head_dim)?;
        want_int(obj, "v_head_dim", c.v_head_dim)?;
        want("dtype", Json::from(c.dtype.to_string()))?;
        want("rope_mode", Json::from(rope_name(c.rope_mode)))?;
        for (k, v) in [("rotary_scale", c.rotary_scale), ("rotary_theta", c.rotary_theta)] {
            let got = field(obj, k)?.as_f64();
            if got != Some(v) {
                return Err(err(format!("checkpoint metadata field {k:?}: expected {v}, found {got:?}")));
            }
        }
        want("has_rope_ext_factors", Json::from(self.kernels.rope_ext_factors.is_some()))?;
        want("support_sliding_window", Json::from(c.support_sliding_window))?;
        want("support_layer_sliding_window", Json::from(c.layer_sliding_window.is_some()))?;
        want("page_group_layout", Json::from(PAGE_GROUP_LAYOUT))?;
        for k in ["reserved_num_seqs", "num_total_pages", "prefill_chunk_size"] {
            if int(obj, k)? <= 0 {
                return Err(err(format!("checkpoint metadata field {k:?} must be positive")));
            }
        }
        want("layout_hash", Json::from(self.layout_hash()?))?;
        let kinds: Vec<Json> = self.local_kinds().iter().map(|k| Json::from(kind_name(*k))).collect();
        want("attn_kinds", Json::from(kinds))?;
        want_int(obj, "seq_id", id)?;
        let len = int(obj, "seq_length")?;
        if !(0..=i64::from(i32::MAX)).contains(&len) {
            return Err(err(format!("checkpoint seq_length {len} is out of range")));
        }
        let n = self.logical_pages(len as i32);
        if n > int(obj, "num_total_pages")? || n > i64::from(c.num_total_pages) {
            return Err(err(format!(
                "the checkpoint needs {n} pages; its source cache or this one ({} pages) has fewer",
                c.num_total_pages
            )));
        }
        let ps = i64::from(c.page_size);
        let pages = field(obj, "logical_pages")?;
        let pages =
            pages.as_array().ok_or_else(|| err("checkpoint metadata field \"logical_pages\" must be an array"))?;
        if pages.len() as i64 != n {
            return Err(err(format!("seq_length {len} needs {n} logical pages, the metadata has {}", pages.len())));
        }
        for (i, p) in pages.iter().enumerate() {
            let p = p.as_object().ok_or_else(|| err("a logical page must be an object"))?;
            let i = i as i64;
            want_int(p, "logical_page_index", i)?;
            want_int(p, "start_pos", i * ps)?;
            want_int(p, "length", ps.min(len - i * ps))?;
        }
        let groups = field(obj, "groups")?;
        let groups = groups.as_array().ok_or_else(|| err("checkpoint metadata field \"groups\" must be an array"))?;
        if groups.len() as i64 != c.num_layers {
            return Err(err(format!("expected {} page groups, the metadata has {}", c.num_layers, groups.len())));
        }
        for (l, g) in groups.iter().enumerate() {
            let g = g.as_object().ok_or_else(|| err("a page group must be an object"))?;
            let l = l as i64;
            want_int(g, "group_index", l)?;
            want_int(g, "layer_begin", c.layer_begin + l)?;
            want_int(g, "layer_end", c.layer_begin + l + 1)?;
            want_int(g, "num_logical_pages", n)?;
            if g.get("dtype") != Some(&Json::from(c.dtype.to_string())) {
                return Err(err(format!("page group {l}: dtype does not match {}", c.dtype)));
            }
            let shape = Json::from(vec![1, n, 2, c.num_kv_heads, ps, c.qk_head_dim]);
            if g.get("shape") != Some(&shape) {
                return Err(err(format!("page group {l}: expected shape {shape}")));
            }
            want_int(g, "nbytes", n * self.page_bytes())?;
        }
        Ok(len as i32)
    }

    /// `import_page_group`: layer `group`'s pages of the checkpoint from `src`.
    pub(crate) fn import_page_group(&self, st: &mut State, id: i64, group: i64, src: &Tensor) -> Result<()> {
        self.check_checkpoint_layout()?;
        let Some(import) = &st.import else {
            return Err(no_import());
        };
        self.check_checkpoint_seq(st, id)?;
        let n = self.logical_pages(st.pool.seq(id)?.seq_length);
        self.check_group(group, src, n, "src")?;
        if import.imported[group as usize] {
            return Err(err(format!("checkpoint group {group} was already imported")));
        }
        let pages = self.checkpoint_pages(st, id)?;
        let pb = self.page_bytes() as usize;
        let data = src.with_contiguous_bytes(|b| b.to_vec())?;
        let Value::Tensor(layer) = &self.pages[group as usize] else { unreachable!("pages are tensors") };
        let base = layer.byte_offset();
        layer.storage().write_with(|d| {
            for (i, &p) in pages.iter().enumerate() {
                let at = base + p as usize * pb;
                d[at..at + pb].copy_from_slice(&data[i * pb..(i + 1) * pb]);
            }
        })?;
        if let Some(import) = st.import.as_mut() {
            import.imported[group as usize] = true;
        }
        Ok(())
    }

    /// `finish_import`: every group must have been imported.
    pub(crate) fn finish_import(&self, st: &mut State, id: i64) -> Result<()> {
        self.check_checkpoint_layout()?;
        let Some(import) = &st.import else {
            return Err(no_import());
        };
        self.check_checkpoint_seq(st, id)?;
        if let Some(g) = import.imported.iter().position(|&done| !done) {
            return Err(err(format!("the checkpoint import is missing group {g}")));
        }
        st.import = None;
        Ok(())
    }
}

/// The refusal of an import step (a page group, or the finish) before `prepare_import`.
fn no_import() -> Error {
    err("no checkpoint import in progress: call prepare_import first")
}

#[cfg(test)]
mod tests {
    use super::g17;

    #[test]
    fn doubles_print_as_cpp_streams_at_17_digits() {
        assert_eq!(g17(1.0), "1");
        assert_eq!(g17(10000.0), "10000");
        assert_eq!(g17(0.5), "0.5");
        assert_eq!(g17(0.1), "0.10000000000000001");
        assert_eq!(g17(500000.0), "500000");
        assert_eq!(g17(1e20), "1e+20");
        assert_eq!(g17(1.5e-7), "1.4999999999999999e-07");
        assert_eq!(g17(-2.0), "-2");
    }
}
