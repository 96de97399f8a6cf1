//! Scalar arithmetic and comparisons on ints and floats: what loop counters and shape
//! computations use, so they are on the hot path.
//!
//! `vm.builtin.int.{add,sub,mul,floordiv,floormod,min,max}` take two ints (bools count as 0/1)
//! and return an int; overflow and division by zero are arithmetic errors. `floordiv` and
//! `floormod` round toward negative infinity, as Python's `//` and `%` do.
//! `vm.builtin.int.{lt,le,gt,ge,eq,ne}` return a bool.
//!
//! `vm.builtin.float.{add,sub,mul,div,min,max}` take two floats (ints and bools convert) and
//! return a float with IEEE semantics (`1.0 / 0.0` is `inf`, as in TVM's generated code);
//! `vm.builtin.float.{lt,le,gt,ge,eq,ne}` return a bool (false for NaN, except `ne`).
//!
//! The fast path of each is one slice pattern on `[Value::Int, Value::Int]` (or floats): no
//! allocation and no formatting unless the call fails.

use crate::table::{builtin, Builtin};
use relaxvm::{Cost, Error, IntOp, PackedFunc, Result, Value};

/// `int_builtin!("vm.builtin.int.x", Op)`: the builtin computing [`IntOp`] `Op` (a
/// [`relaxvm::packed::BinaryFn`] marked with its operation, which the interpreter runs inline
/// for two ints), constant-time.
macro_rules! int_builtin {
    ($name:literal, $op:ident) => {{
        fn f(x: &Value, y: &Value) -> Result<Value> {
            if let (Value::Int(a), Value::Int(b)) = (x, y) {
                if let Some(v) = IntOp::$op.apply(*a, *b) {
                    return Ok(v);
                }
            }
            int_slow($name, IntOp::$op, x, y)
        }
        Builtin {
            name: $name,
            make: |n| PackedFunc::binary(n, f).with_int_op(IntOp::$op),
            cost: Cost::Constant,
            specialize: None,
        }
    }};
}

/// The builtins of this module.
pub(crate) const BUILTINS: &[Builtin] = &[
    int_builtin!("vm.builtin.int.add", Add),
    int_builtin!("vm.builtin.int.sub", Sub),
    int_builtin!("vm.builtin.int.mul", Mul),
    int_builtin!("vm.builtin.int.floordiv", FloorDiv),
    int_builtin!("vm.builtin.int.floormod", FloorMod),
    int_builtin!("vm.builtin.int.min", Min),
    int_builtin!("vm.builtin.int.max", Max),
    int_builtin!("vm.builtin.int.lt", Lt),
    int_builtin!("vm.builtin.int.le", Le),
    int_builtin!("vm.builtin.int.gt", Gt),
    int_builtin!("vm.builtin.int.ge", Ge),
    int_builtin!("vm.builtin.int.eq", Eq),
    int_builtin!("vm.builtin.int.ne", Ne),
    builtin!("vm.builtin.float.add", binary float_add).constant_time(),
    builtin!("vm.builtin.float.sub", binary float_sub).constant_time(),
    builtin!("vm.builtin.float.mul", binary float_mul).constant_time(),
    builtin!("vm.builtin.float.div", binary float_div).constant_time(),
    builtin!("vm.builtin.float.min", binary float_min).constant_time(),
    builtin!("vm.builtin.float.max", binary float_max).constant_time(),
    builtin!("vm.builtin.float.lt", binary float_lt).constant_time(),
    builtin!("vm.builtin.float.le", binary float_le).constant_time(),
    builtin!("vm.builtin.float.gt", binary float_gt).constant_time(),
    builtin!("vm.builtin.float.ge", binary float_ge).constant_time(),
    builtin!("vm.builtin.float.eq", binary float_eq).constant_time(),
    builtin!("vm.builtin.float.ne", binary float_ne).constant_time(),
];

/// One operand of a scalar builtin, for the slow path.
fn scalar<T>(name: &str, v: &Value, i: usize, kind: &str, get: impl Fn(&Value) -> Option<T>) -> Result<T> {
    get(v).ok_or_else(|| {
        let found = v.describe();
        Error::type_mismatch(
            format!("{kind} as argument {i} ({}) of {name}", if i == 0 { "lhs" } else { "rhs" }),
            found,
        )
    })
}

