//! Function signatures (the IREE ABI): parameter and result types (the grammar, here), their
//! text form (`text.rs`), the JSON reflection records (`reflection.rs`) and the checks made at
//! the call boundary before any instruction runs (`check.rs`). Whether a signature is well
//! formed is the verifier's business (`crate::verify::verify_signature`).
//!
//! Text form (also in `as_text()` and `docs/text-format.md`):
//!
//! ```text
//! (x: tensor<[n, 16], f32>, k: f32, cfg: dict<{depth: i64, name: str}>) -> tuple<tensor<*, f32>, i64>
//! ```

use crate::dtype::DataType;

mod check;
#[cfg(feature = "tooling")]
mod reflection;
#[cfg(test)]
mod tests;
mod text;

pub use check::{float_fits, float_outside, int_outside};
pub use text::ParseError;

/// One dimension of a tensor type.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Dim {
    /// A fixed size.
    Static(i64),
    /// A size named by a symbol: every dimension with the same name must agree in one call.
    Symbolic(String),
    /// Any size.
    Unknown,
}

/// The type of a parameter or result.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Type {
    /// Anything.
    Any,
    /// A scalar: `bool`, `i8`..`i64`, `u8`..`u64`, `f16`, `bf16`, `f32`, `f64`.
    Scalar(DataType),
    /// A string.
    Str,
    /// A tensor.
    Tensor {
        /// The element type; `None` accepts any.
        dtype: Option<DataType>,
        /// The dimensions; `None` is an unknown rank.
        dims: Option<Vec<Dim>>,
        /// True when the callee needs C-contiguous data (strided arguments are copied).
        contiguous: bool,
    },
    /// A shape with `ndim` dimensions (`None`: any).
    Shape(Option<u32>),
    /// A tuple with one type per slot.
    Tuple(Vec<Type>),
    /// A list of any length whose items share one type (passed as a tuple).
    List(Box<Type>),
    /// A structure with named slots, passed as a tuple in sorted key order.
    Dict(Vec<(String, Type)>),
    /// An opaque object.
    Object,
}

/// A function's parameters (names and types) and result type.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Signature {
    /// The parameters in order.
    pub params: Vec<(String, Type)>,
    /// The result.
    pub result: Type,
}

impl Type {
    /// A tensor type; `dims` of `None` is an unknown rank.
    pub fn tensor(dims: Option<Vec<Dim>>, dtype: Option<DataType>) -> Type {
        Type::Tensor { dtype, dims, contiguous: false }
    }

    /// A dict type; slots are sorted by key, as they are passed.
    pub fn dict(mut slots: Vec<(String, Type)>) -> Type {
        slots.sort_by(|a, b| a.0.cmp(&b.0));
        Type::Dict(slots)
    }
}

impl Signature {
    /// The parameter names, in order.
    pub fn param_names(&self) -> impl Iterator<Item = &str> {
        self.params.iter().map(|(n, _)| n.as_str())
    }
}

/// How deeply types may nest (bounds the recursion of the parser, the binary decoder, printing
/// and checking on hostile input); the verifier rejects deeper types.
pub const MAX_TYPE_DEPTH: usize = 64;

/// The refusal of a type deeper than [`MAX_TYPE_DEPTH`] (the verifier's and the file reader's).
pub(crate) fn types_too_deep() -> String {
    format!("types nest more than {MAX_TYPE_DEPTH} deep")
}

/// The refusal of a negative static dimension (the verifier's and the file writer's).
pub(crate) fn negative_dimension(n: i64) -> String {
    format!("tensor dimension {n} is negative")
}
