use super::*;
use crate::dtype::DataType;
use crate::shape::Shape;
use crate::tensor::Tensor;

fn cpu() -> Device {
    Device::cpu(0)
}

thread_local! {
    /// A value [`racing_store`] stores once, on this thread.
    static RACE: std::cell::Cell<Option<i64>> = const { std::cell::Cell::new(None) };
}

/// Called by a partial-word write between its load of the word and its store of the patched
/// word: stores the value a test set, as a slot store on another thread could at that moment.
pub(super) fn racing_store(word: &AtomicI64) {
    if let Some(v) = RACE.take() {
        word.store(v, Ordering::Relaxed);
    }
}

fn word(s: &Storage, i: usize) -> i64 {
    s.words().unwrap().load(i)
}

#[test]
fn word_storage_is_zeroed_aligned_words_up_to_its_cap() {
    let s = Storage::alloc_words(5, cpu()).unwrap();
    assert!(s.is_words() && s.len() == 40 && s.words().unwrap().len() == 5);
    assert_eq!(s.as_ptr() as usize % ALIGNMENT, 0);
    assert!(s.bytes().iter().all(|b| *b == 0));
    let empty = Storage::alloc_words(0, cpu()).unwrap();
    assert!(empty.is_words() && empty.words().unwrap().is_empty() && empty.bytes().is_empty());
    // Past the cap: ordinary storage, whose bytes the doors lend in place.
    let big = Storage::alloc_words(MAX_WORDS + 1, cpu()).unwrap();
    assert!(!big.is_words() && big.words().is_none() && big.len() == 8 * (MAX_WORDS + 1));
    assert!(!Storage::alloc(8, cpu()).unwrap().is_words());
    let e = Storage::alloc_words(usize::MAX / 4, cpu()).unwrap_err().to_string();
    assert!(e.contains("cannot allocate"), "{e}");
}

#[test]
fn every_door_sees_the_words_and_writes_them_atomically() {
    let s = Storage::alloc_words(4, cpu()).unwrap();
    let words = s.words_for_write().unwrap().unwrap();
    words[1].store(-2, Ordering::Relaxed);
    assert_eq!(s.bytes()[8..16], (-2i64).to_ne_bytes());
    // A write of whole words, and of part of one: the other bytes of that word are kept.
    s.write(16, &7i64.to_ne_bytes()).unwrap();
    s.write(25, &[0xab, 0xcd]).unwrap();
    assert_eq!(word(&s, 2), 7);
    assert_eq!(word(&s, 3).to_ne_bytes(), [0, 0xab, 0xcd, 0, 0, 0, 0, 0]);
    s.write(6, &[1, 1, 1, 1]).unwrap(); // across a word boundary
    assert_eq!(s.bytes()[4..12], [0, 0, 1, 1, 1, 1, 0xff, 0xff]);
    // `write_with` stores back only the words it changed.
    let r = s.write_with(|b| {
        b[0..8].copy_from_slice(&9i64.to_ne_bytes());
        b.len()
    });
    assert_eq!(r.unwrap(), 32);
    assert_eq!(word(&s, 0), 9);
    assert_eq!(s.bytes()[8..12], [1, 1, 0xff, 0xff], "word 1 as the partial write left it");
    assert_eq!(word(&s, 2), 7);
    assert_eq!(s.read_with(|b| b[16..24].to_vec()), 7i64.to_ne_bytes());
    // A tensor over it reads the words through the doors (its view is of a copy).
    let t = Tensor::from_parts(s.clone(), 16, Shape::from(&[2][..]), None, DataType::I64).unwrap();
    assert_eq!(t.to_vec::<i64>().unwrap(), [7, word(&s, 3)]);
    assert_eq!(t.view::<i64>().unwrap().as_ptr() as usize % 8, 0);
}

