use super::*;

#[test]
fn alloc_is_zeroed_and_aligned() {
    let s = Storage::alloc(1000, Device::cpu(0)).unwrap();
    assert_eq!(s.len(), 1000);
    assert_eq!(s.as_ptr() as usize % ALIGNMENT, 0);
    assert!(s.bytes().iter().all(|b| *b == 0));
    // Every size, including ones the allocator serves from its smallest bins, is aligned,
    // zeroed and writable up to its last byte (the padding never shortens the block).
    let blocks: Vec<Storage> = (1..300).map(|n| Storage::alloc(n, Device::cpu(0)).unwrap()).collect();
    for s in &blocks {
        assert_eq!(s.as_ptr() as usize % ALIGNMENT, 0);
        assert!(s.bytes().iter().all(|b| *b == 0));
        s.write(s.len() - 1, &[0xff]).unwrap();
        assert_eq!(s.bytes()[s.len() - 1], 0xff);
    }
}

#[test]
fn huge_alloc_is_an_error() {
    let pib = 1i128 << 50;
    let e = Storage::alloc_checked(pib, Device::cpu(0)).unwrap_err();
    assert!(e.to_string().contains("cannot allocate"), "{e}");
    assert_eq!(
        format!("{:?}", Storage::alloc_checked(-1, Device::cpu(0)).expect_err("an error")),
        r#"Value("storage size must be non-negative, got -1")"#
    );
    assert_eq!(
        format!("{:?}", Storage::alloc_checked(i128::MAX, Device::cpu(0)).expect_err("an error")),
        r#"Alloc { bytes: 170141183460469231731687303715884105727, reason: "size exceeds the address space" }"#
    );
}

#[test]
fn from_vec_is_zero_copy() {
    let v = vec![1.0f32, 2.0, 3.0];
    let p = v.as_ptr() as usize;
    let s = Storage::from_vec(v);
    assert_eq!(s.as_ptr() as usize, p);
    assert_eq!(s.len(), 12);
}

#[test]
fn write_checks_bounds() {
    let s = Storage::alloc(4, Device::cpu(0)).unwrap();
    s.write(1, &[7, 8]).unwrap();
    assert_eq!(&*s.bytes(), &[0, 7, 8, 0]);
    assert_eq!(
        format!("{:?}", s.write(3, &[1, 2]).expect_err("an error")),
        r#"Index { what: "storage bytes", index: 5, len: 4 }"#
    );
    let empty = Storage::alloc(0, Device::cpu(0)).unwrap();
    assert!(empty.is_empty() && empty.bytes().is_empty());
}

#[test]
fn a_write_while_the_bytes_are_read_is_an_error_not_an_alias() {
    let s = Storage::alloc(4, Device::cpu(0)).unwrap();
    let read = s.bytes();
    let e = s.write(0, &[1]).unwrap_err();
    assert!(e.to_string().contains("being read"), "{e}");
    // Writing a storage's own bytes into itself is the same case.
    assert_eq!(
        format!("{:?}", s.write(1, &read[..2]).expect_err("an error")),
        r#"Value("cannot write to a tensor whose bytes are being read (the destination overlaps a source, or another thread reads it)")"#
    );
    assert_eq!(&*read, &[0, 0, 0, 0]);
    drop(read);
    s.write(0, &[1]).unwrap();
    assert_eq!(&*s.bytes(), &[1, 0, 0, 0]);
}

