//! Rendering values as TVM's `render_object` does (python/tvm/relax/op/base.py), and Python's
//! `str.format`, for `relax.run.print` and `relax.run.assert_op`.
//!
//! `render_object` gives `str(tensor.numpy())` for tensors, `(a, b)` for tuples (no trailing
//! comma, even for one item) and `str(value)` otherwise. numpy's array printing is reproduced
//! for the common cases: element padding, float "maxprec" formatting with the positional or
//! scientific switch, `True`/`False` padding and summarization beyond 1000 elements; numpy's
//! wrapping of rows longer than 75 characters is not.

use super::elements::{elements, Raw};
use crate::args::value_err;
use half::{bf16, f16};
use relaxvm::{dispatch_dtype, Error, Result, Tensor, Value};
use std::collections::HashMap;
use std::sync::Arc;

/// The most text one rendering makes: a tuple of shared tuples (`v = (v, v)` nested 40 deep)
/// unfolds into exponentially many items, so the text, not the distinct values, is bounded.
pub(crate) const MAX_RENDERED_BYTES: usize = 1 << 26;

/// The deepest tuple nesting rendered (Python's `render_object` recurses too, and stops at its
/// recursion limit, about 1000): the walk is recursive, so this also bounds the native stack.
pub(crate) const MAX_RENDER_DEPTH: usize = 256;

/// `render_object(v)`, failing when the text would exceed [`MAX_RENDERED_BYTES`] or the tuples
/// nest deeper than [`MAX_RENDER_DEPTH`].
pub(crate) fn render(name: &str, v: &Value) -> Result<String> {
    let mut walk = Walk { budget: MAX_RENDERED_BYTES, memo: HashMap::new() };
    render_within(name, v, 0, &mut walk)
}

/// The text of a tuple up to this long is kept, by the tuple's address, and reused where the
/// tuple appears again: a shared tuple's items are rendered once, and the work of a longer
/// text is bounded by the budget it is charged against.
const MEMO_TEXT_BYTES: usize = 4096;

/// The state of one rendering.
struct Walk {
    /// Bytes of text left (counted down).
    budget: usize,
    /// Short tuple texts by tuple address (the tuples live as long as the rendering).
    memo: HashMap<usize, String>,
}

/// [`render`] at nesting `depth`.
fn render_within(name: &str, v: &Value, depth: usize, walk: &mut Walk) -> Result<String> {
    let text = match v {
        Value::Tuple(_) if depth >= MAX_RENDER_DEPTH => {
            return Err(value_err(name, format!("cannot render tuples nested more than {MAX_RENDER_DEPTH} deep")))
        }
        Value::Tuple(items) => {
            let key = Arc::as_ptr(items) as usize;
            if let Some(text) = walk.memo.get(&key) {
                let text = text.clone();
                charge(name, &mut walk.budget, text.len())?;
                return Ok(text);
            }
            let mut out = String::from("(");
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                out.push_str(&render_within(name, item, depth + 1, walk)?);
            }
            out.push(')');
            // The items charged their own text; the brackets and separators are charged here.
            charge(name, &mut walk.budget, 2 * items.len().max(1))?;
            if out.len() <= MEMO_TEXT_BYTES {
                walk.memo.insert(key, out.clone());
            }
            return Ok(out);
        }
        Value::Tensor(t) => render_tensor(name, t)?,
        Value::Float(x) => py_float(*x),
        Value::Shape(s) => match s.len() {
            1 => format!("({},)", s[0]),
            _ => format!("({})", s.iter().map(i64::to_string).collect::<Vec<_>>().join(", ")),
        },
        other => other.to_string(),
    };
    charge(name, &mut walk.budget, text.len())?;
    Ok(text)
}

/// Takes `n` bytes from the rendering's budget, or fails when fewer are left.
fn charge(name: &str, budget: &mut usize, n: usize) -> Result<()> {
    *budget = budget.checked_sub(n).ok_or_else(|| {
        value_err(name, format!("the rendered values would exceed {MAX_RENDERED_BYTES} bytes of text"))
    })?;
    Ok(())
}

