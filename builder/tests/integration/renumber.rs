//! Register renumbering: dense registers, identical text for programs that differ only in register
//! numbers.

use crate::common::{build, func};
use relaxvm::Arg::*;
use relaxvm_builder::ExecBuilder;

fn program(regs: [u32; 3]) -> String {
    let [a, b, c] = regs;
    let mut ib = ExecBuilder::new();
    func(&mut ib, "main", 2, |ib| {
        ib.emit_call("f", &[Reg(0), Reg(1)], Some(a))?;
        ib.emit_if(a, 3)?;
        ib.emit_call("g", &[Reg(a)], Some(b))?;
        ib.emit_goto(2)?;
        ib.emit_call("h", &[Reg(1)], Some(b))?;
        ib.emit_call("f", &[Reg(b), Reg(a)], Some(c))?;
        ib.emit_ret(c)
    })
    .unwrap();
    build(&mut ib).as_text()
}

#[test]
fn register_numbers_do_not_matter() {
    let canonical = program([2, 3, 4]);
    assert!(canonical.contains("@main inputs=2 regs=5:"), "{canonical}");
    for regs in [[100, 7, 1_000_000], [4, 3, 2], [9, 9000, 90]] {
        assert_eq!(program(regs), canonical, "{regs:?}");
    }
}

#[test]
fn huge_register_numbers_make_small_files() {
    let mut ib = ExecBuilder::new();
    func(&mut ib, "main", 0, |ib| {
        ib.emit_call("f", &[], Some(u32::MAX))?;
        ib.emit_ret(u32::MAX)
    })
    .unwrap();
    let exe = build(&mut ib);
    assert_eq!(exe.func("main").unwrap().register_file_size, 1);
}

#[test]
fn reusing_a_register_keeps_one_slot() {
    let mut ib = ExecBuilder::new();
    func(&mut ib, "main", 1, |ib| {
        ib.emit_call("f", &[Reg(0)], Some(10))?;
        ib.emit_call("f", &[Reg(10)], Some(10))?;
        ib.emit_call("f", &[Reg(10)], Some(0))?;
        ib.emit_ret(0)
    })
    .unwrap();
    let exe = build(&mut ib);
    assert_eq!(exe.func("main").unwrap().register_file_size, 2);
    assert!(exe.as_text().contains("call  f  in: %1  dst: %0"));
}
