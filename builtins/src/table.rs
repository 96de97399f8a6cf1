//! The table each module declares its builtins in: one name, one function, one cost class, one
//! source of truth for `register_all`, `ensure_registered` and `builtin_names`.

use relaxvm::{Cost, PackedFunc, Value};

/// One builtin: its registered name, how to make its packed function, and how long it may run.
pub(crate) struct Builtin {
    /// The registered name, e.g. `vm.builtin.shape_of`.
    pub(crate) name: &'static str,
    /// Makes the packed function; it is handed `name` so errors can quote it.
    pub(crate) make: fn(&'static str) -> PackedFunc,
    /// How long a call may run ([`Cost::Unbounded`] unless declared with
    /// [`Builtin::constant_time`]); the Python layer keeps the GIL around functions that only
    /// call constant-time builtins.
    pub(crate) cost: Cost,
    /// How to specialise a call site to its fixed operands (see [`Builtin::specialized`]).
    pub(crate) specialize: Option<SpecializeFn>,
}

/// A builtin's specializer: [`relaxvm::Specializer`] handed the builtin's name.
pub(crate) type SpecializeFn = fn(&'static str, &[Option<&Value>]) -> Option<PackedFunc>;

/// Calls builtin `name` of `table` outside any VM: the modules' unit tests call their builtins
/// through the packed function the registry would hold.
#[cfg(test)]
pub(crate) fn call(table: &[Builtin], name: &str, args: &[relaxvm::Value]) -> relaxvm::Result<relaxvm::Value> {
    let b = table.iter().find(|b| b.name == name).unwrap_or_else(|| panic!("{name} is not in this table"));
    b.packed().call(&mut relaxvm::CallCtx::detached(), args)
}

/// Builtin `name` of `table` as a call site whose operands other than `regs` (those of
/// `fixed_args`) are fixed calls it: specialised (`None` when its specializer declines), called
/// outside any VM with the operands the specialised function reads.
#[cfg(test)]
pub(crate) fn specialised(
    table: &[Builtin],
    name: &str,
    fixed_args: &[relaxvm::Value],
    regs: &[usize],
) -> Option<impl Fn(&[relaxvm::Value]) -> relaxvm::Result<relaxvm::Value>> {
    let b = table.iter().find(|b| b.name == name).unwrap_or_else(|| panic!("{name} is not in this table"));
    let fixed: Vec<Option<&Value>> =
        fixed_args.iter().enumerate().map(|(i, a)| (!regs.contains(&i)).then_some(a)).collect();
    let special = b.packed().specialize(&fixed)?;
    Some(move |args: &[relaxvm::Value]| {
        let passed = special.reads_first().map_or(args.len(), |n| n.min(args.len()));
        special.call(&mut relaxvm::CallCtx::detached(), &args[..passed])
    })
}

impl Builtin {
    /// The packed function of this builtin, carrying its cost class.
    pub(crate) fn packed(&self) -> PackedFunc {
        let p = (self.make)(self.name).with_cost(self.cost);
        match self.specialize {
            Some(s) => {
                let name = self.name;
                p.with_specializer(move |fixed| s(name, fixed))
            }
            None => p,
        }
    }

    /// The same builtin, declared constant-time: bounded small work whatever its arguments (no
    /// loops over tensor data, no allocation proportional to the input, no calls to other
    /// functions).
    pub(crate) const fn constant_time(self) -> Builtin {
        Builtin { cost: Cost::Constant, ..self }
    }

    /// The same builtin, with a specializer: the interpreter calls what `s` makes of a call
    /// site's fixed operands there instead of the general function (see
    /// [`relaxvm::Specializer`] for what it must keep).
    pub(crate) const fn specialized(self, s: SpecializeFn) -> Builtin {
        Builtin { specialize: Some(s), ..self }
    }
}

/// `builtin!("vm.builtin.x", f)` for `fn f(name: &'static str, args: &[Value]) -> Result<Value>`;
/// `builtin!("vm.builtin.x", ctx f)` for `fn f(name, ctx: &mut CallCtx, args) -> Result<Value>`;
/// `builtin!("vm.builtin.x", binary f)` for `fn f(&Value, &Value) -> Result<Value>`, which the
/// interpreter calls directly with two operands (the scalar builtins);
/// `builtin!("vm.builtin.x", select f)` for
/// `fn f<'a>(name: &str, args: &'a [Value]) -> Result<Selected<'a>>`, whose result the
/// interpreter clones only when the destination does not already hold it.
///
/// The function is a fn item called inside a closure, so it is inlined: a call costs one
/// indirect jump (through the `PackedFunc`), which matters for the scalar builtins.
macro_rules! builtin {
    ($name:literal, ctx $f:path) => {
        $crate::table::Builtin {
            name: $name,
            make: |n| relaxvm::PackedFunc::new(n, move |ctx, args| $f(n, ctx, args)),
            cost: relaxvm::Cost::Unbounded,
            specialize: None,
        }
    };
    ($name:literal, select $f:path) => {
        $crate::table::Builtin {
            name: $name,
            make: |n| relaxvm::PackedFunc::select(n, $f),
            cost: relaxvm::Cost::Unbounded,
            specialize: None,
        }
    };
    ($name:literal, identity $f:path) => {
        $crate::table::Builtin {
            name: $name,
            make: |n| relaxvm::PackedFunc::select(n, $f).returning_its_argument(),
            cost: relaxvm::Cost::Unbounded,
            specialize: None,
        }
    };
    ($name:literal, binary $f:path) => {
        $crate::table::Builtin {
            name: $name,
            make: |n| relaxvm::PackedFunc::binary(n, $f),
            cost: relaxvm::Cost::Unbounded,
            specialize: None,
        }
    };
    ($name:literal, $f:path) => {
        $crate::table::Builtin {
            name: $name,
            make: |n| relaxvm::PackedFunc::from_fn(n, move |args| $f(n, args)),
            cost: relaxvm::Cost::Unbounded,
            specialize: None,
        }
    };
}
pub(crate) use builtin;
