//! Programs the Rust bench (`benches/vm.rs`) and the instruction-count probe
//! (`examples/instr_count.rs`) both run, written once so the probe counts what the bench times.

use relaxvm::Arg;
use relaxvm_builder::ExecBuilder;

/// The body of `sum(n)` (the open function's register 0 is `n`): 0 + 1 + ... + (n - 1), five
/// instructions an iteration; `emit_sum` of scripts/bench_programs.py. r1 = total, r2 = i,
/// r3 = i < n.
pub fn emit_sum_body(ib: &mut ExecBuilder) {
    use Arg::*;
    ib.emit_call("vm.builtin.int.add", &[Imm(0), Imm(0)], Some(1)).unwrap();
    ib.emit_call("vm.builtin.int.add", &[Imm(0), Imm(0)], Some(2)).unwrap();
    ib.emit_call("vm.builtin.int.lt", &[Reg(2), Reg(0)], Some(3)).unwrap();
    ib.emit_if(3, 4).unwrap();
    ib.emit_call("vm.builtin.int.add", &[Reg(1), Reg(2)], Some(1)).unwrap();
    ib.emit_call("vm.builtin.int.add", &[Reg(2), Imm(1)], Some(2)).unwrap();
    ib.emit_goto(-4).unwrap();
    ib.emit_ret(1).unwrap();
}
