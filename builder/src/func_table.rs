//! The function table under construction: names in order of first reference or declaration,
//! each with what is known of it so far.

use crate::error::BuildError;
use indexmap::IndexMap;
use relaxvm::{FuncKind, Instruction, Location};

/// The body of a function defined with `function()`.
#[derive(Clone, Debug, Default)]
pub(crate) struct Body {
    pub num_inputs: u32,
    pub param_names: Vec<String>,
    pub signature: Option<relaxvm::Signature>,
    pub instrs: Vec<Instruction>,
    /// One entry per instruction.
    pub locations: Vec<Option<Location>>,
}

/// One entry of the table.
#[derive(Clone, Debug, Default)]
pub(crate) struct FuncSlot {
    /// The kind given to `declare_function`, if any.
    pub declared: Option<FuncKind>,
    /// The body, once `function()` opened it.
    pub body: Option<Body>,
}

impl FuncSlot {
    /// What the entry is now: bytecode once defined or declared so, packed otherwise.
    pub fn kind(&self) -> FuncKind {
        match (&self.body, self.declared) {
            (Some(_), _) | (None, Some(FuncKind::Bytecode)) => FuncKind::Bytecode,
            (None, Some(FuncKind::Packed) | None) => FuncKind::Packed,
        }
    }
}

/// The table.
#[derive(Clone, Debug, Default)]
pub(crate) struct FuncTable {
    entries: IndexMap<String, FuncSlot>,
}

impl FuncTable {
    /// The index of `name`, adding an undecided entry if it is new.
    pub fn reference(&mut self, name: &str) -> u32 {
        if let Some(i) = self.entries.get_index_of(name) {
            return i as u32;
        }
        self.entries.insert(name.to_string(), FuncSlot::default());
        (self.entries.len() - 1) as u32
    }

    /// Fixes the kind of `name` (adding it if new).
    pub fn declare(&mut self, name: &str, kind: FuncKind) -> Result<u32, BuildError> {
        check_name(name)?;
        let i = self.reference(name);
        let entry = &mut self.entries[i as usize];
        let existing = if entry.body.is_some() { Some(FuncKind::Bytecode) } else { entry.declared };
        match existing {
            Some(existing) if existing != kind => {
                Err(BuildError::KindConflict { name: name.to_string(), existing, requested: kind })
            }
            _ => {
                entry.declared = Some(kind);
                Ok(i)
            }
        }
    }

    /// Gives `name` an empty body (adding it if new) and returns its index.
    pub fn define(&mut self, name: &str, body: Body) -> Result<u32, BuildError> {
        check_name(name)?;
        if let Some(entry) = self.entries.get(name) {
            if entry.body.is_some() {
                return Err(BuildError::DuplicateFunction(name.to_string()));
            }
            if entry.declared == Some(FuncKind::Packed) {
                return Err(BuildError::KindConflict {
                    name: name.to_string(),
                    existing: FuncKind::Packed,
                    requested: FuncKind::Bytecode,
                });
            }
        }
        let i = self.reference(name);
        self.entries[i as usize].body = Some(body);
        Ok(i)
    }

    /// Gives `name` an imported body (adding it if new): like [`define`](Self::define), but a
    /// packed declaration is resolved by the definition, as linking resolves it.
    pub fn define_imported(&mut self, name: &str, body: Body) -> Result<u32, BuildError> {
        check_name(name)?;
        if self.entries.get(name).is_some_and(|e| e.body.is_some()) {
            return Err(BuildError::ImportConflict(name.to_string()));
        }
        let i = self.reference(name);
        let entry = &mut self.entries[i as usize];
        entry.declared = None;
        entry.body = Some(body);
        Ok(i)
    }

    /// The entry at `index`.
    pub fn get(&self, index: u32) -> Option<(&str, &FuncSlot)> {
        self.entries.get_index(index as usize).map(|(n, e)| (n.as_str(), e))
    }

    /// The body of entry `index`, mutably.
    pub fn body_mut(&mut self, index: u32) -> Option<&mut Body> {
        self.entries.get_index_mut(index as usize).and_then(|(_, e)| e.body.as_mut())
    }

    /// The index of `name`, if present.
    pub fn index_of(&self, name: &str) -> Option<u32> {
        self.entries.get_index_of(name).map(|i| i as u32)
    }

    /// Every entry in table order.
    pub fn iter(&self) -> impl Iterator<Item = (&str, &FuncSlot)> {
        self.entries.iter().map(|(n, e)| (n.as_str(), e))
    }

    /// The number of entries.
    pub fn len(&self) -> usize {
        self.entries.len()
    }
}

/// Rejects names the function table cannot hold.
pub(crate) fn check_name(name: &str) -> Result<(), BuildError> {
    if name.is_empty() {
        Err(BuildError::EmptyName)
    } else {
        Ok(())
    }
}