#[test]
fn closures_hold_the_bytes_like_a_write() {
    let s = Storage::alloc(4, Device::cpu(0)).unwrap();
    s.write_with(|b| b[1] = b[0] + 5).unwrap();
    assert_eq!(s.read_with(|b| b.to_vec()), [0, 5, 0, 0]);
    // Inside a short read, a write is refused, not aliased.
    s.read_with(|_| {
        assert!(s.write(0, &[1]).unwrap_err().to_string().contains("being read"));
        assert!(s.write_with(|_| ()).unwrap_err().to_string().contains("being read"));
    });
    // While a reader holds the bytes, a short read reads beside it, and a write_with fails.
    let read = s.bytes();
    assert_eq!(s.read_with(|b| b[1]), 5);
    assert!(s.write_with(|_| ()).unwrap_err().to_string().contains("being read"));
    drop(read);
    // A closure that panics lets go of the bytes as it unwinds.
    let panicked = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| s.write_with(|_| panic!("boom"))));
    assert_eq!(panicked.expect_err("the closure's panic unwinds").downcast_ref::<&str>(), Some(&"boom"));
    s.write(0, &[9]).unwrap();
    assert_eq!(s.bytes()[0], 9);
    s.freeze();
    let e = s.write_with(|_| ()).unwrap_err();
    assert!(e.to_string().contains("cannot write to 4 bytes of read-only storage"), "{e}");
    assert_eq!(s.read_with(|b| b[0]), 9);
}

#[test]
fn frozen_storage_refuses_writes_and_stays_readable() {
    let s = Storage::alloc(2, Device::cpu(0)).unwrap();
    let alias = s.clone();
    s.freeze();
    assert!(alias.is_frozen());
    let e = alias.write(0, &[9]).unwrap_err();
    assert!(e.to_string().contains("read-only"), "{e}");
    assert_eq!(&*s.bytes(), &[0, 0]);
}

#[test]
fn sealed_storage_is_frozen_read_only_pages() {
    let pages = Arc::new(
        read_only::ReadOnlyPages::filled(100, |b| {
            b[10] = 42;
            Ok(())
        })
        .unwrap(),
    );
    let s = Storage::from_read_only_pages(pages.clone(), 8, 4).unwrap();
    assert!(s.is_sealed() && s.is_frozen());
    assert_eq!(&*s.bytes(), &[0, 0, 42, 0]);
    assert!(read_only::contains(s.as_ptr() as usize));
    let e = s.write(0, &[1]).unwrap_err();
    assert!(e.to_string().contains("read-only"), "{e}");
    let e = s.write_with(|_| ()).unwrap_err();
    assert!(matches!(e.kind(), crate::error::ErrorKind::Value(_)), "{e:?}");
    assert_eq!(
        e.to_string(),
        "cannot write to 4 bytes of read-only storage (a constant of an executable, or read-only memory)"
    );
    assert_eq!(
        format!("{:?}", Storage::from_read_only_pages(pages.clone(), 98, 4).expect_err("an error")),
        r#"Index { what: "read-only pages", index: 102, len: 100 }"#
    );
    // The storage keeps the pages mapped (and registered) after the caller's handle goes.
    let at = s.as_ptr() as usize;
    drop(pages);
    assert!(read_only::contains(at) && s.bytes()[2] == 42);
    assert!(!read_only::tests::listed_after_drop(s, at));
    // Storage that is only frozen is not sealed.
    let plain = Storage::alloc(4, Device::cpu(0)).unwrap();
    plain.freeze();
    assert!(plain.is_frozen() && !plain.is_sealed());
}

#[test]
fn readers_and_writers_on_many_threads_never_see_a_torn_write() {
    // Each write stores one byte value across the whole block; a reader must see it whole.
    let s = Storage::alloc(4096, Device::cpu(0)).unwrap();
    std::thread::scope(|scope| {
        for t in 0..2u8 {
            let s = &s;
            scope.spawn(move || {
                for i in 0..2000u32 {
                    let byte = t.wrapping_mul(100).wrapping_add(i as u8);
                    let _ = match t {
                        0 => s.write(0, &[byte; 4096]),
                        _ => s.write_with(|b| b.fill(byte)),
                    };
                }
            });
        }
        for t in 0..2 {
            let s = &s;
            scope.spawn(move || {
                let whole = |b: &[u8]| assert!(b.iter().all(|x| *x == b[0]), "a reader saw a write half done");
                for _ in 0..2000 {
                    match t {
                        0 => whole(&s.bytes()),
                        _ => s.read_with(whole),
                    }
                }
            });
        }
    });
}