/// Python's `repr(float)`: shortest round-trip digits, scientific below 1e-4 and from 1e16.
pub(crate) fn py_float(x: f64) -> String {
    if x.is_nan() {
        return "nan".into();
    }
    if x.is_infinite() {
        return if x > 0.0 { "inf".into() } else { "-inf".into() };
    }
    let (digits, exp) = shortest_digits(x, |s| s.parse::<f64>().ok() == Some(x));
    let neg = if x.is_sign_negative() { "-" } else { "" };
    if (-4..16).contains(&exp) {
        format!("{neg}{}", positional(&digits, exp, true))
    } else {
        let mant = if digits.len() > 1 { format!("{}.{}", &digits[..1], &digits[1..]) } else { digits.clone() };
        format!("{neg}{mant}e{}{:02}", if exp < 0 { '-' } else { '+' }, exp.abs())
    }
}

/// The shortest decimal digits (no sign, no leading zeros) and decimal exponent of `|x|` that
/// `round_trips` accepts, as `d.ddd × 10^exp`.
fn shortest_digits(x: f64, round_trips: impl Fn(&str) -> bool) -> (String, i32) {
    let mut last = format!("{:.16e}", x.abs());
    for p in 0..17 {
        let s = format!("{:.p$e}", x.abs());
        if round_trips(&format!("{}{s}", if x.is_sign_negative() { "-" } else { "" })) {
            last = s;
            break;
        }
    }
    let (mant, exp) = last.split_once('e').unwrap_or((&last, "0"));
    let digits: String = mant.chars().filter(char::is_ascii_digit).collect();
    let digits = digits.trim_end_matches('0');
    let digits = if digits.is_empty() { "0".to_string() } else { digits.to_string() };
    (digits, exp.parse().unwrap_or(0))
}

/// `digits × 10^exp` written positionally; `py` adds Python's `.0` to integers, else numpy's `.`.
fn positional(digits: &str, exp: i32, py: bool) -> String {
    let point = exp + 1; // digits before the decimal point
    let (int, frac) = if point <= 0 {
        ("0".to_string(), format!("{}{digits}", "0".repeat((-point) as usize)))
    } else if point as usize >= digits.len() {
        (format!("{digits}{}", "0".repeat(point as usize - digits.len())), String::new())
    } else {
        (digits[..point as usize].to_string(), digits[point as usize..].to_string())
    };
    match (frac.is_empty(), py) {
        (true, true) => format!("{int}.0"),
        _ => format!("{int}.{frac}"),
    }
}

/// A float element type numpy formats with its own precision.
trait NpFloat: Raw {
    fn back(s: &str) -> Option<Self>;
}
impl NpFloat for f64 {
    fn back(s: &str) -> Option<Self> {
        s.parse().ok()
    }
}
impl NpFloat for f32 {
    fn back(s: &str) -> Option<Self> {
        s.parse().ok()
    }
}
impl NpFloat for f16 {
    fn back(s: &str) -> Option<Self> {
        s.parse::<f64>().ok().map(f16::from_f64)
    }
}
impl NpFloat for bf16 {
    fn back(s: &str) -> Option<Self> {
        s.parse::<f64>().ok().map(bf16::from_f64)
    }
}

/// Elements beyond which numpy summarizes an array, and the items it keeps at each edge.
const THRESHOLD: usize = 1000;
const EDGE: usize = 3;

fn render_tensor(name: &str, t: &Tensor) -> Result<String> {
    let cells: Vec<String> = match t.dtype() {
        relaxvm::DataType::F16 => float_cells::<f16>(name, t)?,
        relaxvm::DataType::BF16 => float_cells::<bf16>(name, t)?,
        relaxvm::DataType::F32 => float_cells::<f32>(name, t)?,
        relaxvm::DataType::F64 => float_cells::<f64>(name, t)?,
        relaxvm::DataType::Bool => {
            let v = elements::<bool>(name, t)?;
            let t_str = if v.contains(&false) { " True" } else { "True" };
            v.iter().map(|b| if *b { t_str.to_string() } else { "False".to_string() }).collect()
        }
        d => dispatch_dtype!(d, T => {
            let v = elements::<T>(name, t)?;
            let s: Vec<String> = v.iter().map(|x| x.to_string()).collect();
            let w = s.iter().map(String::len).max().unwrap_or(0);
            s.into_iter().map(|c| format!("{c:>w$}")).collect()
        }),
    };
    let dims: Vec<usize> = t.shape().iter().map(|d| *d as usize).collect();
    if dims.is_empty() {
        return cells.into_iter().next().map(|c| c.trim().to_string()).ok_or_else(|| value_err(name, "empty scalar"));
    }
    let summarize = cells.len() > THRESHOLD;
    let mut out = String::new();
    nest(&cells, &dims, 0, 0, summarize, &mut out);
    Ok(out)
}

