//! [`link`]: merges executables into one, as XLA's builder merges the computations of the modules
//! it calls into one `HloModule`, remapping every id.
//!
//! The function tables are merged by name, in order of first appearance (module by module, each
//! in its table order). A name that one module defines (a bytecode function) and others only
//! declare (a packed entry, e.g. from `declare_function`) becomes that bytecode function, so calls
//! to it become direct bytecode calls; a name that no module defines stays a packed entry for a
//! registry to provide when a VM is built; a name two modules define is an error naming both.
//! The constant pools are merged with equal constants ([`Value::content_eq`](relaxvm::Value::content_eq))
//! stored once. Every instruction's function and constant indices are remapped; registers,
//! jumps, locations, parameter names and signatures are kept as they are, so the linked
//! executable behaves exactly as its parts did.
//!
//! ```
//! use relaxvm::{Arg, FuncKind, Instruction};
//! use relaxvm_builder::{link, ExecBuilder, LinkOptions};
//!
//! // a.rvx: main(x) = helper(x), helper only declared.
//! let mut a = ExecBuilder::new();
//! a.declare_function("helper", FuncKind::Packed).unwrap();
//! a.function("main", 1, None).unwrap();
//! a.emit_call("helper", &[Arg::Reg(0)], Some(1)).unwrap();
//! a.emit_ret(1).unwrap();
//! a.end_function().unwrap();
//! // b.rvx: helper(y) = y.
//! let mut b = ExecBuilder::new();
//! b.function("helper", 1, None).unwrap();
//! b.emit_ret(0).unwrap();
//! b.end_function().unwrap();
//! let (a, b) = (a.get().unwrap().executable, b.get().unwrap().executable);
//!
//! let linked = link(&[("a.rvx", &a), ("b.rvx", &b)], &LinkOptions::default()).unwrap();
//! let helper = linked.func_index("helper").unwrap();
//! assert_eq!(linked.funcs()[helper as usize].kind, FuncKind::Bytecode);
//! let main = linked.func("main").unwrap().start_instr as usize;
//! assert!(matches!(linked.instrs()[main], Instruction::Call { func, .. } if func == helper));
//! ```

use crate::constants::ConstantPool;
use crate::link_error::instr_index;
pub use crate::link_error::{LinkError, LinkErrorKind, ModuleRef};
use crate::reachability;
use indexmap::IndexMap;
use relaxvm::{Executable, ExecutableParts, FuncInfo, FuncKind, Instruction};

/// How to [`link`].
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct LinkOptions {
    /// The entry function of the result; it must be a bytecode function of some module. `None`:
    /// the entry the modules declare (they must agree), or none (then `main`, if defined).
    pub entry: Option<String>,
    /// Leave out the functions that the entry function (and [`keep`](Self::keep)) cannot reach
    /// through calls and function arguments, and the constants only they use.
    pub drop_unreachable: bool,
    /// Further functions to keep when dropping unreachable ones (and what they reach).
    pub keep: Vec<String>,
}

