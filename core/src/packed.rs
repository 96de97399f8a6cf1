//! Packed functions: functions of a slice of values, the VM's one calling convention.

use crate::cost::Cost;
use crate::device::Device;
pub use crate::error::panic_message;
use crate::error::{Error, ErrorKind, Result};
use crate::int_op::IntOp;
use crate::value::{Callable, Closure, Value};
use crate::value_conv::{FromValue, IntoValue};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::Arc;

// The types are declared beside `Value`, which holds packed functions (a value can be a
// function, and a function takes values); their methods live here. The paths stay
// `relaxvm::packed::*`.
pub use crate::value::{
    BinaryFn, CallCtx, CallHints, PackedFnSig, PackedFunc, SelectFn, Selected, Specializer, VmHandle,
};

impl<'a> CallCtx<'a> {
    /// A context inside a VM.
    pub fn new(vm: &'a mut dyn VmHandle) -> Self {
        CallCtx { vm: Some(vm), entry: None, site: None, native: false }
    }

    /// A context inside a VM that calls its function `entry` (an index of the VM's own).
    #[doc(hidden)] // the interpreter's
    pub fn calling(vm: &'a mut dyn VmHandle, entry: u32) -> Self {
        CallCtx { vm: Some(vm), entry: Some(entry), site: None, native: false }
    }

    /// A context inside a VM for a call from a site of native code that keeps its own cache
    /// `site` (see [`VmHandle::call_named_at`]).
    #[doc(hidden)] // the interpreter's
    pub fn at_site(vm: &'a mut dyn VmHandle, site: &'a mut Value) -> Self {
        CallCtx { vm: Some(vm), entry: None, site: Some(site), native: false }
    }

    /// As [`at_site`](Self::at_site), for a call of machine code TVM compiled (see
    /// [`VmHandle::call_native_code_at`]): [`from_native_site`](Self::from_native_site) is
    /// true only for a context made here.
    #[doc(hidden)] // the interpreter's
    pub fn at_native_code_site(vm: &'a mut dyn VmHandle, site: &'a mut Value) -> Self {
        CallCtx { vm: Some(vm), entry: None, site: Some(site), native: true }
    }

