//! Dead-function removal: what the entry function can reach, and the executable without the rest.
//!
//! A function is reachable from a root when a chain of calls or function arguments (`f[NAME]`,
//! which may be called later) leads to it. Packed functions are leaves. Unreachable functions
//! are dropped with the constants only they use; everything kept is renumbered.

use crate::link_error::{instr_index, LinkError, LinkErrorKind};
use relaxvm::{Executable, ExecutableParts, FuncKind};

/// Which function-table entries of `exe` are reachable from the entries `roots`.
pub fn reachable(exe: &Executable, roots: &[u32]) -> Vec<bool> {
    let mut seen = vec![false; exe.funcs().len()];
    let mut work: Vec<u32> = Vec::new();
    let mut visit = |i: u32, work: &mut Vec<u32>| {
        if let Some(s) = seen.get_mut(i as usize) {
            if !*s {
                *s = true;
                work.push(i);
            }
        }
    };
    for &r in roots {
        visit(r, &mut work);
    }
    while let Some(i) = work.pop() {
        let f = &exe.funcs()[i as usize];
        if f.kind != FuncKind::Bytecode {
            continue;
        }
        for instr in &exe.instrs()[f.instr_range()] {
            for &g in instr.funcs() {
                visit(g, &mut work);
            }
        }
    }
    seen
}

/// `exe` without the functions that its entry function (see [`Executable::entry`]) and the
/// functions named in `keep` cannot reach, and without the constants only those used. Kept
/// functions stay in table order, their code laid out in that order; every index is remapped.
///
/// Fails when there is nothing to start from (no entry and nothing to keep) or when a name in
/// `keep` is not in the function table.
pub fn drop_unreachable(exe: &Executable, keep: &[&str]) -> Result<Executable, LinkError> {
    let mut roots = Vec::with_capacity(keep.len() + 1);
    if let Some(entry) = exe.entry() {
        roots.extend(exe.func_index(entry));
    }
    for name in keep {
        let index = exe
            .func_index(name)
            .ok_or_else(|| LinkErrorKind::NotDefined { what: "function to keep", name: name.to_string() })?;
        roots.push(index);
    }
    if roots.is_empty() {
        return Err(LinkErrorKind::NoEntry.into());
    }
    let live = reachable(exe, &roots);

    // Old index -> new index, for functions and for the constants live code uses.
    let mut funcs = vec![u32::MAX; exe.funcs().len()];
    for (next, (i, _)) in live.iter().enumerate().filter(|(_, l)| **l).enumerate() {
        // At most as many as the table's entries, whose indices are u32.
        funcs[i] = next as u32;
    }
    let mut used = vec![false; exe.constants().len()];
    for f in exe.funcs().iter().zip(&live).filter(|(f, l)| **l && f.kind == FuncKind::Bytecode).map(|(f, _)| f) {
        for instr in &exe.instrs()[f.instr_range()] {
            for c in instr.constants() {
                used[c as usize] = true;
            }
        }
    }
    let mut consts = vec![u32::MAX; exe.constants().len()];
    let mut parts = ExecutableParts {
        entry: exe.declared_entry().map(str::to_string),
        libraries: exe.libraries().to_vec(),
        ..Default::default()
    };
    for (i, c) in exe.constants().iter().enumerate().filter(|(i, _)| used[*i]) {
        consts[i] = u32::try_from(parts.constants.len()).map_err(|_| LinkErrorKind::TooLarge("constants"))?;
        parts.constants.push(c.clone());
    }

    for (f, _) in exe.funcs().iter().zip(&live).filter(|(_, l)| **l) {
        let mut f = f.clone();
        if f.kind == FuncKind::Bytecode {
            let range = f.instr_range();
            f.start_instr = instr_index(parts.instrs.len())?;
            for pc in range {
                parts.instrs.push(exe.instrs()[pc].map_indices(|g| funcs[g as usize], |c| consts[c as usize]));
                parts.locations.push(exe.location(pc).cloned());
            }
            f.end_instr = instr_index(parts.instrs.len())?;
        }
        parts.funcs.push(f);
    }
    Executable::from_parts(parts).map_err(|e| LinkErrorKind::Invalid(e).into())
}
