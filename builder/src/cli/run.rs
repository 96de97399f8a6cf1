//! `relaxvm run`: command-line arguments to values, results to text and `.npy`.

use super::error::CliError;
use crate::npy;
use relaxvm::{Shape, Tensor, Value};
use std::path::Path;

/// Parses one argument of `relaxvm run`:
///
/// * `int:5`, `float:2`, `bool:true`, `str:text`, `shape:32,16`, `npy:path` say the type;
/// * otherwise a path ending in `.npy` is loaded as a tensor, an integer is an int, a number
///   is a float, and anything else is a string.
pub fn parse_arg(s: &str) -> Result<Value, CliError> {
    let bad = |what: &str| CliError::new(format!("argument {s:?} is not {what}"));
    if let Some((kind, rest)) = s.split_once(':') {
        match kind {
            "int" => return rest.parse().map(Value::Int).map_err(|_| bad("an integer")),
            "float" => return rest.parse().map(Value::Float).map_err(|_| bad("a float")),
            "bool" => return rest.parse().map(Value::Bool).map_err(|_| bad("true or false")),
            "str" => return Ok(Value::str(rest)),
            "npy" => return Ok(Value::Tensor(npy::load(rest)?)),
            "shape" => {
                let dims: Result<Vec<i64>, _> =
                    rest.split(',').map(str::trim).filter(|d| !d.is_empty()).map(str::parse).collect();
                return dims.map(|d| Value::Shape(Shape::from(d))).map_err(|_| bad("a shape like shape:32,16"));
            }
            _ => {}
        }
    }
    if s.ends_with(".npy") {
        return Ok(Value::Tensor(npy::load(s)?));
    }
    if let Ok(i) = s.parse::<i64>() {
        return Ok(Value::Int(i));
    }
    if let Ok(x) = s.parse::<f64>() {
        return Ok(Value::Float(x));
    }
    Ok(Value::str(s))
}

/// Saves a result as `.npy`: tensors as they are, shapes as int64 vectors, scalars as
/// zero-dimensional arrays.
pub fn save_result(v: &Value, path: &Path) -> Result<(), CliError> {
    let tensor = match v {
        Value::Tensor(t) => t.clone(),
        Value::Int(i) => Tensor::scalar(*i),
        Value::Float(x) => Tensor::scalar(*x),
        Value::Bool(b) => Tensor::scalar(*b),
        Value::Shape(s) => Tensor::from_vec([s.len() as i64], s.dims().to_vec())?,
        other => {
            return Err(CliError::new(format!(
                "the result is a {}; only tensors, shapes, ints, floats and bools can be saved as .npy",
                other.type_name()
            )))
        }
    };
    npy::save(&tensor, path)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arguments() {
        assert!(matches!(parse_arg("-5").unwrap(), Value::Int(-5)));
        assert!(matches!(parse_arg("2.5").unwrap(), Value::Float(x) if x == 2.5));
        assert!(matches!(parse_arg("float:2").unwrap(), Value::Float(x) if x == 2.0));
        assert!(matches!(parse_arg("bool:true").unwrap(), Value::Bool(true)));
        assert_eq!(parse_arg("hello").unwrap().as_str().unwrap(), "hello");
        assert_eq!(parse_arg("str:5").unwrap().as_str().unwrap(), "5");
        assert_eq!(parse_arg("a:b").unwrap().as_str().unwrap(), "a:b");
        assert_eq!(parse_arg("shape:32, 16").unwrap().as_shape().unwrap().dims(), &[32, 16]);
        assert_eq!(parse_arg("shape:").unwrap().as_shape().unwrap().dims(), &[] as &[i64]);
        assert!(parse_arg("int:x").unwrap_err().to_string().contains("not an integer"));
        assert!(parse_arg("shape:1,x").is_err());
        assert!(parse_arg("/nonexistent/x.npy").unwrap_err().to_string().contains("/nonexistent/x.npy"));
    }

    #[test]
    fn results_to_npy() {
        let dir = std::env::temp_dir().join(format!("relaxvm-cli-run-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let p = dir.join("r.npy");
        save_result(&Value::Shape(Shape::from([32, 16])), &p).unwrap();
        assert_eq!(npy::load(&p).unwrap().to_vec::<i64>().unwrap(), vec![32, 16]);
        save_result(&Value::Float(1.5), &p).unwrap();
        assert_eq!(npy::load(&p).unwrap().scalar_f64(), Some(1.5));
        assert!(save_result(&Value::str("x"), &p).unwrap_err().to_string().contains("the result is a str"));
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