    /// A context outside any VM (bytecode closures cannot be called from it).
    pub fn detached() -> CallCtx<'static> {
        CallCtx { vm: None, entry: None, site: None, native: false }
    }

    /// A value the calling VM keeps for this call site between calls, null at first: an inline
    /// cache, e.g. of the result made last, which a function may reuse when it would make
    /// the same again. A specialised function ([`PackedFunc::with_specializer`]) has one per
    /// call site; sites that call the general function share its one. It is the VM's own (no
    /// other thread reaches it); `None` outside a VM and for calls made by instruments.
    pub fn site_cache(&mut self) -> Option<&mut Value> {
        if self.site.is_some() {
            return self.site.as_deref_mut();
        }
        let entry = self.entry?;
        self.vm.as_mut()?.site_cache(entry)
    }

    /// The site cache of an allocating builtin ([`site_cache`](Self::site_cache)) when the
    /// VM pools allocations ([`crate::allocator::Allocator::Pooled`], TVM's default
    /// `memory_cfg`); `None` when it allocates at every call, and outside a VM.
    pub fn pool_cache(&mut self) -> Option<&mut Value> {
        let vm = self.vm.as_mut()?;
        if vm.allocator() != crate::allocator::Allocator::Pooled {
            return None;
        }
        if self.site.is_some() {
            return self.site.as_deref_mut();
        }
        vm.site_cache(self.entry?)
    }

    /// Whether the call comes from a call site of machine code TVM compiled (a VM TIR function
    /// of a TVM `exec_mode="compiled"` model, [`VmHandle::call_native_code_at`]). Its
    /// allocations serve TVM-built machine code, whose kernels write what they allocate before
    /// reading it (TVM's pooled allocator hands them back uninitialised), so `alloc_storage`
    /// reuses a block at such a site as the last run left it instead of zeroing it again. An
    /// explicit flag that only that path sets: a caller keeping its own site cache
    /// ([`call_named_at`](Self::call_named_at)) gets `false`, and zeroed storage.
    pub fn from_native_site(&self) -> bool {
        self.native
    }

    /// Every site cache of the calling VM and the index of this call's among them, when the
    /// VM pools allocations (as [`pool_cache`](Self::pool_cache)): an allocating site sees
    /// which other sites' kept values still hold its block. `None` when it allocates at every
    /// call, and outside a VM.
    pub fn pool_sites(&mut self) -> Option<(&mut [Value], usize)> {
        let entry = self.entry? as usize;
        let vm = self.vm.as_mut()?;
        if vm.allocator() != crate::allocator::Allocator::Pooled {
            return None;
        }
        let caches = vm.site_caches();
        (entry < caches.len()).then_some((caches, entry))
    }

    /// Drops what the calling VM's allocation sites keep for reuse ([`VmHandle::clear_pools`]);
    /// nothing outside a VM.
    pub fn clear_pools(&mut self) {
        if let Some(vm) = self.vm.as_mut() {
            vm.clear_pools();
        }
    }

    /// The VM's default device (CPU 0 outside a VM).
    pub fn device(&self) -> Device {
        self.vm.as_ref().map(|vm| vm.device()).unwrap_or_default()
    }

    /// Checks whether the calling VM was interrupted (`vm.interrupt()`, Ctrl-C): long builtins
    /// call this every few milliseconds of work and stop with its error. Outside a VM there is
    /// nothing to check.
    pub fn check_interrupt(&mut self) -> Result<()> {
        match &mut self.vm {
            Some(vm) => vm.poll(),
            None => Ok(()),
        }
    }

    /// Calls function value `f`, named `name`, for native code the VM runs or for a builtin
    /// (see [`VmHandle::call_named`]): a step of the calling VM that its instrument hook sees
    /// (the profiler and tracer list it). Outside a VM, as [`call`](Self::call).
    pub fn call_named(&mut self, name: &str, f: &Value, args: &[Value]) -> Result<Value> {
        match &mut self.vm {
            Some(vm) => vm.call_named(name, f.as_func()?, args),
            None => self.call(f, args),
        }
    }

    /// As [`call_named`](Self::call_named), from a call site of native code that keeps its
    /// own site cache `site` (see [`VmHandle::call_named_at`]).
    pub fn call_named_at(&mut self, name: &str, f: &Value, args: &[Value], site: &mut Value) -> Result<Value> {
        self.call_closure_named_at(name, f.as_func()?, args, site)
    }

    /// As [`call_named_at`](Self::call_named_at), of a closure the caller holds (no function
    /// value made for the call: compiled mode keeps its handles' closures so).
    pub fn call_closure_named_at(
        &mut self,
        name: &str,
        f: &Closure,
        args: &[Value],
        site: &mut Value,
    ) -> Result<Value> {
        match &mut self.vm {
            Some(vm) => vm.call_named_at(name, f, args, site),
            None => self.call_closure(f, args),
        }
    }

    /// As [`call_closure_named_at`](Self::call_closure_named_at), for a call of machine code TVM
    /// compiled (see [`VmHandle::call_native_code_at`]): only compiled mode's runtime calls it.
    #[doc(hidden)]
    pub fn call_native_code_at(&mut self, name: &str, f: &Closure, args: &[Value], site: &mut Value) -> Result<Value> {
        match &mut self.vm {
            Some(vm) => vm.call_native_code_at(name, f, args, site),
            None => self.call_closure(f, args),
        }
    }

    /// Calls function value `f`, named `name`, for a builtin in the middle of an operation a
    /// stop would leave half done (see [`VmHandle::call_observed`]): the calling VM's
    /// instrument hook sees it, but it is no step (no budget, no interrupt between two such
    /// calls). Outside a VM, as [`call`](Self::call).
    pub fn call_observed(&mut self, name: &str, f: &Value, args: &[Value]) -> Result<Value> {
        match &mut self.vm {
            Some(vm) => vm.call_observed(name, f.as_func()?, args),
            None => self.call(f, args),
        }
    }

    /// The calling VM's constants, function values and native-code slot (see
    /// [`VmHandle::program_lists`]); `None` outside a VM.
    pub fn program_lists(&mut self) -> Option<crate::value::ProgramLists<'_>> {
        self.vm.as_mut()?.program_lists()
    }

    /// Calls a function value with `args` followed by its captured values.
    pub fn call(&mut self, f: &Value, args: &[Value]) -> Result<Value> {
        self.call_closure(f.as_func()?, args)
    }

    /// Calls closure `closure` with `args` followed by its captured values.
    pub fn call_closure(&mut self, closure: &Closure, args: &[Value]) -> Result<Value> {
        match (&mut self.vm, &closure.callable) {
            (Some(vm), _) => vm.call_closure(closure, args),
            // Nothing captured (a builtin, a kernel): the arguments go as they are, with no list
            // collected per call.
            (None, Callable::Packed(p)) if closure.captured.is_empty() => p.call(&mut CallCtx::detached(), args),
            (None, Callable::Packed(p)) => {
                let all: Vec<Value> = args.iter().chain(&closure.captured).cloned().collect();
                p.call(&mut CallCtx::detached(), &all)
            }
            (None, Callable::Bytecode { name, .. }) => {
                Err(Error::value(format!("bytecode function {name:?} can only be called inside a VM")))
            }
        }
    }
}