/// numpy's nested brackets: rows on new lines indented by depth, blank lines between blocks.
fn nest(cells: &[String], dims: &[usize], depth: usize, base: usize, summarize: bool, out: &mut String) {
    let n = dims[depth];
    let stride: usize = dims[depth + 1..].iter().product();
    let shown: Vec<Option<usize>> = if summarize && n > 2 * EDGE {
        (0..EDGE).map(Some).chain([None]).chain((n - EDGE..n).map(Some)).collect()
    } else {
        (0..n).map(Some).collect()
    };
    out.push('[');
    let last = depth + 1 == dims.len();
    for (k, item) in shown.iter().enumerate() {
        if k > 0 {
            if last {
                out.push(' ');
            } else {
                out.push_str(&"\n".repeat(dims.len() - depth - 1));
                out.push_str(&" ".repeat(depth + 1));
            }
        }
        match item {
            None => out.push_str("..."),
            Some(i) if last => out.push_str(&cells[base + i]),
            Some(i) => nest(cells, dims, depth + 1, base + i * stride, summarize, out),
        }
    }
    out.push(']');
}

/// numpy's `FloatingFormat` (floatmode "maxprec", precision 8): every finite element with its
/// type's shortest digits (at most 8 after the point), aligned on the point; scientific when
/// the largest magnitude is at least 1e8, the smallest non-zero below 1e-4, or their ratio over
/// 1000.
fn float_cells<T: NpFloat>(name: &str, t: &Tensor) -> Result<Vec<String>> {
    let v: Vec<f64> = elements::<T>(name, t)?.into_iter().map(|x| x.to_f64()).collect();
    let finite: Vec<f64> = v.iter().copied().filter(|x| x.is_finite() && *x != 0.0).map(f64::abs).collect();
    let (min, max) = finite.iter().fold((f64::INFINITY, 0.0f64), |(lo, hi), x| (lo.min(*x), hi.max(*x)));
    let sci = !finite.is_empty() && (max >= 1e8 || min < 1e-4 || max / min > 1e3);
    let shortest = |x: f64| shortest_digits(x, |s| T::back(s).map(|b| b.to_f64()) == Some(x));
    let parts: Vec<(String, String, String)> = v
        .iter()
        .map(|&x| {
            if !x.is_finite() {
                let s = if x.is_nan() {
                    "nan"
                } else if x > 0.0 {
                    "inf"
                } else {
                    "-inf"
                };
                return (s.to_string(), String::new(), String::new());
            }
            let neg = if x.is_sign_negative() { "-" } else { "" };
            let (mut digits, mut exp) = if x == 0.0 { ("0".to_string(), 0) } else { shortest(x) };
            if sci {
                if digits.len() > 9 {
                    let r = format!("{:.8e}", x.abs());
                    let (m, e) = r.split_once('e').unwrap_or((&r, "0"));
                    digits = m.replace('.', "").trim_end_matches('0').to_string();
                    exp = e.parse().unwrap_or(exp);
                }
                let frac = digits.get(1..).unwrap_or("").to_string();
                let e = format!("e{}{:02}", if exp < 0 { '-' } else { '+' }, exp.abs());
                (format!("{neg}{}", &digits[..1]), frac, e)
            } else {
                let mut s = positional(&digits, exp, false);
                if s.split_once('.').is_some_and(|(_, f)| f.len() > 8) {
                    s = format!("{:.8}", x.abs());
                    s = s.trim_end_matches('0').to_string();
                }
                let (i, f) = s.split_once('.').unwrap_or((&s, ""));
                (format!("{neg}{i}"), f.to_string(), String::new())
            }
        })
        .collect();
    let finite_part = |p: &&(String, String, String)| p.0 != "nan" && !p.0.ends_with("inf");
    let wi = parts.iter().filter(finite_part).map(|p| p.0.len()).max().unwrap_or(0);
    let wf = parts.iter().filter(finite_part).map(|p| p.1.len()).max().unwrap_or(0);
    let we = parts.iter().map(|p| p.2.len()).max().unwrap_or(0);
    // numpy widens the integer part so that "nan" and "inf"/"-inf" fit (FloatingFormat.fillFormat).
    let wi = if !sci && parts.iter().any(|p| !finite_part(&p)) {
        let neginf = usize::from(v.contains(&f64::NEG_INFINITY));
        wi.max((3 + neginf).saturating_sub(wf + 1))
    } else {
        wi
    };
    Ok(parts
        .into_iter()
        .map(|(i, f, e)| {
            if i == "nan" || i.ends_with("inf") {
                // numpy right-aligns non-finite values to the full width.
                let full = wi + 1 + wf + we;
                format!("{i:>full$}")
            } else {
                if sci {
                    // Scientific fractions are zero-padded to a common length ("1.00000000e+00").
                    format!("{i:>wi$}.{f:0<wf$}{e:>we$}")
                } else {
                    format!("{i:>wi$}.{f:<wf$}{e:>we$}")
                }
            }
        })
        .collect())
}

