//! Register renumbering: inputs keep `0..num_inputs`, every other register is numbered densely
//! in the order of its first write (then, for registers that are only read — which the check
//! allows in unreachable code only — of its first read). Programs that differ only in their
//! register numbers therefore renumber to the same instructions.

use relaxvm::{Instruction, RegIdx};
use std::collections::HashMap;

/// The renumbered instructions and the register-file size (the number of distinct registers).
pub(crate) fn renumber_registers(num_inputs: u32, instrs: &[Instruction]) -> (Vec<Instruction>, u64) {
    let mut map: HashMap<RegIdx, RegIdx> = HashMap::new();
    let mut next = u64::from(num_inputs);
    let mut assign = |r: RegIdx, map: &mut HashMap<RegIdx, RegIdx>| {
        if r >= num_inputs && !map.contains_key(&r) {
            // `next` counts distinct registers, so it stays below 2^32 + num_inputs; a file that
            // large fails verification anyway, so saturate rather than wrap.
            map.insert(r, u32::try_from(next).unwrap_or(u32::MAX));
            next += 1;
        }
    };
    for d in instrs.iter().filter_map(Instruction::writes) {
        assign(d, &mut map);
    }
    for r in instrs.iter().flat_map(Instruction::reads) {
        assign(r, &mut map);
    }
    let renamed = instrs.iter().map(|i| i.map_regs(|r| if r < num_inputs { r } else { map[&r] })).collect();
    (renamed, next)
}

#[cfg(test)]
mod tests {
    use super::*;
    use relaxvm::Arg::*;

    #[test]
    fn renumbers_by_first_write_and_keeps_inputs() {
        let prog = vec![
            Instruction::Call { func: 0, args: vec![Reg(1), Imm(3)], dst: Some(100) },
            Instruction::Call { func: 0, args: vec![Reg(100), Reg(0)], dst: Some(7) },
            Instruction::Call { func: 0, args: vec![Reg(7)], dst: Some(100) },
            Instruction::Ret { result: 100 },
        ];
        let (out, regs) = renumber_registers(2, &prog);
        assert_eq!(regs, 4);
        assert_eq!(
            out,
            vec![
                Instruction::Call { func: 0, args: vec![Reg(1), Imm(3)], dst: Some(2) },
                Instruction::Call { func: 0, args: vec![Reg(2), Reg(0)], dst: Some(3) },
                Instruction::Call { func: 0, args: vec![Reg(3)], dst: Some(2) },
                Instruction::Ret { result: 2 },
            ]
        );
    }

    #[test]
    fn read_only_registers_come_last_and_unused_inputs_still_count() {
        let prog = vec![
            Instruction::Ret { result: 0 },
            Instruction::Call { func: 0, args: vec![Reg(50)], dst: Some(9) },
            Instruction::If { cond: 40, false_offset: 1 },
            Instruction::Ret { result: 9 },
        ];
        let (out, regs) = renumber_registers(3, &prog);
        assert_eq!(regs, 6);
        assert_eq!(out[1], Instruction::Call { func: 0, args: vec![Reg(4)], dst: Some(3) });
        assert_eq!(out[2], Instruction::If { cond: 5, false_offset: 1 });
    }
}