impl PackedFunc {
    /// A packed function from a closure that may reach the VM through its context.
    pub fn new(name: &str, f: impl Fn(&mut CallCtx<'_>, &[Value]) -> Result<Value> + Send + Sync + 'static) -> Self {
        PackedFunc {
            f: Arc::new(f),
            name: name.into(),
            hints: CallHints::default(),
            cost: Cost::Unbounded,
            origin: None,
        }
    }

    /// A packed function that returns (a part of) one of its arguments; see [`SelectFn`].
    pub fn select(name: &str, f: SelectFn) -> Self {
        let owned: Arc<str> = name.into();
        let mut p = PackedFunc::new(name, move |_, args| f(&owned, args).map(Selected::to_value));
        p.hints.select = Some(f);
        p
    }

    /// The selecting function, when the function was made with [`PackedFunc::select`].
    pub fn as_select(&self) -> Option<SelectFn> {
        self.hints.select
    }

    /// The same selecting function ([`PackedFunc::select`]), declared to return its argument
    /// itself when called with one (TVM's `vm.builtin.copy`, which copies no data): the
    /// interpreter then runs a call of it on one register as a register move.
    pub fn returning_its_argument(mut self) -> Self {
        self.hints.identity = self.hints.select.is_some();
        self
    }

    /// What [`returning_its_argument`](Self::returning_its_argument) declared.
    pub fn returns_its_argument(&self) -> bool {
        self.hints.identity
    }

    /// A packed function of exactly two arguments given as a plain function; calls with two
    /// operands skip argument-list construction in the interpreter.
    pub fn binary(name: &str, f: BinaryFn) -> Self {
        let owned: Arc<str> = name.into();
        let mut p = PackedFunc::new(name, move |_, args| match args {
            [a, b] => f(a, b),
            _ => Err(Error::arity(&*owned, "2", args.len())),
        });
        p.hints.binary = Some(f);
        p
    }

    /// The two-argument plain function, when the function was made with [`PackedFunc::binary`].
    pub fn as_binary(&self) -> Option<BinaryFn> {
        self.hints.binary
    }

    /// The same binary function, declared to compute `op` when both operands are ints: the
    /// interpreter then computes it inline for two ints and calls the function for anything
    /// else (so the function stays the definition: it must agree with [`IntOp::apply`] on ints).
    pub fn with_int_op(mut self, op: IntOp) -> Self {
        self.hints.int_op = Some(op);
        self
    }

    /// What [`with_int_op`](Self::with_int_op) declared.
    pub fn as_int_op(&self) -> Option<IntOp> {
        self.hints.int_op
    }

    /// The same function, with a way to specialise it to a call site's fixed operands: the
    /// interpreter asks once per call site when it loads a program, and calls what `specialize`
    /// returns there instead (see [`Specializer`]). Builtins whose leading or trailing operands
    /// are always immediates (the shape-heap codes TVM emits) parse them once this way.
    pub fn with_specializer(
        mut self,
        specialize: impl Fn(&[Option<&Value>]) -> Option<PackedFunc> + Send + Sync + 'static,
    ) -> Self {
        self.hints.specializer = Some(Arc::new(specialize));
        self
    }

    /// This function specialised to a call whose operands are `fixed` (`None` for registers),
    /// named and costed as this one; `None` when it has no specializer or that declined (or
    /// panicked: the general function then serves the call, and reports what is wrong).
    pub fn specialize(&self, fixed: &[Option<&Value>]) -> Option<PackedFunc> {
        let specializer = self.hints.specializer.as_ref()?;
        let special = catch_unwind(AssertUnwindSafe(|| specializer(fixed))).ok().flatten()?;
        Some(PackedFunc { name: self.name.clone(), cost: self.cost, origin: self.origin.clone(), ..special })
    }

    /// The same function, declared to read only its first `n` arguments: a specializer that
    /// captured the operands after them (fixed at the call site) says so, and the call site
    /// then passes only those `n` (for the shape-heap builtins, the registers). Called with
    /// more, it ignores the rest; with fewer, it must fail as it would for a short list.
    pub fn reading_first(mut self, n: usize) -> Self {
        self.hints.reads = u32::try_from(n).ok();
        self
    }

    /// What [`reading_first`](Self::reading_first) declared.
    pub fn reads_first(&self) -> Option<usize> {
        self.hints.reads.map(|n| n as usize)
    }

    /// A packed function that does not need the VM.
    pub fn from_fn(name: &str, f: impl Fn(&[Value]) -> Result<Value> + Send + Sync + 'static) -> Self {
        PackedFunc::new(name, move |_, args| f(args))
    }

    /// A packed function from a typed closure, e.g. `|a: i64, b: i64| a + b`; arguments are
    /// converted with [`FromValue`] and a wrong count or type is an error naming the function.
    pub fn typed<Args, F: TypedFn<Args>>(name: &str, f: F) -> Self {
        let owned: Arc<str> = name.into();
        PackedFunc::new(name, move |_, args| f.call_typed(&owned, args))
    }

    /// The name the function was registered under.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The same function, declared to run in `cost` (see [`Cost`]).
    pub fn with_cost(mut self, cost: Cost) -> Self {
        self.cost = cost;
        self
    }

    /// The same function, remembering the object of another language it was made from (a
    /// Python callable), so that a binding hands that very object back when the function
    /// returns to it; the VM never looks at it.
    pub fn with_origin(mut self, origin: Arc<dyn std::any::Any + Send + Sync>) -> Self {
        self.origin = Some(origin);
        self
    }

    /// What [`with_origin`](Self::with_origin) recorded.
    pub fn origin(&self) -> Option<&(dyn std::any::Any + Send + Sync)> {
        self.origin.as_deref()
    }

    /// How long the function may run, as declared ([`Cost::Unbounded`] unless set).
    pub fn cost(&self) -> Cost {
        self.cost
    }

    /// Calls the function; a panic inside it becomes an error.
    #[inline]
    pub fn call(&self, ctx: &mut CallCtx<'_>, args: &[Value]) -> Result<Value> {
        match catch_unwind(AssertUnwindSafe(|| (self.f)(ctx, args))) {
            Ok(r) => r,
            Err(payload) => Err(panic_error(&self.name, payload)),
        }
    }

    /// True when both handles share one function.
    pub fn ptr_eq(&self, other: &PackedFunc) -> bool {
        Arc::ptr_eq(&self.f, &other.f)
    }
}

/// The error for a panic that unwound out of the function called `name`.
#[cold]
pub fn panic_error(name: &str, payload: Box<dyn std::any::Any + Send>) -> Error {
    ErrorKind::Panic(format!("{name}: {}", panic_message(&*payload))).into()
}

impl std::fmt::Debug for PackedFunc {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "PackedFunc({})", self.name)
    }
}

