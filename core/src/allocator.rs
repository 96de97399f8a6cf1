//! Which allocator a VM's builtins use: TVM's `memory_cfg` choice.

/// How builtins that allocate at a call site (`alloc_storage`, `alloc_tensor`, the shape
/// heap) get their memory, as TVM's `memory_cfg` chooses: `Pooled` (TVM's default) keeps what
/// each site made last and hands it out again once nothing else holds it; `Naive` allocates
/// anew at every call and frees when the last user lets go.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Allocator {
    /// Allocate at every call.
    Naive,
    /// Reuse each call site's last block (and tensor header) once it is free.
    #[default]
    Pooled,
}
