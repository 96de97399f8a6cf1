//! `vm.builtin.paged_attention_kv_cache_create`, TIR-kernel variant: TVM 0.27's 28 (or 29)
//! arguments, read and checked into a [`Config`] and the [`Kernels`] the cache calls.
//!
//! The arguments, as `TIRPagedKVCache` passes them for target `llvm`:
//! `0` cache config `(reserved_num_seqs, total_token_capacity, prefill_chunk_size, page_size,
//! support_sliding_window[, layer_sliding_window_size])`, `1` layer indptr `(begin, end)`, `2`
//! num_qo_heads, `3` num_kv_heads, `4` qk_head_dim, `5` v_head_dim, `6` attention kind per
//! layer, `7` enable_kv_transfer, `8` rope mode, `9` rotary scale, `10` rotary theta, `11` rope
//! extension factors (a tensor or anything else for none), `12` a tensor giving the dtype, `13`
//! transpose_append, `14` transpose_append for MLA (unused), `15..=21` `("tirx", kernel)` tuples
//! (ragged prefill, paged prefill, paged decode, their sliding-window versions, tree-mask
//! prefill with paged KV, tree-mask ragged prefill; `()` when absent), `22` MLA prefill (must
//! be empty), `23` a tuple of merge functions, `24` split_rotary, `25` copy_single_page, `26`
//! debug_get_kv, `27` compact_copy (`28`: a CUDA-graph flag TVM ignores).

use crate::args::{int, shape, tensor, type_err, value_err};
use relaxvm::{DataType, Result, Value};

/// Attention kind of a layer (TVM's `AttnKind`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum AttnKind {
    Mha,
    MhaSliding,
}

/// TVM's `RoPEMode`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum RopeMode {
    None,
    Normal,
    Inline,
}

/// The cache's fixed configuration.
#[derive(Clone, Debug)]
pub(crate) struct Config {
    pub(crate) reserved_num_seqs: i64,
    pub(crate) num_total_pages: i32,
    pub(crate) prefill_chunk_size: i64,
    pub(crate) page_size: i32,
    pub(crate) support_sliding_window: bool,
    /// The window of `mha_sliding` layers when some layer has that kind.
    pub(crate) layer_sliding_window: Option<i32>,
    pub(crate) layer_begin: i64,
    pub(crate) num_layers: i64,
    pub(crate) num_qo_heads: i64,
    pub(crate) num_kv_heads: i64,
    pub(crate) qk_head_dim: i64,
    pub(crate) v_head_dim: i64,
    /// The kind of every layer of the model (indexed by global layer id).
    pub(crate) attn_kinds: Vec<AttnKind>,
    pub(crate) rope_mode: RopeMode,
    pub(crate) rotary_scale: f64,
    pub(crate) rotary_theta: f64,
    pub(crate) dtype: DataType,
}

/// The kernels the cache calls (function values from the model's library).
#[derive(Clone)]
pub(crate) struct Kernels {
    pub(crate) transpose_append: Value,
    pub(crate) prefill_ragged: Value,
    pub(crate) prefill: Value,
    pub(crate) decode: Value,
    pub(crate) prefill_sliding_window: Option<Value>,
    pub(crate) decode_sliding_window: Option<Value>,
    pub(crate) tree_paged: Option<Value>,
    pub(crate) tree_ragged: Option<Value>,
    pub(crate) compact_copy: Value,
    pub(crate) merge_inplace: Vec<Value>,
    pub(crate) split_rotary: Value,
    pub(crate) copy_single_page: Value,
    pub(crate) debug_get_kv: Option<Value>,
    pub(crate) rope_ext_factors: Option<Value>,
}

fn func(name: &str, args: &[Value], i: usize, what: &str) -> Result<Value> {
    match args.get(i) {
        Some(v @ Value::Func(_)) => Ok(v.clone()),
        Some(other) => Err(type_err(name, i, what, "function", other)),
        None => Err(crate::args::missing(name, i, args.len())),
    }
}

fn opt_func(name: &str, args: &[Value], i: usize, what: &str) -> Result<Option<Value>> {
    match args.get(i) {
        Some(v @ Value::Func(_)) => Ok(Some(v.clone())),
        Some(Value::Null) => Ok(None),
        Some(other) => Err(type_err(name, i, what, "function or null", other)),
        None => Err(crate::args::missing(name, i, args.len())),
    }
}