/// A typed result: a value, or a `Result` of one.
pub trait IntoResult {
    /// Converts into the packed-function result.
    fn into_result(self) -> Result<Value>;
}

impl<T: IntoValue> IntoResult for T {
    fn into_result(self) -> Result<Value> {
        Ok(self.into_value())
    }
}

impl<T: IntoValue> IntoResult for Result<T> {
    fn into_result(self) -> Result<Value> {
        self.map(IntoValue::into_value)
    }
}

/// A Rust closure callable as a packed function with typed arguments.
pub trait TypedFn<Args>: Send + Sync + 'static {
    /// Converts the arguments and calls.
    fn call_typed(&self, name: &str, args: &[Value]) -> Result<Value>;
}

macro_rules! impl_typed_fn {
    ($n:literal $(, $a:ident $i:tt)*) => {
        impl<F, R, $($a: FromValue),*> TypedFn<($($a,)*)> for F
        where
            F: Fn($($a),*) -> R + Send + Sync + 'static,
            R: IntoResult,
        {
            #[allow(unused_variables)]
            fn call_typed(&self, name: &str, args: &[Value]) -> Result<Value> {
                if args.len() != $n {
                    return Err(Error::arity(name, $n.to_string(), args.len()));
                }
                (self)($($a::from_value(&args[$i]).map_err(|e| e.context(&format!("{name} argument {}", $i)))?),*).into_result()
            }
        }
    };
}

impl_typed_fn!(0);
impl_typed_fn!(1, A0 0);
impl_typed_fn!(2, A0 0, A1 1);
impl_typed_fn!(3, A0 0, A1 1, A2 2);
impl_typed_fn!(4, A0 0, A1 1, A2 2, A3 3);
impl_typed_fn!(5, A0 0, A1 1, A2 2, A3 3, A4 4);
impl_typed_fn!(6, A0 0, A1 1, A2 2, A3 3, A4 4, A5 5);

#[cfg(test)]
mod tests {
    use super::*;
    use crate::value::Closure;

