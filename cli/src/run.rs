//! `relaxvm run`: command-line arguments to values, results to text and `.npy`.

use super::error::CliError;
use super::io;
use crate::npy;
use relaxvm::format::NativeLibraries;
use relaxvm::{DataType, Shape, Tensor, Type, Value};
use std::path::{Path, PathBuf};

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
            "npy" => return Ok(Value::Tensor(load_npy(rest)?)),
            "shape" => {
                let dims: Result<Vec<i64>, _> =
                    rest.split(',').map(str::trim).filter(|d| !d.is_empty()).map(str::parse).collect();
                return dims.map(|d| Value::Shape(Shape::from(d))).map_err(|_| bad("a shape like shape:32,16"));
            }
            _ => {}
        }
    }
    if s.ends_with(".npy") {
        return Ok(Value::Tensor(load_npy(s)?));
    }
    if let Ok(i) = s.parse::<i64>() {
        return Ok(Value::Int(i));
    }
    if let Ok(x) = s.parse::<f64>() {
        return Ok(Value::Float(x));
    }
    Ok(Value::str(s))
}

/// Parses one argument for a parameter of type `t`: an explicit prefix (`int:5`) wins, then
/// the type decides (a `str` parameter takes `5` as a string, a float scalar takes `2` as
/// 2.0, a tensor takes a path as a `.npy` file, a shape takes `32,16`); anything else is read
/// as [`parse_arg`] reads it. The VM then checks the value against the signature.
pub fn parse_arg_as(s: &str, t: &Type) -> Result<Value, CliError> {
    let prefixed =
        s.split_once(':').is_some_and(|(kind, _)| matches!(kind, "int" | "float" | "bool" | "str" | "npy" | "shape"));
    if prefixed {
        return parse_arg(s);
    }
    let bad = |what: &str| CliError::new(format!("argument {s:?} is not {what} (the parameter's type is {t})"));
    match t {
        Type::Str => Ok(Value::str(s)),
        Type::Scalar(DataType::Bool) => s.parse().map(Value::Bool).map_err(|_| bad("true or false")),
        Type::Scalar(d) if d.is_float() => s.parse().map(Value::Float).map_err(|_| bad("a number")),
        Type::Scalar(_) => s.parse().map(Value::Int).map_err(|_| bad("an integer")),
        Type::Tensor { .. } => Ok(Value::Tensor(load_npy(s)?)),
        Type::Shape(_) => parse_arg(&format!("shape:{s}")),
        Type::Any | Type::Object | Type::Tuple(_) | Type::List(_) | Type::Dict(_) => parse_arg(s),
    }
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
    io::write(path, &npy::to_bytes(&tensor)?)
}

/// A tensor from a `.npy` file (a regular file within the input size limit).
fn load_npy(path: &str) -> Result<Tensor, CliError> {
    npy::from_bytes(&io::read(Path::new(path))?).map_err(|e| CliError::new(format!("{path}: {e}")))
}

/// What `run`, `profile` and `trace` call: the executable at `input` (after checking that no
/// path of `outputs` is one of the inputs), the function to call and its arguments.
pub fn prepare_call(
    input: &Path,
    named: Option<&str>,
    args: &[String],
    inputs: &[PathBuf],
    outputs: &[Option<&Path>],
    native: &NativeArgs,
) -> Result<(relaxvm::Executable, String, Vec<Value>), CliError> {
    for out in outputs.iter().flatten() {
        let mut all = vec![input];
        all.extend(inputs.iter().map(PathBuf::as_path));
        io::check_output(out, &all)?;
    }
    let exe = io::read_executable(input, false, io::Native::Open(native.consent()))?;
    let func = function_to_call(&exe, named, input)?;
    let args = call_args(&exe, &func, args, inputs)?;
    Ok((exe, func, args))
}

/// Which native libraries `run`, `profile` and `trace` may open (run the code of).
#[derive(Debug, Default, clap::Args)]
pub struct NativeArgs {
    /// Allow opening the native libraries a .rvx references when they are this file, or lie
    /// directly in this folder (repeatable). Opening a library runs its code; without this, a
    /// .rvx that references libraries is refused. A .so given as PROG is allowed by itself.
    #[arg(long = "allow-native", value_name = "PATH")]
    allow: Vec<PathBuf>,
    /// Allow opening any native library the .rvx references (for files you trust as much as
    /// the libraries).
    #[arg(long = "allow-native-any", conflicts_with = "allow")]
    any: bool,
}

impl NativeArgs {
    /// The consent these flags give.
    pub fn consent(&self) -> NativeLibraries {
        if self.any {
            NativeLibraries::AnyReferenced
        } else if self.allow.is_empty() {
            NativeLibraries::Refuse
        } else {
            NativeLibraries::Allow(self.allow.clone())
        }
    }
}