/// A `("tirx", kernel)` tuple (TVM's backend tuple): `Some(kernel)`, or `None` for `()`.
fn backend(name: &str, args: &[Value], i: usize, what: &str) -> Result<Option<Value>> {
    let items = match args.get(i) {
        Some(Value::Tuple(t)) => t,
        Some(other) => Err(type_err(name, i, what, "(\"tirx\", function) or ()", other))?,
        None => return Err(crate::args::missing(name, i, args.len())),
    };
    match items.as_slice() {
        [] => Ok(None),
        [Value::Str(b), f @ Value::Func(_)] if &**b == "tirx" => Ok(Some(f.clone())),
        [Value::Str(b), ..] => Err(value_err(
            name,
            format!("argument {i} ({what}): backend {:?} is not supported on the CPU (expected \"tirx\")", &**b),
        )),
        _ => Err(value_err(
            name,
            format!("argument {i} ({what}): expected (\"tirx\", function) or (), found {}", args[i]),
        )),
    }
}

fn float(name: &str, args: &[Value], i: usize, what: &str) -> Result<f64> {
    match args.get(i) {
        Some(Value::Float(x)) => Ok(*x),
        Some(Value::Int(x)) => Ok(*x as f64),
        Some(other) => Err(type_err(name, i, what, "float", other)),
        None => Err(crate::args::missing(name, i, args.len())),
    }
}

