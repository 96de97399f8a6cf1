//! Every loop of the operators polls: a poll that fails stops the op with its error, on the
//! parallel paths (pieces), the sequential ones (strided views, copies) and long pieces
//! (columns, long runs). Strided inputs are stride-0 views of one element, which need no memory
//! however large; results are reserved, not written, beyond what runs before the stop.

use super::elementwise::{binary, unary, Binary, Unary};
use super::reduce::sum_polled;
use super::test_util::{on_one_thread, t};
use super::Poll;
use relaxvm::pool::POLL_EVERY;
use relaxvm::{DataType, Error, Result, Tensor, Value};

/// A view of `n` copies of one float (stride 0).
fn broadcast(v: f32, n: usize) -> Value {
    let one = Tensor::scalar(v);
    Value::Tensor(
        Tensor::from_parts(one.storage().clone(), 0, [n as i64].into(), Some(vec![0]), DataType::F32).unwrap(),
    )
}

/// Runs `op` with a poll that fails on its `fail_at`-th call; returns the error and the calls.
fn stopped(fail_at: usize, op: impl FnOnce(&mut dyn FnMut() -> Result<()>) -> Result<Value>) -> (String, usize) {
    let mut calls = 0;
    let e = op(&mut || {
        calls += 1;
        if calls == fail_at {
            Err(Error::value("polled out"))
        } else {
            Ok(())
        }
    })
    .expect_err("the op was not stopped");
    (e.to_string(), calls)
}

/// A huge view's element count: ~1 GiB of f32 results reserved, a few MiB written.
const HUGE: usize = 1 << 28;

#[test]
fn elementwise_ops_of_huge_views_stop_when_a_poll_fails() {
    let args = [broadcast(1.0, HUGE), Value::Float(2.0)];
    assert_eq!(stopped(3, |p| binary("vm.op.add", &args, p, Binary::Add)), ("polled out".into(), 3));
    let args = [broadcast(1.0, HUGE), broadcast(2.0, HUGE)];
    assert_eq!(stopped(2, |p| binary("vm.op.div", &args, p, Binary::Div)), ("polled out".into(), 2));
    // Unary ops, and the conversion of an operand to another dtype (float64 here).
    assert_eq!(stopped(2, |p| unary("vm.op.exp", &[broadcast(1.0, HUGE)], p, Unary::Exp)), ("polled out".into(), 2));
    let f64_args = [broadcast(1.0, HUGE), Value::Tensor(Tensor::scalar(1.0f64))];
    assert_eq!(stopped(2, |p| binary("vm.op.mul", &f64_args, p, Binary::Mul)), ("polled out".into(), 2));
}

#[test]
fn elementwise_ops_in_pieces_stop_when_a_poll_fails() {
    let n = 8 * POLL_EVERY;
    let x = t(&[n as i64], vec![1.0f32; n]);
    assert_eq!(stopped(2, |p| binary("vm.op.add", &[x.clone(), x.clone()], p, Binary::Add)).0, "polled out");
    assert_eq!(stopped(2, |p| unary("vm.op.relu", std::slice::from_ref(&x), p, Unary::Relu)).0, "polled out");
    // A poll that never fails changes nothing.
    let mut polls = 0;
    let r = binary(
        "vm.op.add",
        &[x.clone(), x],
        &mut || {
            polls += 1;
            Ok(())
        },
        Binary::Add,
    )
    .unwrap();
    assert_eq!(polls, 8, "one poll per POLL_EVERY elements");
    assert!(r.as_tensor().unwrap().to_vec::<f32>().unwrap().iter().all(|v| *v == 2.0));
}

/// How many times `op` polls when no poll fails, on the pool and on one thread: polls fall at
/// fixed points of the work, so the two agree whichever threads do the work.
fn polls(op: impl Fn(Poll<'_>) -> Result<Value> + Sync) -> usize {
    let count = || {
        let mut polls = 0;
        op(&mut || {
            polls += 1;
            Ok(())
        })
        .expect("the op failed");
        polls
    };
    let (many, one) = (count(), on_one_thread(count));
    assert_eq!(many, one, "polls on the pool and on one thread");
    many
}

#[test]
fn sums_stop_when_a_poll_fails_on_every_path() {
    // A huge view: the copy in reduction order polls.
    assert_eq!(stopped(2, |p| sum_polled("vm.op.sum", &[broadcast(1.0, HUGE)], p)), ("polled out".into(), 2));
    let n = 8 * POLL_EVERY;
    // Each path polls once per POLL_EVERY elements read, whichever thread reads them, and the
    // second poll failing stops it.
    let flat = t(&[n as i64], vec![1.0f32; n]);
    let runs = t(&[2, (n / 2) as i64], vec![1.0f32; n]);
    let cols = t(&[(n / 512) as i64, 512], vec![1.0f32; n]);
    let col = t(&[n as i64, 1], vec![1.0f32; n]);
    let cases: [(&str, Vec<Value>, usize); 5] = [
        // A view: the copy in reduction order, then leaves across the pool.
        ("a view", vec![broadcast(1.0, n)], 16),
        // One long run: leaves across the pool.
        ("one run", vec![flat], 8),
        // Few long runs (each longer than a piece).
        ("two runs", vec![runs, Value::Int(1)], 8),
        // Columns across the pool: each piece reads every row.
        ("columns", vec![cols, Value::Int(0)], 8),
        // One column of many rows, on this thread (a poll after each POLL_EVERY rows but the first).
        ("one column", vec![col, Value::Int(0)], 7),
    ];
    for (what, args, want) in cases {
        assert_eq!(polls(|p| sum_polled("vm.op.sum", &args, p)), want, "{what}");
        assert_eq!(stopped(2, |p| sum_polled("vm.op.sum", &args, p)), ("polled out".into(), 2), "{what}");
    }
}