/// Links `modules` — each a name for errors (e.g. its path) and an executable — into one
/// executable; see the [module documentation](self).
pub fn link(modules: &[(&str, &Executable)], options: &LinkOptions) -> Result<Executable, LinkError> {
    if !options.drop_unreachable && !options.keep.is_empty() {
        return Err(LinkErrorKind::KeepWithoutDrop(options.keep.join(", ")).into());
    }
    let module = |m: usize| ModuleRef { index: m, name: modules[m].0.to_string() };

    // The merged function table: each name with the module and index that define it.
    let mut table: IndexMap<&str, Option<(usize, usize)>> = IndexMap::new();
    let mut func_maps: Vec<Vec<u32>> = Vec::with_capacity(modules.len());
    for (m, (_, exe)) in modules.iter().enumerate() {
        let mut map = Vec::with_capacity(exe.funcs().len());
        for (i, f) in exe.funcs().iter().enumerate() {
            let index = match table.get_index_of(f.name.as_str()) {
                Some(index) => index,
                None => table.insert_full(f.name.as_str(), None).0,
            };
            if f.kind == FuncKind::Bytecode {
                if let Some((first, _)) = table[index] {
                    return Err(LinkErrorKind::DuplicateDefinition {
                        name: f.name.clone(),
                        first: module(first),
                        second: module(m),
                    }
                    .into());
                }
                table[index] = Some((m, i));
            }
            map.push(u32::try_from(index).map_err(|_| LinkErrorKind::TooLarge("functions"))?);
        }
        func_maps.push(map);
    }

    // Every call that now reaches a bytecode function must pass its number of inputs.
    for (m, (_, exe)) in modules.iter().enumerate() {
        for f in exe.funcs().iter().filter(|f| f.kind == FuncKind::Bytecode) {
            for (pc, instr) in exe.instrs()[f.instr_range()].iter().enumerate() {
                let Instruction::Call { func, args, .. } = instr else { continue };
                let Some((dm, di)) = table[func_maps[m][*func as usize] as usize] else { continue };
                let callee = &modules[dm].1.funcs()[di];
                if callee.num_args as usize != args.len() {
                    return Err(LinkErrorKind::Arity {
                        caller: module(m),
                        func: f.name.clone(),
                        pc,
                        callee_name: callee.name.clone(),
                        callee: module(dm),
                        expected: callee.num_args,
                        got: args.len(),
                    }
                    .into());
                }
            }
        }
    }

    // The merged constant pool.
    let mut pool = ConstantPool::default();
    let mut const_maps: Vec<Vec<u32>> = Vec::with_capacity(modules.len());
    for (m, (_, exe)) in modules.iter().enumerate() {
        let map = exe
            .constants()
            .iter()
            .enumerate()
            .map(|(i, c)| {
                pool.intern(c.clone())
                    .map_err(|source| LinkError::from(LinkErrorKind::Constant { module: module(m), index: i, source }))
            })
            .collect::<Result<Vec<u32>, _>>()?;
        const_maps.push(map);
    }

    let entry = choose_entry(modules, options, &table)?;

    // Bodies in table order, with every index remapped.
    // The linked program calls the kernels of every module's native libraries (each once).
    let mut libraries: Vec<relaxvm::executable::Library> = Vec::new();
    for lib in modules.iter().flat_map(|(_, exe)| exe.libraries()) {
        if !libraries.iter().any(|l| l.reference == lib.reference) {
            libraries.push(lib.clone());
        }
    }
    let mut parts = ExecutableParts { constants: pool.values().to_vec(), entry, libraries, ..Default::default() };
    for (name, def) in &table {
        let Some((m, i)) = *def else {
            parts.funcs.push(FuncInfo::packed(*name));
            continue;
        };
        let exe = modules[m].1;
        let f = &exe.funcs()[i];
        let start = instr_index(parts.instrs.len())?;
        for pc in f.instr_range() {
            let (funcs, consts) = (&func_maps[m], &const_maps[m]);
            parts.instrs.push(exe.instrs()[pc].map_indices(|g| funcs[g as usize], |c| consts[c as usize]));
            parts.locations.push(exe.location(pc).cloned());
        }
        parts.funcs.push(FuncInfo { start_instr: start, end_instr: instr_index(parts.instrs.len())?, ..f.clone() });
    }
    let linked = Executable::from_parts(parts).map_err(LinkErrorKind::Invalid)?;
    if !options.drop_unreachable {
        return Ok(linked);
    }
    let keep: Vec<&str> = options.keep.iter().map(String::as_str).collect();
    reachability::drop_unreachable(&linked, &keep)
}

/// The entry of the result: the one asked for, or the one the modules agree on.
fn choose_entry(
    modules: &[(&str, &Executable)],
    options: &LinkOptions,
    table: &IndexMap<&str, Option<(usize, usize)>>,
) -> Result<Option<String>, LinkError> {
    if let Some(entry) = &options.entry {
        return match table.get(entry.as_str()) {
            Some(Some(_)) => Ok(Some(entry.clone())),
            _ => Err(LinkErrorKind::NotDefined { what: "the entry function", name: entry.clone() }.into()),
        };
    }
    let mut chosen: Option<(usize, &str)> = None;
    for (m, (_, exe)) in modules.iter().enumerate() {
        let Some(entry) = exe.declared_entry() else { continue };
        match chosen {
            None => chosen = Some((m, entry)),
            Some((first, e)) if e != entry => {
                let module = |m: usize| ModuleRef { index: m, name: modules[m].0.to_string() };
                return Err(LinkErrorKind::ConflictingEntries {
                    first: module(first),
                    first_entry: e.to_string(),
                    second: module(m),
                    second_entry: entry.to_string(),
                }
                .into());
            }
            Some(_) => {}
        }
    }
    Ok(chosen.map(|(_, e)| e.to_string()))
}