#[test]
fn a_read_guard_shows_a_copy_and_still_keeps_safe_writes_out() {
    let s = Storage::alloc_words(2, cpu()).unwrap();
    let read = s.bytes();
    assert_ne!(read.as_ptr(), s.as_ptr(), "a copy, not the words");
    // The words stay writable atomically; the guard's copy does not change under it.
    s.words_for_write().unwrap().unwrap()[0].store(5, Ordering::Relaxed);
    assert_eq!(read[0..8], [0; 8]);
    // The doors exclude each other as for any storage.
    assert!(s.write(0, &[1]).unwrap_err().to_string().contains("being read"));
    assert!(s.write_with(|_| ()).unwrap_err().to_string().contains("being read"));
    drop(read);
    assert_eq!(s.bytes()[0..8], 5i64.to_ne_bytes());
}

#[test]
fn frozen_word_storage_refuses_writes_by_every_door() {
    let s = Storage::alloc_words(2, cpu()).unwrap();
    assert!(s.words_for_write().unwrap().is_some());
    s.freeze();
    let e = s.words_for_write().unwrap_err().to_string();
    assert!(e.contains("cannot write to 16 bytes of read-only storage"), "{e}");
    assert!(s.write(0, &[1]).is_err() && s.write_with(|_| ()).is_err());
    assert_eq!(s.words().unwrap().load(0), 0, "still readable");
    assert!(Storage::alloc(8, cpu()).unwrap().words_for_write().unwrap().is_none());
}

#[test]
fn threads_storing_loading_and_using_every_door_at_once_see_whole_words() {
    // Every word only ever holds one of these; a reader that saw anything else would have
    // seen a torn or lost write.
    const A: i64 = 0x0101_0101_0101_0101;
    const B: i64 = -0x0202_0202_0202_0203;
    let s = Storage::alloc_words(8, cpu()).unwrap();
    s.write_with(|b| b.chunks_exact_mut(8).for_each(|w| w.copy_from_slice(&A.to_ne_bytes()))).unwrap();
    std::thread::scope(|scope| {
        for t in 0..4 {
            let s = &s;
            scope.spawn(move || {
                for i in 0..2000usize {
                    let v = if (i + t) % 2 == 0 { A } else { B };
                    match (i + t) % 4 {
                        0 => s.words_for_write().unwrap().unwrap()[i % 8].store(v, Ordering::Relaxed),
                        1 => {
                            // Fails while another thread reads: that is the doors' rule.
                            let _ = s.write(8 * (i % 8), &v.to_ne_bytes());
                        }
                        2 => {
                            let _ = s.write_with(|b| b[8 * (i % 8)..][..8].copy_from_slice(&v.to_ne_bytes()));
                        }
                        _ => {
                            let seen = i64::from_ne_bytes(s.bytes()[8 * (i % 8)..][..8].try_into().unwrap());
                            assert!(seen == A || seen == B, "{seen:#x}");
                        }
                    }
                    let w = s.words().unwrap().load((i * 3) % 8);
                    assert!(w == A || w == B, "{w:#x}");
                }
            });
        }
    });
}

#[test]
fn the_read_view_loads_and_narrows_and_the_write_view_reads_as_one() {
    let s = Storage::alloc_words(4, cpu()).unwrap();
    let w = s.words_for_write().unwrap().unwrap();
    w.iter().zip(1..).for_each(|(w, v)| w.store(v, Ordering::Relaxed));
    let read = s.words().unwrap();
    assert!(read.len() == 4 && !read.is_empty() && read.load(3) == 4);
    let mid = read.get(1..3).unwrap();
    assert!(mid.len() == 2 && mid.load(0) == 2 && mid.load(1) == 3);
    assert!(read.get(3..5).is_none() && read.get(4..4).unwrap().is_empty());
    assert_eq!(Words::from(&w[2..]).load(0), 3);
    // Other storage has no words, to read or to write.
    let plain = Storage::alloc(8, cpu()).unwrap();
    assert!(plain.words().is_none() && plain.words_for_write().unwrap().is_none());
}