    #[test]
    fn a_detached_closure_call_passes_its_arguments_then_its_captures() {
        let count = PackedFunc::new("t.count", |_, args| Ok(Value::Int(args.len() as i64)));
        let mut ctx = CallCtx::detached();
        let bare = Closure { callable: Callable::Packed(count.clone()), captured: Vec::new() };
        assert_eq!(ctx.call_closure(&bare, &[Value::Int(1), Value::Int(2)]).unwrap().as_int().unwrap(), 2);
        let with = Closure { callable: Callable::Packed(count), captured: vec![Value::Int(3)] };
        assert_eq!(ctx.call_closure(&with, &[Value::Int(1), Value::Int(2)]).unwrap().as_int().unwrap(), 3);
    }

    #[test]
    fn typed_converts_and_checks() {
        let add = PackedFunc::typed("my.add", |a: i64, b: i64| a + b);
        let mut ctx = CallCtx::detached();
        assert_eq!(add.call(&mut ctx, &[Value::Int(2), Value::Int(3)]).unwrap().as_int().unwrap(), 5);
        let e = add.call(&mut ctx, &[Value::Int(2)]).unwrap_err().to_string();
        assert!(e.contains("my.add") && e.contains("expected 2"), "{e}");
        let e = add.call(&mut ctx, &[Value::Int(2), Value::str("x")]).unwrap_err().to_string();
        assert!(e.contains("my.add argument 1") && e.contains("found str"), "{e}");
    }

    #[test]
    fn typed_result_errors_pass_through() {
        let f = PackedFunc::typed("my.div", |a: i64, b: i64| -> Result<i64> {
            a.checked_div(b).ok_or_else(|| Error::arithmetic("division by zero"))
        });
        let mut ctx = CallCtx::detached();
        assert_eq!(
            format!("{:?}", f.call(&mut ctx, &[Value::Int(1), Value::Int(0)]).expect_err("an error")),
            r#"Arithmetic("division by zero")"#
        );
    }

    #[test]
    fn binary_functions_check_arity() {
        fn add(a: &Value, b: &Value) -> Result<Value> {
            Ok(Value::Int(a.as_int()? + b.as_int()?))
        }
        let f = PackedFunc::binary("b.add", add);
        assert!(f.as_binary().is_some());
        let mut ctx = CallCtx::detached();
        assert_eq!(f.call(&mut ctx, &[Value::Int(1), Value::Int(2)]).unwrap().as_int().unwrap(), 3);
        let e = f.call(&mut ctx, &[Value::Int(1)]).unwrap_err().to_string();
        assert!(e.contains("b.add") && e.contains("expected 2"), "{e}");
        assert!(PackedFunc::typed("t", || 1i64).as_binary().is_none());
    }

    #[test]
    fn select_functions_return_their_argument() {
        fn first<'a>(name: &str, args: &'a [Value]) -> Result<Selected<'a>> {
            args.first().map(Selected::Value).ok_or_else(|| Error::arity(name, "1", 0))
        }
        let f = PackedFunc::select("s.first", first);
        assert!(f.as_select().is_some());
        let mut ctx = CallCtx::detached();
        assert_eq!(f.call(&mut ctx, &[Value::Int(7)]).unwrap().as_int().unwrap(), 7);
        assert!(f.call(&mut ctx, &[]).unwrap_err().to_string().contains("s.first"));
    }

    #[test]
    fn panics_become_errors() {
        let f = PackedFunc::from_fn("my.boom", |_| panic!("kaboom"));
        let e = f.call(&mut CallCtx::detached(), &[]).unwrap_err().to_string();
        assert!(e.contains("panicked") && e.contains("my.boom") && e.contains("kaboom"), "{e}");
    }

    #[test]
    fn detached_context_calls_packed_closures_only() {
        let inc = PackedFunc::typed("inc", |a: i64, b: i64| a + b);
        let clo = Value::Func(Arc::new(Closure { callable: Callable::Packed(inc), captured: vec![Value::Int(10)] }));
        let mut ctx = CallCtx::detached();
        assert_eq!(ctx.call(&clo, &[Value::Int(1)]).unwrap().as_int().unwrap(), 11);
        let bc = Value::Func(Arc::new(Closure {
            callable: Callable::Bytecode { index: 0, name: "f".into(), program: None },
            captured: vec![],
        }));
        assert_eq!(
            format!("{:?}", ctx.call(&bc, &[]).expect_err("an error")),
            r#"Value("bytecode function \"f\" can only be called inside a VM")"#
        );
        assert_eq!(ctx.device(), Device::cpu(0));
    }
}
