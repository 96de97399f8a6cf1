//! Compiled mode's allocation sites: what a site keeps under each `memory_cfg`, and the
//! storage a reused site hands out.

use super::*;

fn storage_of(v: &Value) -> relaxvm::Storage {
    match v {
        Value::Storage(s) => s.clone(),
        other => panic!("expected a storage, found {}", other.describe()),
    }
}

#[test]
fn compiled_allocation_sites_follow_memory_cfg() {
    // F9: the machine code's `alloc_storage` call is a site with a cache, as a bytecode call
    // instruction is: pooled (the default) keeps what it made and hands it out again once
    // nothing else holds it; naive keeps nothing.
    let mut vm = vm_with(alloc_fn);
    assert_eq!(vm.allocator(), relaxvm::Allocator::Pooled);
    let first = storage_of(&vm.invoke("f", &[tensor()]).unwrap());
    assert!(!first.is_sole(), "the site keeps the storage it made");
    let address = first.as_ptr();
    drop(first);
    // The site's storage stayed alive, so the same address is the same storage, handed out again.
    let again = storage_of(&vm.invoke("f", &[tensor()]).unwrap());
    assert_eq!(again.as_ptr(), address);
    // A result the caller keeps is never handed out again.
    let other = storage_of(&vm.invoke("f", &[tensor()]).unwrap());
    assert!(!other.ptr_eq(&again) && other.as_ptr() != address);
    // Switching to naive drops what the sites keep, and nothing is kept after.
    vm.set_allocator(relaxvm::Allocator::Naive);
    assert!(other.is_sole());
    let naive = storage_of(&vm.invoke("f", &[tensor()]).unwrap());
    assert!(naive.is_sole(), "a naive VM's sites keep nothing");
}

#[test]
fn a_compiled_site_reuses_its_storage_as_left_and_a_naive_one_gets_zeroed_storage() {
    // The storage TVM's pooled allocator gives machine code is uninitialised: a compiled-mode
    // site's reused block holds what its last run left (never uninitialised memory: new
    // storage starts zeroed), a bytecode site's and a naive VM's are zeroed.
    let mut vm = vm_with(alloc_fn);
    let first = storage_of(&vm.invoke("f", &[tensor()]).unwrap());
    assert!(first.bytes().iter().all(|b| *b == 0), "new storage starts zeroed");
    first.write(0, &[5; 16]).unwrap();
    let address = first.as_ptr();
    drop(first);
    let again = storage_of(&vm.invoke("f", &[tensor()]).unwrap());
    assert_eq!(again.as_ptr(), address, "the site's block, handed out again");
    assert!(again.bytes().iter().all(|b| *b == 5), "as the last run left it, not zeroed");
    drop(again);
    vm.set_allocator(relaxvm::Allocator::Naive);
    let naive = storage_of(&vm.invoke("f", &[tensor()]).unwrap());
    assert!(naive.bytes().iter().all(|b| *b == 0));
}