/// Python's `format_str.format(*args)` for string arguments: `{}`, `{0}`, `{{`, `}}`, the `!s`
/// and `!r` conversions and string format specs (`[[fill]align][width][.precision]`).
pub(crate) fn py_format(name: &str, fmt: &str, args: &[String]) -> Result<String> {
    let err = |m: &str| value_err(name, m);
    let mut out = String::new();
    let mut chars = fmt.chars().peekable();
    let mut auto = 0usize;
    let (mut used_auto, mut used_manual) = (false, false);
    while let Some(c) = chars.next() {
        match c {
            '{' if chars.peek() == Some(&'{') => {
                chars.next();
                out.push('{');
            }
            '}' if chars.peek() == Some(&'}') => {
                chars.next();
                out.push('}');
            }
            '}' => return Err(err("Single '}' encountered in format string")),
            '{' => {
                let mut field = String::new();
                loop {
                    match chars.next() {
                        Some('}') => break,
                        Some('{') => return Err(err("nested replacement fields are not supported")),
                        Some(ch) => field.push(ch),
                        None => return Err(err("expected '}' before end of string")),
                    }
                }
                let (head, spec) = field.split_once(':').unwrap_or((&field, ""));
                let (key, conv) = head.split_once('!').unwrap_or((head, ""));
                let index = if key.is_empty() {
                    used_auto = true;
                    auto += 1;
                    auto - 1
                } else {
                    used_manual = true;
                    key.parse::<usize>().map_err(|_| err(&format!("unknown format field name {key:?}")))?
                };
                if used_auto && used_manual {
                    return Err(err("cannot switch from automatic field numbering to manual field specification"));
                }
                let arg = args.get(index).ok_or_else(|| {
                    Error::index(
                        format!("positional format arguments (in {name}: Replacement index {index} out of range)"),
                        index as i64,
                        args.len(),
                    )
                })?;
                let s = match conv {
                    "" | "s" => arg.clone(),
                    "r" => format!("'{}'", arg.replace('\\', "\\\\").replace('\'', "\\'")),
                    other => return Err(err(&format!("Unknown conversion specifier {other}"))),
                };
                out.push_str(&apply_spec(name, &s, spec)?);
            }
            c => out.push(c),
        }
    }
    Ok(out)
}

/// The widest field a format spec may ask for (16 MiB of padding).
const MAX_WIDTH: usize = 1 << 24;

