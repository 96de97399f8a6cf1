//! TVM's `memory_cfg`: which [`Allocator`] a VM's builtins use on its device, by TVM's rules
//! and with TVM's error messages. A binding turns what its user passed into a [`MemoryCfg`]
//! (keeping what it cannot read as text, for the error) and asks
//! [`MemoryCfg::allocator_for`] the VM's device; Rust embedders build the [`MemoryCfg`]
//! themselves and get the same answers and errors.

use crate::{Allocator, Device};
use std::collections::HashMap;
use std::fmt;

/// TVM's kind number of the naive allocator (`VirtualMachine.NAIVE_ALLOCATOR`).
pub const NAIVE_ALLOCATOR: i64 = 1;
/// TVM's kind number of the pooled allocator (`VirtualMachine.POOLED_ALLOCATOR`).
pub const POOLED_ALLOCATOR: i64 = 2;

/// TVM's name (`"naive"`, `"pooled"`, as a `memory_cfg` string names it) and kind number of
/// `allocator`. An exhaustive match, so an allocator added without TVM's name and number fails
/// to compile here instead of being reported as another one.
pub fn allocator_name_and_kind(allocator: Allocator) -> (&'static str, i64) {
    match allocator {
        Allocator::Naive => ("naive", NAIVE_ALLOCATOR),
        Allocator::Pooled => ("pooled", POOLED_ALLOCATOR),
    }
}

/// TVM's name of `allocator` (`"naive"`, `"pooled"`), as a `memory_cfg` string names it.
pub fn allocator_name(allocator: Allocator) -> &'static str {
    allocator_name_and_kind(allocator).0
}

/// TVM's kind number of `allocator` ([`NAIVE_ALLOCATOR`], [`POOLED_ALLOCATOR`]).
pub fn allocator_kind(allocator: Allocator) -> i64 {
    allocator_name_and_kind(allocator).1
}

/// Every allocator, for the lookups by name and number (the test `every_allocator_is_listed`
/// checks it against the exhaustive match above).
const ALLOCATORS: [Allocator; 2] = [Allocator::Naive, Allocator::Pooled];

/// One allocator as a `memory_cfg` names it, before it is checked.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum AllocatorName {
    /// A name: TVM's are `"naive"` and `"pooled"`.
    Name(String),
    /// A kind number: TVM's are [`NAIVE_ALLOCATOR`] and [`POOLED_ALLOCATOR`].
    Kind(i64),
    /// A value of another type, as the embedder shows it to its users (Python: its `repr`).
    Other(String),
}

impl AllocatorName {
    /// The allocator this names, if it is one of TVM's names or kind numbers.
    pub fn allocator(&self) -> Option<Allocator> {
        let found = match self {
            AllocatorName::Name(name) => ALLOCATORS.iter().find(|a| allocator_name(**a) == name),
            AllocatorName::Kind(kind) => ALLOCATORS.iter().find(|a| allocator_kind(**a) == *kind),
            AllocatorName::Other(_) => None,
        };
        found.copied()
    }
}

impl fmt::Display for AllocatorName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            AllocatorName::Name(name) => write!(f, "{name:?}"),
            AllocatorName::Kind(kind) => write!(f, "{kind}"),
            AllocatorName::Other(text) => f.write_str(text),
        }
    }
}

/// A VM's `memory_cfg`, in the forms TVM accepts, before it is checked.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum MemoryCfg {
    /// None given: the pooled allocator (TVM's default).
    #[default]
    Default,
    /// A string: the allocator of every device.
    All(AllocatorName),
    /// A map from devices to allocators (a Python dict): a device it does not list gets the
    /// pooled allocator. Entries in the map's order.
    PerDevice(Vec<(Device, AllocatorName)>),
    /// A value of another type, named as the embedder names its type (Python: `int`): always
    /// an error, kept so that the error says what was found.
    Unsupported(String),
}

/// A `memory_cfg` TVM does not accept.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum MemoryCfgError {
    /// A string that names no allocator.
    #[error("memory_cfg must be \"naive\" or \"pooled\", found {0}")]
    UnknownName(AllocatorName),
    /// A device's entry that names no allocator.
    #[error("memory_cfg[{device}] must be VirtualMachine.NAIVE_ALLOCATOR (1), POOLED_ALLOCATOR (2), \"naive\" or \"pooled\", found {found}")]
    UnknownEntry {
        /// The device whose entry it is.
        device: Device,
        /// What the entry holds.
        found: AllocatorName,
    },
    /// One device named twice (in several spellings) with different allocators.
    #[error("memory_cfg names {device} twice: {first} and {second}")]
    Conflicting {
        /// The device.
        device: Device,
        /// Its first entry.
        first: AllocatorName,
        /// Its later entry, naming another allocator.
        second: AllocatorName,
    },
    /// Neither a string nor a map (TVM's message, a `TypeError` in Python).
    #[error("memory_cfg is expected be string or dictionary, but received {0}")]
    NotStringOrDict(String),
}

impl From<MemoryCfgError> for crate::Error {
    fn from(e: MemoryCfgError) -> Self {
        crate::Error::value(e.to_string())
    }
}