/// Reads and checks the create call's arguments.
pub(crate) fn parse(name: &str, args: &[Value]) -> Result<(Config, Kernels)> {
    if args.len() != 28 && args.len() != 29 {
        return Err(relaxvm::Error::arity(name, "28 or 29".to_string(), args.len()));
    }
    let cfg = shape(name, args, 0, "cache config")?;
    if cfg.len() != 5 && cfg.len() != 6 {
        return Err(value_err(
            name,
            format!("the cache config must have 5 or 6 fields (reserved_num_seqs, total_token_capacity, prefill_chunk_size, page_size, support_sliding_window[, layer_sliding_window_size]), found {}", cfg.len()),
        ));
    }
    let c = |k: usize| cfg[k];
    let (reserved, capacity, chunk, page_size) = (c(0), c(1), c(2), c(3));
    let sliding_flag = c(4) != 0;
    let layer_window = if cfg.len() == 6 { c(5) } else { 1024 };
    let positive = |v: i64, what: &str| -> Result<()> {
        if v <= 0 || v > i64::from(i32::MAX) {
            return Err(value_err(name, format!("{what} must be between 1 and {}, found {v}", i32::MAX)));
        }
        Ok(())
    };
    positive(reserved, "reserved_num_seqs")?;
    positive(capacity, "total_token_capacity")?;
    positive(chunk, "prefill_chunk_size")?;
    positive(page_size, "page_size")?;
    positive(layer_window, "layer_sliding_window_size")?;
    let mut pages = (capacity + page_size - 1) / page_size + 1;
    if sliding_flag {
        pages += reserved * 2;
    }
    positive(pages, "the number of pages")?;
    let indptr = shape(name, args, 1, "layer indptr")?;
    if indptr.len() != 2 || indptr[0] < 0 || indptr[1] <= indptr[0] {
        return Err(value_err(
            name,
            format!("the layer indptr must be (begin, end) with 0 <= begin < end, found {indptr}"),
        ));
    }
    let dims: Vec<i64> = (2..6)
        .map(|i| int(name, args, i, ["num_qo_heads", "num_kv_heads", "qk_head_dim", "v_head_dim"][i - 2]))
        .collect::<Result<_>>()?;
    let (qo, kv, qk_dim, v_dim) = (dims[0], dims[1], dims[2], dims[3]);
    if dims.iter().any(|&d| d <= 0 || d > 1 << 20) || qo % kv != 0 {
        return Err(value_err(
            name,
            format!("expected positive head counts and dimensions with num_qo_heads a multiple of num_kv_heads, found {qo} query heads, {kv} KV heads, dims {qk_dim} and {v_dim}"),
        ));
    }
    if qk_dim != v_dim {
        return Err(value_err(
            name,
            format!("qk_head_dim ({qk_dim}) and v_head_dim ({v_dim}) must be equal for MHA caches"),
        ));
    }
    let kinds = shape(name, args, 6, "attention kinds")?;
    if (kinds.len() as i64) < indptr[1] {
        return Err(value_err(name, format!("{} attention kinds for layers up to {}", kinds.len(), indptr[1])));
    }
    let attn_kinds = kinds
        .iter()
        .map(|&k| match k {
            0 => Ok(AttnKind::Mha),
            3 => Ok(AttnKind::MhaSliding),
            1 => Err(value_err(name, "MLA layers are not supported (TVM runs them with GPU kernels only)")),
            2 => Err(value_err(name, "linear-attention layers are not supported (TVM does not implement them)")),
            k => Err(value_err(name, format!("unknown attention kind {k} (expected 0 mha or 3 mha_sliding)"))),
        })
        .collect::<Result<Vec<_>>>()?;
    if int(name, args, 7, "enable_kv_transfer")? != 0 {
        return Err(value_err(name, "KV transfer between devices (NVSHMEM) is not supported"));
    }
    let has_layer_sliding = attn_kinds.contains(&AttnKind::MhaSliding);
    // TVM: a cache with mha_sliding layers ignores the per-sequence sliding-window flag, and
    // the flag alone (as passed) forces inline RoPE.
    let support_sliding_window = sliding_flag && !has_layer_sliding;
    let rope_mode = match int(name, args, 8, "rope mode")? {
        0 => RopeMode::None,
        1 if sliding_flag => RopeMode::Inline,
        1 => RopeMode::Normal,
        2 => RopeMode::Inline,
        m => return Err(value_err(name, format!("unknown rope mode {m} (expected 0 none, 1 normal, 2 inline)"))),
    };
    let rotary_scale = float(name, args, 9, "rotary scale")?;
    let rotary_theta = float(name, args, 10, "rotary theta")?;
    let rope_ext_factors = match &args[11] {
        v @ Value::Tensor(_) => Some(v.clone()),
        _ => None,
    };
    if rope_ext_factors.is_some() && rope_mode != RopeMode::Normal {
        return Err(value_err(name, "RoPE extension factors need the normal RoPE mode"));
    }
    let dtype = tensor(name, args, 12, "dtype example")?.dtype();
    let transpose_append = opt_func(name, args, 13, "transpose_append")?
        .ok_or_else(|| value_err(name, "argument 13 (transpose_append) is required for MHA layers"))?;
    let need = |v: Option<Value>, i: usize, what: &str| {
        v.ok_or_else(|| value_err(name, format!("argument {i} ({what}) is required, found ()")))
    };
    let prefill_ragged = need(backend(name, args, 15, "ragged prefill")?, 15, "ragged prefill")?;
    let prefill = need(backend(name, args, 16, "paged prefill")?, 16, "paged prefill")?;
    let decode = need(backend(name, args, 17, "paged decode")?, 17, "paged decode")?;
    let prefill_sliding_window = backend(name, args, 18, "sliding-window prefill")?;
    let decode_sliding_window = backend(name, args, 19, "sliding-window decode")?;
    let tree_paged = backend(name, args, 20, "tree-mask prefill with paged KV")?;
    let tree_ragged = backend(name, args, 21, "tree-mask ragged prefill")?;
    if backend(name, args, 22, "MLA prefill")?.is_some() {
        return Err(value_err(name, "MLA prefill (argument 22) is not supported"));
    }
    let merge_inplace = match &args[23] {
        Value::Tuple(t) if !t.is_empty() && t.iter().all(|v| matches!(v, Value::Func(_))) => t.to_vec(),
        other => return Err(type_err(name, 23, "merge functions", "a non-empty tuple of functions", other)),
    };
    let split_rotary = func(name, args, 24, "split_rotary")?;
    let copy_single_page = func(name, args, 25, "copy_single_page")?;
    let debug_get_kv = opt_func(name, args, 26, "debug_get_kv")?;
    let compact_copy = func(name, args, 27, "compact_copy")?;
    if (support_sliding_window || has_layer_sliding)
        && (prefill_sliding_window.is_none() || decode_sliding_window.is_none())
    {
        return Err(value_err(
            name,
            "sliding windows need the sliding-window prefill and decode kernels (arguments 18, 19)",
        ));
    }
    let config = Config {
        reserved_num_seqs: reserved,
        num_total_pages: pages as i32,
        prefill_chunk_size: chunk,
        page_size: page_size as i32,
        support_sliding_window,
        layer_sliding_window: has_layer_sliding.then_some(layer_window as i32),
        layer_begin: indptr[0],
        num_layers: indptr[1] - indptr[0],
        num_qo_heads: qo,
        num_kv_heads: kv,
        qk_head_dim: qk_dim,
        v_head_dim: v_dim,
        attn_kinds,
        rope_mode,
        rotary_scale,
        rotary_theta,
        dtype,
    };
    let kernels = Kernels {
        transpose_append,
        prefill_ragged,
        prefill,
        decode,
        prefill_sliding_window,
        decode_sliding_window,
        tree_paged,
        tree_ragged,
        compact_copy,
        merge_inplace,
        split_rotary,
        copy_single_page,
        debug_get_kv,
        rope_ext_factors,
    };
    Ok((config, kernels))
}