/// A Python string format spec applied to `s`.
fn apply_spec(name: &str, s: &str, spec: &str) -> Result<String> {
    if spec.is_empty() {
        return Ok(s.to_string());
    }
    let chars: Vec<char> = spec.chars().collect();
    let is_align = |c: char| matches!(c, '<' | '>' | '^');
    let (fill, align, rest) = match chars.as_slice() {
        [f, a, ..] if is_align(*a) => (*f, *a, &chars[2..]),
        [a, ..] if is_align(*a) => (' ', *a, &chars[1..]),
        _ => (' ', '<', &chars[..]),
    };
    let rest: String = rest.iter().collect();
    let rest = rest.strip_suffix('s').unwrap_or(&rest);
    let (w, p) = rest.split_once('.').map_or((rest, None), |(w, p)| (w, Some(p)));
    let bad = || value_err(name, format!("Invalid format specifier '{spec}' for object of type 'str'"));
    let width: usize = if w.is_empty() { 0 } else { w.parse().map_err(|_| bad())? };
    // Padding is materialized: a width beyond any sensible message is refused before a huge
    // allocation (which would abort the process rather than fail).
    if width > MAX_WIDTH {
        return Err(value_err(name, format!("format width {width} in '{spec}' exceeds the limit of {MAX_WIDTH}")));
    }
    let mut s: String = s.to_string();
    if let Some(p) = p {
        let p: usize = p.parse().map_err(|_| bad())?;
        s = s.chars().take(p).collect();
    }
    let len = s.chars().count();
    if len >= width {
        return Ok(s);
    }
    let pad = width - len;
    let (l, r) = match align {
        '>' => (pad, 0),
        '^' => (pad / 2, pad - pad / 2),
        _ => (0, pad),
    };
    Ok(format!("{}{s}{}", fill.to_string().repeat(l), fill.to_string().repeat(r)))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `v = (v, v)` nested `n` deep around `leaf`: 2^n leaves unfolded, n + 1 tuples.
    fn doubled(n: usize, leaf: Value) -> Value {
        (0..n).fold(leaf, |v, _| Value::tuple(vec![v.clone(), v]))
    }

    #[test]
    fn shared_tuples_render_once_each_and_within_the_budget() {
        assert_eq!(render("p", &doubled(2, Value::Int(1))).unwrap(), "((1, 1), (1, 1))");
        // 2^20 leaves: 6 MiB of text, each distinct tuple rendered once.
        let text = render("p", &doubled(20, Value::Int(1))).unwrap();
        assert_eq!(text.matches('1').count(), 1 << 20);
        // 2^40 leaves: the text would be terabytes; the budget ends it with an error.
        let tensor = Value::Tensor(Tensor::from_vec([2], vec![1.5f32, 2.0]).unwrap());
        let e = render("p", &doubled(40, tensor)).unwrap_err();
        assert_eq!(format!("{e:?}"), r#"Value("p: the rendered values would exceed 67108864 bytes of text")"#);
        assert_eq!(MAX_RENDERED_BYTES, 67108864);
    }

    #[test]
    fn format_strings_python_refuses_are_refused_with_its_words() {
        let args = ["a".to_string(), "b".to_string()];
        let err = |fmt: &str| format!("{:?}", py_format("p", fmt, &args).expect_err("refused"));
        for (fmt, want) in [
            ("x}", "Single '}' encountered in format string"),
            ("{{0}", "Single '}' encountered in format string"),
            ("{0{1}}", "nested replacement fields are not supported"),
            ("{}{1}", "cannot switch from automatic field numbering to manual field specification"),
            ("{0!x}", "Unknown conversion specifier x"),
            ("{0", "expected '}' before end of string"),
        ] {
            assert_eq!(err(fmt), format!("Value({:?})", format!("p: {want}")), "{fmt}");
        }
        assert_eq!(
            err("{2}"),
            r#"Index { what: "positional format arguments (in p: Replacement index 2 out of range)", index: 2, len: 2 }"#
        );
        assert_eq!(py_format("p", "{1}{0!r}{{}}", &args).unwrap(), "b'a'{}");
    }

    #[test]
    fn deep_nesting_is_an_error_not_a_stack_overflow() {
        let deep = (0..100_000).fold(Value::Int(0), |v, _| Value::tuple(vec![v]));
        let e = render("p", &deep).unwrap_err();
        assert_eq!(
            format!("{e:?}"),
            format!("Value(\"p: cannot render tuples nested more than {MAX_RENDER_DEPTH} deep\")")
        );
        let ok = (0..MAX_RENDER_DEPTH).fold(Value::Int(0), |v, _| Value::tuple(vec![v]));
        assert!(render("p", &ok).is_ok());
        // Dropping the 100,000-deep tuple is the VM's business (iterative drop), not this test's.
        drop(deep);
    }
}
