//! `relaxvm.types` printed by the VM's printer: each Python type describes itself as a tuple
//! naming its production of the type grammar and holding its parts (`("list", item)`), a part
//! being such a tuple or a type's text form; this converts that to a `relaxvm::Type`, whose
//! `Display` is the one printer of the grammar (`as_text()` prints signatures with it too).

use crate::int_arg::extract_int;
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::{PyList, PyString, PyTuple};
use relaxvm::types::MAX_TYPE_DEPTH;
use relaxvm::{DataType, Dim, Signature, Type};

/// The type `spec` describes, `depth` levels inside the outermost.
fn to_type(spec: &Bound<'_, PyAny>, depth: usize) -> PyResult<Type> {
    if depth > MAX_TYPE_DEPTH {
        // Deeper types are refused by the parser and the verifier; the bound also keeps this
        // recursion within the stack.
        return Err(PyValueError::new_err(format!("types nest at most {MAX_TYPE_DEPTH} deep")));
    }
    if let Ok(text) = spec.cast::<PyString>() {
        let text = text.to_cow()?;
        return text.parse::<Type>().map_err(|e| PyValueError::new_err(format!("invalid type {text:?}: {e}")));
    }
    let spec = spec.cast::<PyTuple>()?;
    let form: String = spec.get_item(0)?.extract()?;
    let part = |i: usize| spec.get_item(i);
    Ok(match form.as_str() {
        "any" => Type::Any,
        "object" => Type::Object,
        "str" => Type::Str,
        "scalar" => Type::Scalar(dtype(&part(1)?)?),
        "tensor" => {
            let dims = part(1)?;
            let dims = if dims.is_none() {
                None
            } else {
                let dims = dims.cast::<PyTuple>()?;
                Some(dims.iter().map(|d| dim(&d)).collect::<PyResult<Vec<_>>>()?)
            };
            let dtype = part(2)?;
            let dtype = if dtype.is_none() { None } else { Some(self::dtype(&dtype)?) };
            Type::Tensor { dtype, dims, contiguous: part(3)?.extract()? }
        }
        "shape" => Type::Shape(part(1)?.extract()?),
        "tuple" => Type::Tuple(part(1)?.try_iter()?.map(|t| to_type(&t?, depth + 1)).collect::<PyResult<_>>()?),
        "list" => Type::List(Box::new(to_type(&part(1)?, depth + 1)?)),
        // Sorted as they are passed (and as the parser reads them), whatever order was given.
        "dict" => Type::dict(distinct(named(&part(1)?, depth + 1)?, "dict keys")?),
        other => return Err(PyValueError::new_err(format!("unknown form of type {other:?}"))),
    })
}

/// An element type by the short name `relaxvm.types` keeps (`"f32"`, `"bool"`).
fn dtype(name: &Bound<'_, PyAny>) -> PyResult<DataType> {
    let name: String = name.extract()?;
    name.parse().map_err(|e: relaxvm::Error| PyValueError::new_err(e.to_string()))
}

/// A tensor dimension: an int fixed, a str a symbol, `None` any. Checked as the parser checks
/// them (whatever path the description came by: an attribute set after construction, a
/// subclass's `_spec`), so that a type never prints as text that reads as another type.
fn dim(d: &Bound<'_, PyAny>) -> PyResult<Dim> {
    Ok(if d.is_none() {
        Dim::Unknown
    } else if let Ok(s) = d.cast::<PyString>() {
        let s = s.to_cow()?;
        if !relaxvm::text::is_plain_name(&s) {
            return Err(PyValueError::new_err(format!("a symbolic dimension is a plain name, got {s:?}")));
        }
        Dim::Symbolic(s.into_owned())
    } else {
        let n = extract_int::<i64>(d, &|| "a fixed dimension".to_string())?;
        if n < 0 {
            return Err(PyValueError::new_err(format!("a fixed dimension is non-negative, got {n}")));
        }
        Dim::Static(n)
    })
}

/// `(name, spec)` pairs as names and types.
fn named(pairs: &Bound<'_, PyAny>, depth: usize) -> PyResult<Vec<(String, Type)>> {
    pairs
        .try_iter()?
        .map(|pair| {
            let (name, spec): (String, Bound<'_, PyAny>) = pair?.extract()?;
            Ok((name, to_type(&spec, depth)?))
        })
        .collect()
}

/// `pairs` when their names are distinct (`what` names them in the error).
fn distinct(pairs: Vec<(String, Type)>, what: &str) -> PyResult<Vec<(String, Type)>> {
    let mut seen = std::collections::HashSet::new();
    if let Some((name, _)) = pairs.iter().find(|(name, _)| !seen.insert(name.as_str())) {
        return Err(PyValueError::new_err(format!("{what} must be distinct, got {name:?} twice")));
    }
    Ok(pairs)
}

/// The text form of the type `spec` describes (see the module's documentation).
#[pyfunction]
pub fn _type_text(spec: &Bound<'_, PyAny>) -> PyResult<String> {
    Ok(to_type(spec, 0)?.to_string())
}

/// The text form of the signature with `params` (`(name, spec)` pairs) and `result`.
#[pyfunction]
pub fn _signature_text(params: &Bound<'_, PyList>, result: &Bound<'_, PyAny>) -> PyResult<String> {
    let sig = Signature { params: distinct(named(params, 0)?, "parameter names")?, result: to_type(result, 0)? };
    Ok(sig.to_string())
}