/// The slow path of an int builtin: bools as ints, type errors, and the error for a failed
/// operation.
#[cold]
#[inline(never)]
fn int_slow(name: &str, op: IntOp, x: &Value, y: &Value) -> Result<Value> {
    let int = |v: &Value| match v {
        Value::Int(i) => Some(*i),
        Value::Bool(b) => Some(i64::from(*b)),
        _ => None,
    };
    let (a, b) = (scalar(name, x, 0, "int", int)?, scalar(name, y, 1, "int", int)?);
    let symbol = op.symbol();
    op.apply(a, b).ok_or_else(|| {
        if b == 0 && matches!(op, IntOp::FloorDiv | IntOp::FloorMod) {
            Error::arithmetic(format!("{name}: division by zero ({a} {symbol} {b})"))
        } else {
            Error::arithmetic(format!("{name}: {a} {symbol} {b} overflows int64"))
        }
    })
}

/// The slow path of a float builtin: ints and bools as floats, and type errors.
#[cold]
#[inline(never)]
fn float_slow(name: &str, x: &Value, y: &Value, op: impl Fn(f64, f64) -> Value) -> Result<Value> {
    let float = |v: &Value| match v {
        Value::Float(f) => Some(*f),
        Value::Int(i) => Some(*i as f64),
        Value::Bool(b) => Some(f64::from(u8::from(*b))),
        _ => None,
    };
    Ok(op(scalar(name, x, 0, "float", float)?, scalar(name, y, 1, "float", float)?))
}

/// Defines a float builtin (a [`relaxvm::packed::BinaryFn`]) from `|a, b| -> Value`.
macro_rules! float_op {
    ($fname:ident, $name:literal, |$a:ident, $b:ident| $body:expr) => {
        #[doc = concat!("`", $name, "`.")]
        fn $fname(x: &Value, y: &Value) -> Result<Value> {
            if let (Value::Float($a), Value::Float($b)) = (x, y) {
                let ($a, $b) = (*$a, *$b);
                return Ok($body);
            }
            float_slow($name, x, y, |$a, $b| $body)
        }
    };
}

float_op!(float_add, "vm.builtin.float.add", |a, b| Value::Float(a + b));
float_op!(float_sub, "vm.builtin.float.sub", |a, b| Value::Float(a - b));
float_op!(float_mul, "vm.builtin.float.mul", |a, b| Value::Float(a * b));
float_op!(float_div, "vm.builtin.float.div", |a, b| Value::Float(a / b));
float_op!(float_min, "vm.builtin.float.min", |a, b| Value::Float(if a.is_nan() || b.is_nan() {
    f64::NAN
} else {
    a.min(b)
}));
float_op!(float_max, "vm.builtin.float.max", |a, b| Value::Float(if a.is_nan() || b.is_nan() {
    f64::NAN
} else {
    a.max(b)
}));
float_op!(float_lt, "vm.builtin.float.lt", |a, b| Value::Bool(a < b));
float_op!(float_le, "vm.builtin.float.le", |a, b| Value::Bool(a <= b));
float_op!(float_gt, "vm.builtin.float.gt", |a, b| Value::Bool(a > b));
float_op!(float_ge, "vm.builtin.float.ge", |a, b| Value::Bool(a >= b));
float_op!(float_eq, "vm.builtin.float.eq", |a, b| Value::Bool(a == b));
float_op!(float_ne, "vm.builtin.float.ne", |a, b| Value::Bool(a != b));

#[cfg(test)]
mod tests {
    use super::*;
    use relaxvm::{CallCtx, ErrorKind};

    fn call(name: &str, a: Value, b: Value) -> Result<Value> {
        let f = BUILTINS.iter().find(|f| f.name == name).expect("known builtin");
        f.packed().call(&mut CallCtx::detached(), &[a, b])
    }

    fn int(name: &str, a: i64, b: i64) -> Result<i64> {
        call(&format!("vm.builtin.int.{name}"), Value::Int(a), Value::Int(b)).map(|v| v.as_int().unwrap())
    }

    #[test]
    fn python_floor_semantics() {
        for (a, b) in [
            (7, 2),
            (-7, 2),
            (7, -2),
            (-7, -2),
            (6, 3),
            (-6, 3),
            (0, -5),
            (i64::MIN, 1),
            (i64::MIN, -2),
            (i64::MAX, -1),
        ] {
            let q = a.div_euclid(b) - if b < 0 && a.rem_euclid(b) != 0 { 1 } else { 0 };
            assert_eq!(int("floordiv", a, b).unwrap(), q, "{a} // {b}");
            assert_eq!(int("floormod", a, b).unwrap(), a - q * b, "{a} % {b}");
        }
        assert_eq!(int("floordiv", -7, 2).unwrap(), -4);
        assert_eq!(int("floormod", -7, 2).unwrap(), 1);
        assert_eq!(int("floormod", 7, -2).unwrap(), -1);
        assert_eq!(int("floormod", i64::MIN, -1).unwrap(), 0);
    }