impl MemoryCfg {
    /// The allocator of `device`, by TVM's rule. Every entry is checked, not only the one of
    /// `device`: an invalid value is an error, never ignored.
    pub fn allocator_for(&self, device: Device) -> Result<Allocator, MemoryCfgError> {
        match self {
            MemoryCfg::Default => Ok(Allocator::Pooled),
            MemoryCfg::All(name) => name.allocator().ok_or_else(|| MemoryCfgError::UnknownName(name.clone())),
            MemoryCfg::PerDevice(entries) => {
                let mut chosen = Allocator::Pooled;
                // Each device's first entry: a later one naming another allocator contradicts
                // it (a map keyed by spellings can name one device twice), never silently wins.
                // (Looked up by hash: a dict of many devices costs linear time, not quadratic.)
                let mut first: HashMap<Device, (&AllocatorName, Allocator)> = HashMap::new();
                for (listed, name) in entries {
                    let allocator = name
                        .allocator()
                        .ok_or_else(|| MemoryCfgError::UnknownEntry { device: *listed, found: name.clone() })?;
                    match first.get(listed) {
                        Some((earlier, a)) if *a != allocator => {
                            return Err(MemoryCfgError::Conflicting {
                                device: *listed,
                                first: (*earlier).clone(),
                                second: name.clone(),
                            })
                        }
                        Some(_) => {}
                        None => {
                            first.insert(*listed, (name, allocator));
                        }
                    }
                    if *listed == device {
                        chosen = allocator;
                    }
                }
                Ok(chosen)
            }
            MemoryCfg::Unsupported(type_name) => Err(MemoryCfgError::NotStringOrDict(type_name.clone())),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn name(s: &str) -> AllocatorName {
        AllocatorName::Name(s.to_string())
    }

    #[test]
    fn tvm_default_strings_and_kind_numbers() {
        let cpu = Device::cpu(0);
        assert_eq!(MemoryCfg::Default.allocator_for(cpu), Ok(Allocator::Pooled));
        assert_eq!(MemoryCfg::All(name("naive")).allocator_for(cpu), Ok(Allocator::Naive));
        assert_eq!(MemoryCfg::All(name("pooled")).allocator_for(cpu), Ok(Allocator::Pooled));
        assert_eq!(AllocatorName::Kind(NAIVE_ALLOCATOR).allocator(), Some(Allocator::Naive));
        assert_eq!(AllocatorName::Kind(POOLED_ALLOCATOR).allocator(), Some(Allocator::Pooled));
        for a in [Allocator::Naive, Allocator::Pooled] {
            assert_eq!(name(allocator_name(a)).allocator(), Some(a), "the names read back");
            assert_eq!(AllocatorName::Kind(allocator_kind(a)).allocator(), Some(a), "the numbers read back");
        }
    }

    #[test]
    fn every_allocator_is_listed() {
        // Each variant (this match must name them all) is in the lookup table, once.
        let listed = |a: Allocator| match a {
            Allocator::Naive | Allocator::Pooled => ALLOCATORS.iter().filter(|b| **b == a).count(),
        };
        assert_eq!(listed(Allocator::Naive), 1);
        assert_eq!(listed(Allocator::Pooled), 1);
        assert!(ALLOCATORS.contains(&Allocator::default()));
    }

    #[test]
    fn a_map_chooses_the_allocator_of_the_vms_device_only() {
        let cfg = MemoryCfg::PerDevice(vec![
            (Device::cpu(0), AllocatorName::Kind(NAIVE_ALLOCATOR)),
            (Device::cpu(1), name("pooled")),
        ]);
        assert_eq!(cfg.allocator_for(Device::cpu(0)), Ok(Allocator::Naive));
        assert_eq!(cfg.allocator_for(Device::cpu(1)), Ok(Allocator::Pooled));
        // A device the map does not list gets the default.
        assert_eq!(cfg.allocator_for(Device::cpu(2)), Ok(Allocator::Pooled));
        assert_eq!(MemoryCfg::PerDevice(vec![]).allocator_for(Device::cpu(0)), Ok(Allocator::Pooled));
    }

    #[test]
    fn what_tvm_rejects_is_an_error_naming_what_was_found() {
        let cpu = Device::cpu(0);
        let e = MemoryCfg::All(name("arena")).allocator_for(cpu).unwrap_err();
        assert_eq!(e.to_string(), r#"memory_cfg must be "naive" or "pooled", found "arena""#);
        let e = MemoryCfg::Unsupported("int".into()).allocator_for(cpu).unwrap_err();
        assert_eq!(e.to_string(), "memory_cfg is expected be string or dictionary, but received int");
        // Another device's invalid entry is an error too: nothing invalid is ignored.
        for found in [AllocatorName::Kind(7), name("arena"), AllocatorName::Other("Evil()".into())] {
            let cfg = MemoryCfg::PerDevice(vec![(Device::cpu(0), name("naive")), (Device::cpu(3), found.clone())]);
            let e = cfg.allocator_for(cpu).unwrap_err();
            assert_eq!(e, MemoryCfgError::UnknownEntry { device: Device::cpu(3), found: found.clone() });
            assert_eq!(
                e.to_string(),
                format!(
                    "memory_cfg[cpu:3] must be VirtualMachine.NAIVE_ALLOCATOR (1), POOLED_ALLOCATOR (2), \"naive\" or \"pooled\", found {found}"
                )
            );
        }
        assert_eq!(AllocatorName::Other("Evil()".into()).to_string(), "Evil()");
        // One device twice: agreeing entries are fine, contradicting ones an error (attack
        // finding other/01), whichever device the VM runs on.
        let twice = |second| MemoryCfg::PerDevice(vec![(Device::cpu(0), name("naive")), (Device::cpu(0), second)]);
        assert_eq!(twice(AllocatorName::Kind(NAIVE_ALLOCATOR)).allocator_for(cpu), Ok(Allocator::Naive));
        let e = twice(name("pooled")).allocator_for(Device::cpu(1)).unwrap_err();
        assert_eq!(e.to_string(), r#"memory_cfg names cpu:0 twice: "naive" and "pooled""#);
        // The runtime's error carries the same text (for `?` in an embedder's code).
        let e: crate::Error = MemoryCfgError::NotStringOrDict("list".into()).into();
        assert!(e.to_string().ends_with("but received list"), "{e}");
    }
}