/// How `profile` and `trace` name the call they make.
#[derive(Debug, clap::Args)]
pub struct CallArgs {
    /// The executable (.rvx, text form, or a TVM .so).
    input: PathBuf,
    /// The function to call [default: the entry function].
    #[arg(long = "function", value_name = "F")]
    func: Option<String>,
    /// An argument like those of `run` (int:3, shape:2,3, npy:x.npy...); repeatable, in order.
    #[arg(long = "arg", value_name = "ARG", allow_hyphen_values = true)]
    args: Vec<String>,
    /// A .npy file passed as the next argument after the --arg ones (repeatable, in order).
    #[arg(long = "input", value_name = "FILE")]
    inputs: Vec<PathBuf>,
    #[command(flatten)]
    native: NativeArgs,
}

impl CallArgs {
    /// The executable, function and arguments ([`prepare_call`]).
    pub fn prepare(&self, outputs: &[Option<&Path>]) -> Result<(relaxvm::Executable, String, Vec<Value>), CliError> {
        prepare_call(&self.input, self.func.as_deref(), &self.args, &self.inputs, outputs, &self.native)
    }
}

/// The function a command calls: the one named, else the executable's entry function.
fn function_to_call(exe: &relaxvm::Executable, named: Option<&str>, input: &Path) -> Result<String, CliError> {
    match named.or_else(|| exe.entry()) {
        Some(f) if exe.func(f).is_some_and(|i| i.kind == relaxvm::FuncKind::Bytecode) => Ok(f.to_string()),
        Some(f) => {
            let names = exe.bytecode_function_names();
            let hint = match exe.entry() {
                // `relaxvm run prog.rvx 3 4`: the entry function's arguments, without its name.
                Some(entry) if named.is_some() => {
                    format!(
                        "; to pass {f:?} to the entry function, name it first: relaxvm run {} {entry} {f} ...",
                        input.display()
                    )
                }
                _ => String::new(),
            };
            Err(CliError::new(format!(
                "{}: unknown function {f:?}; its functions are: {}{hint}",
                input.display(),
                names.join(", ")
            )))
        }
        None => Err(CliError::new(format!(
            "{}: no function named and no entry function (define main, or set one with .entry or link --entry)",
            input.display()
        ))),
    }
}

/// The arguments of a call to `func`: `args` read as its signature's parameter types say (or
/// by their prefix without one), then each `.npy` file of `inputs`.
fn call_args(
    exe: &relaxvm::Executable,
    func: &str,
    args: &[String],
    inputs: &[std::path::PathBuf],
) -> Result<Vec<Value>, CliError> {
    // A signature says how to read each argument; invoke checks them against it.
    let types = exe.func(func).and_then(|f| f.signature.as_ref()).map(|s| &s.params);
    args.iter()
        .enumerate()
        .map(|(i, s)| match types.and_then(|t| t.get(i)) {
            Some((_, t)) => parse_arg_as(s, t),
            None => parse_arg(s),
        })
        .chain(inputs.iter().map(|p| parse_arg(&format!("npy:{}", p.display()))))
        .collect()
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
        assert_eq!(
            format!("{:?}", parse_arg("shape:1,x").expect_err("an error")),
            r#"CliError("argument \"shape:1,x\" is not a shape like shape:32,16")"#
        );
        assert!(parse_arg("/nonexistent/x.npy").unwrap_err().to_string().contains("/nonexistent/x.npy"));
    }

    #[test]
    fn arguments_read_as_the_signature_says() {
        let t = |s: &str| s.parse::<Type>().unwrap();
        assert_eq!(parse_arg_as("5", &t("str")).unwrap().as_str().unwrap(), "5");
        assert!(matches!(parse_arg_as("2", &t("f32")).unwrap(), Value::Float(x) if x == 2.0));
        assert!(matches!(parse_arg_as("2", &t("i8")).unwrap(), Value::Int(2)));
        assert!(matches!(parse_arg_as("true", &t("bool")).unwrap(), Value::Bool(true)));
        assert_eq!(parse_arg_as("3, 4", &t("shape<2>")).unwrap().as_shape().unwrap().dims(), &[3, 4]);
        assert!(matches!(parse_arg_as("int:7", &t("str")).unwrap(), Value::Int(7)), "a prefix wins");
        assert!(matches!(parse_arg_as("7", &t("any")).unwrap(), Value::Int(7)));
        let e = parse_arg_as("x", &t("i64")).unwrap_err().to_string();
        assert!(e.contains("not an integer") && e.contains("type is i64"), "{e}");
        assert!(format!("{:?}", parse_arg_as("/nonexistent/x", &t("tensor<*, f32>")).expect_err("an error"))
            .starts_with(r#"CliError("#));
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