    #[test]
    fn overflow_and_division_by_zero_are_errors() {
        for (op, a, b) in [("add", i64::MAX, 1), ("sub", i64::MIN, 1), ("mul", i64::MAX, 2), ("floordiv", i64::MIN, -1)]
        {
            let e = int(op, a, b).unwrap_err();
            assert!(matches!(e.kind(), ErrorKind::Arithmetic(_)), "{e}");
            assert!(
                e.to_string().contains(&format!("vm.builtin.int.{op}")) && e.to_string().contains("overflows"),
                "{e}"
            );
        }
        for op in ["floordiv", "floormod"] {
            let e = int(op, 1, 0).unwrap_err().to_string();
            assert!(e.contains("division by zero") && e.contains(op), "{e}");
        }
    }

    #[test]
    fn ints_compare_and_accept_bools() {
        assert_eq!(int("add", 2, 3).unwrap(), 5);
        assert_eq!(int("min", -2, 3).unwrap(), -2);
        assert_eq!(int("max", -2, 3).unwrap(), 3);
        let cmp = |op: &str, a, b| {
            call(&format!("vm.builtin.int.{op}"), Value::Int(a), Value::Int(b)).unwrap().truthy().unwrap()
        };
        assert!(
            cmp("lt", 1, 2)
                && cmp("le", 2, 2)
                && cmp("gt", 3, 2)
                && cmp("ge", 2, 2)
                && cmp("eq", 2, 2)
                && cmp("ne", 1, 2)
        );
        assert!(!cmp("lt", 2, 2));
        assert_eq!(call("vm.builtin.int.add", Value::Bool(true), Value::Int(1)).unwrap().as_int().unwrap(), 2);
        let e = call("vm.builtin.int.add", Value::Float(1.0), Value::Int(1)).unwrap_err().to_string();
        assert!(e.contains("vm.builtin.int.add") && e.contains("expected int") && e.contains("found float 1.0"), "{e}");
        let f = BUILTINS.iter().find(|f| f.name == "vm.builtin.int.add").unwrap().packed();
        let e = f.call(&mut CallCtx::detached(), &[Value::Int(1)]).unwrap_err();
        assert!(matches!(e.kind(), ErrorKind::Arity { .. }), "{e}");
    }

    #[test]
    fn every_scalar_builtin_is_binary_and_names_itself_in_errors() {
        for b in BUILTINS {
            let f = b.packed();
            let direct = f.as_binary().expect("a binary fast path");
            let e = direct(&Value::str("x"), &Value::Int(1)).unwrap_err().to_string();
            assert!(e.contains(&format!("of {}", b.name)) && e.contains("found str"), "{}: {e}", b.name);
            let e = f.call(&mut CallCtx::detached(), &[Value::Int(1)]).unwrap_err().to_string();
            assert!(e.contains(b.name) && e.contains("expected 2"), "{e}");
        }
    }

    #[test]
    fn floats_follow_ieee() {
        let f = |op: &str, a: f64, b: f64| {
            call(&format!("vm.builtin.float.{op}"), Value::Float(a), Value::Float(b)).unwrap()
        };
        assert_eq!(f("add", 1.5, 2.0).as_float().unwrap(), 3.5);
        assert_eq!(f("sub", 1.5, 2.0).as_float().unwrap(), -0.5);
        assert_eq!(f("mul", 1.5, 2.0).as_float().unwrap(), 3.0);
        assert_eq!(f("div", 1.0, 0.0).as_float().unwrap(), f64::INFINITY);
        assert!(f("div", 0.0, 0.0).as_float().unwrap().is_nan());
        assert!(f("max", f64::NAN, 0.0).as_float().unwrap().is_nan());
        assert_eq!(f("min", -1.0, 0.0).as_float().unwrap(), -1.0);
        assert!(!f("lt", f64::NAN, 1.0).truthy().unwrap());
        assert!(!f("eq", f64::NAN, f64::NAN).truthy().unwrap());
        assert!(f("ne", f64::NAN, f64::NAN).truthy().unwrap());
        assert!(
            f("le", 1.0, 1.0).truthy().unwrap()
                && f("ge", 1.0, 1.0).truthy().unwrap()
                && f("gt", 2.0, 1.0).truthy().unwrap()
        );
        assert_eq!(call("vm.builtin.float.add", Value::Int(1), Value::Float(0.5)).unwrap().as_float().unwrap(), 1.5);
        assert_eq!(
            format!("{:?}", call("vm.builtin.float.add", Value::str("1"), Value::Float(0.5)).expect_err("an error")),
            r#"Type { expected: "float as argument 0 (lhs) of vm.builtin.float.add", found: "str" }"#
        );
    }
}