#[test]
fn a_partial_word_write_by_either_door_keeps_a_slot_store_made_between_its_load_and_its_store() {
    // A slot store that lands after the partial write loaded the word: the write patches the
    // stored word (its compare-and-swap fails and it loads again), not the one it loaded.
    let s = Storage::alloc_words(2, cpu()).unwrap();
    s.words_for_write().unwrap().unwrap()[1].store(0x0101_0101_0101_0101, Ordering::Relaxed);
    RACE.set(Some(0x0102_0304_0506_0708));
    s.write(10, &[0xaa, 0xbb]).unwrap();
    assert!(RACE.take().is_none(), "the racing store was made");
    let mut expected = 0x0102_0304_0506_0708i64.to_ne_bytes();
    expected[2..4].copy_from_slice(&[0xaa, 0xbb]);
    assert_eq!(word(&s, 1).to_ne_bytes(), expected);
    // The same for a closure that changes part of a word; a word it changes whole is stored.
    RACE.set(Some(0x1112_1314_1516_1718));
    s.write_with(|b| {
        b[8] = 0xcc;
        b[0..8].fill(0xdd);
    })
    .unwrap();
    assert!(RACE.take().is_none(), "the racing store was made");
    let mut expected = 0x1112_1314_1516_1718i64.to_ne_bytes();
    expected[0] = 0xcc;
    assert_eq!(word(&s, 1).to_ne_bytes(), expected);
    assert_eq!(word(&s, 0), i64::from_ne_bytes([0xdd; 8]));
}

#[test]
fn a_partial_word_write_keeps_a_racing_slot_store() {
    // One thread stores whole words whose low half counts up (a builtin's slot stores, high
    // half 0) until the other has made `WRITES` writes of the high half through
    // `Storage::write` (a door, which slot stores do not wait for), so the two overlap. A
    // partial write that stored back the word as it loaded it could undo a store made in
    // between: the counter would then go back. Native-endian halves: the counter is bytes
    // 0..4 of the word as `write` addresses them.
    const WRITES: u32 = 50_000;
    let s = Storage::alloc_words(1, cpu()).unwrap();
    let low = |w: i64| u32::from_ne_bytes(w.to_ne_bytes()[..4].try_into().unwrap());
    let high = |w: i64| u32::from_ne_bytes(w.to_ne_bytes()[4..].try_into().unwrap());
    let (writes, done) = (std::sync::atomic::AtomicU32::new(0), std::sync::atomic::AtomicBool::new(false));
    let last = std::thread::scope(|scope| {
        let (s, writes, done) = (&s, &writes, &done);
        let counter = scope.spawn(move || {
            let word = &s.words_for_write().unwrap().unwrap()[0];
            let mut k = 0u32;
            while writes.load(Ordering::Relaxed) < WRITES {
                k += 1;
                let mut bytes = [0; 8];
                bytes[..4].copy_from_slice(&k.to_ne_bytes());
                word.store(i64::from_ne_bytes(bytes), Ordering::Relaxed);
                // Only this thread writes the low half: it must read back as stored, for as
                // long as it looks (a lost update lands just after the store it undoes).
                for _ in 0..8 {
                    let seen = low(word.load(Ordering::Relaxed));
                    assert_eq!(seen, k, "slot store {k} undone: the word went back to {seen}");
                }
            }
            done.store(true, Ordering::Relaxed);
            k
        });
        scope.spawn(move || {
            let mut k = 0u32;
            while !done.load(Ordering::Relaxed) {
                s.write(4, &(k | 0x8080_8080).to_ne_bytes()).unwrap();
                k = k.wrapping_add(1);
                writes.fetch_add(1, Ordering::Relaxed);
            }
        });
        counter.join().unwrap()
    });
    let w = s.words().unwrap().load(0);
    assert_eq!(low(w), last, "the last slot store is kept");
    assert!(high(w) == 0 || high(w) & 0x8080_8080 == 0x8080_8080, "{w:#x}: a written high half, or none");
}
