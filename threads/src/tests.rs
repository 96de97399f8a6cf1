//! The pool's contract: concurrency, the barrier, inline launches, failures, settings.

use super::*;
use std::collections::BTreeSet;
use std::sync::atomic::{AtomicUsize, Ordering};

type Outcome = std::result::Result<(), Failures<String>>;

/// A fill's poll that never stops it.
fn no_poll() -> Result<(), String> {
    Ok(())
}

#[test]
fn tasks_run_concurrently_on_distinct_threads_and_task_0_on_the_caller() {
    let pool = Pool::new(4);
    let threads = Mutex::new(Vec::new());
    let caller = std::thread::current().id();
    // Every task waits at the barrier for the others: this returns only if all four run at once.
    let r: Outcome = pool.run(0, &|t| {
        assert_eq!(t.count(), 4);
        threads.lock().unwrap().push((t.id(), std::thread::current().id()));
        t.barrier().wait().map_err(|e| e.to_string())
    });
    assert_eq!(r, Ok(()));
    let seen = threads.into_inner().unwrap();
    assert_eq!(seen.iter().map(|(id, _)| *id).collect::<BTreeSet<_>>(), (0..4).collect());
    assert_eq!(seen.iter().map(|(_, th)| *th).collect::<std::collections::HashSet<_>>().len(), 4);
    assert!(seen.iter().any(|(id, th)| *id == 0 && *th == caller));
    // More tasks than threads: capped; fewer: exactly that many.
    let counted = |n| {
        let c = AtomicUsize::new(0);
        let r: Outcome = pool.run(n, &|t| {
            c.fetch_add(1, Ordering::Relaxed);
            assert!(t.id() < t.count());
            Ok(())
        });
        assert_eq!(r, Ok(()));
        c.into_inner()
    };
    assert_eq!((counted(64), counted(2), counted(1)), (4, 2, 1));
}

#[test]
fn the_barrier_makes_every_tasks_writes_visible_and_can_be_reused() {
    let pool = Pool::new(3);
    let slots: Vec<AtomicUsize> = (0..3).map(|_| AtomicUsize::new(0)).collect();
    let r: Outcome = pool.run(0, &|t| {
        for round in 1..=5 {
            slots[t.id()].store(round * 10 + t.id(), Ordering::Relaxed);
            t.barrier().wait().map_err(|e| e.to_string())?;
            let all: Vec<usize> = slots.iter().map(|s| s.load(Ordering::Relaxed)).collect();
            if all != (0..t.count()).map(|i| round * 10 + i).collect::<Vec<_>>() {
                return Err(format!("round {round}: task {} saw {all:?}", t.id()));
            }
            t.barrier().wait().map_err(|e| e.to_string())?;
        }
        Ok(())
    });
    assert_eq!(r, Ok(()));
}

#[test]
fn a_nested_launch_runs_inline_as_one_task() {
    let pool = Pool::new(2);
    let inner = Mutex::new(Vec::new());
    let r: Outcome = pool.run(0, &|_| {
        assert!(Pool::in_task());
        let r: Outcome = pool.run(0, &|t| {
            inner.lock().unwrap().push((t.id(), t.count(), std::thread::current().id()));
            t.barrier().wait().map_err(|e| e.to_string())
        });
        r.map_err(|f| format!("{f:?}"))
    });
    assert_eq!(r, Ok(()));
    let inner = inner.into_inner().unwrap();
    assert_eq!(inner.len(), 2);
    assert!(inner.iter().all(|(id, count, _)| (*id, *count) == (0, 1)), "{inner:?}");
    assert!(!Pool::in_task());
}

#[test]
fn launches_from_many_threads_at_once_do_not_deadlock() {
    let pool = Arc::new(Pool::new(2));
    let inline = Arc::new(AtomicUsize::new(0));
    let handles: Vec<_> = (0..4)
        .map(|_| {
            let (pool, inline) = (Arc::clone(&pool), Arc::clone(&inline));
            std::thread::spawn(move || {
                for _ in 0..300 {
                    let sum = AtomicUsize::new(0);
                    let r: Outcome = pool.run(0, &|t| {
                        t.barrier().wait().map_err(|e| e.to_string())?;
                        sum.fetch_add(1, Ordering::Relaxed);
                        Ok(())
                    });
                    assert_eq!(r, Ok(()));
                    let n = sum.into_inner();
                    assert!(n == 1 || n == 2, "{n} tasks");
                    if n == 1 {
                        inline.fetch_add(1, Ordering::Relaxed);
                    }
                }
            })
        })
        .collect();
    for h in handles {
        h.join().unwrap();
    }
}

#[test]
fn failures_and_panics_are_reported_and_break_the_barrier() {
    let pool = Pool::new(3);
    // Task 1 panics before the barrier the others wait at: they are released, not stuck.
    let r: Outcome = pool.run(0, &|t| {
        if t.id() == 1 {
            panic!("task one gives up");
        }
        match t.barrier().wait() {
            Ok(()) => Err("the barrier let a group with a failed task through".into()),
            Err(Broken) => Ok(()),
        }
    });
    let f = r.unwrap_err();
    assert_eq!(f, vec![TaskFailure { task: 1, failure: Failure::Panic("task one gives up".into()) }]);
    assert_eq!(f[0].to_string(), "task 1 panicked: task one gives up");
    // Errors come back in task order, from workers and from the caller.
    let r: Outcome = pool.run(0, &|t| if t.id() == 1 { Ok(()) } else { Err(format!("no {}", t.id())) });
    let f = r.unwrap_err();
    assert_eq!(f.iter().map(|f| f.to_string()).collect::<Vec<_>>(), ["task 0 failed: no 0", "task 2 failed: no 2"]);
    // The pool still works afterwards.
    assert_eq!(pool.run(0, &|t| t.barrier().wait().map_err(|e| e.to_string())), Ok(()));
    // A panic with a formatted message, on the caller's inline task.
    let r: Outcome = Pool::new(1).run(0, &|t| panic!("formatted {}", t.id()));
    assert_eq!(r.unwrap_err()[0].failure, Failure::Panic("formatted 0".into()));
}

#[test]
fn the_caller_body_runs_task_0() {
    let pool = Pool::new(2);
    let mut local = Vec::new(); // not shared: only the caller's body touches it
    let others = AtomicUsize::new(0);
    let r: Outcome = pool.run_with_caller(
        0,
        &|t| {
            assert_ne!(t.id(), 0);
            others.fetch_add(1, Ordering::Relaxed);
            Ok(())
        },
        &mut |t| {
            local.push(t.id());
            Ok(())
        },
    );
    assert_eq!((r, local, others.into_inner()), (Ok(()), vec![0], 1));
}

#[test]
fn one_thread_runs_everything_inline() {
    let pool = Pool::new(1);
    assert_eq!(pool.threads(), 1);
    let caller = std::thread::current().id();
    let r: Outcome = pool.run(0, &|t| {
        assert_eq!((t.id(), t.count(), std::thread::current().id()), (0, 1, caller));
        t.barrier().wait().map_err(|e| e.to_string())
    });
    assert_eq!(r, Ok(()));
    assert_eq!(Pool::new(0).threads(), 1);
    assert_eq!(Pool::new(1 << 20).threads(), MAX_THREADS);
}

#[test]
fn thread_settings_are_checked() {
    assert_eq!(parse_threads("1").unwrap(), 1);
    assert_eq!(parse_threads(" 8 ").unwrap(), 8);
    for bad in ["0", "-1", "two", "", "1.5", "1025"] {
        let e = parse_threads(bad).unwrap_err().to_string();
        assert!(e.contains(&format!("RELAXVM_NUM_THREADS={bad:?}")) && e.contains("positive integer"), "{e}");
    }
    assert!(global().threads() >= 1);
}

#[test]
fn fill_writes_every_piece_once() {
    let pool = Pool::new(2);
    for (len, piece, tasks) in [(10_000usize, 1000usize, 2usize), (10_001, 999, 8), (5, 100, 2), (7, 1, 1), (0, 4, 2)] {
        let mut out = vec![-1i64];
        out.reserve_exact(len);
        pool.fill(&mut out, len, piece, tasks, &mut no_poll, &|start, sink| {
            let n = sink.capacity();
            sink.extend((start..start + n).map(|i| i as i64 * 2));
        })
        .unwrap();
        assert_eq!(out.len(), len + 1);
        assert!(out[1..].iter().enumerate().all(|(i, v)| *v == i as i64 * 2));
    }
}

#[test]
fn fill_refuses_short_or_long_pieces_panics_and_missing_room() {
    let pool = Pool::new(2);
    let mut out: Vec<u8> = Vec::with_capacity(100);
    let e = pool.fill(&mut out, 100, 10, 2, &mut no_poll, &|start, sink| {
        let n = if start == 50 { 3 } else { sink.capacity() };
        sink.extend(std::iter::repeat_n(1, n));
    });
    assert!(e.unwrap_err().to_string().contains("the piece at element 50 expected 10 elements, found 3"));
    assert!(out.is_empty());
    let e = pool.fill(&mut out, 100, 10, 2, &mut no_poll, &|_, sink| {
        sink.extend(std::iter::repeat_n(1, 10));
        sink.push(2);
    });
    assert!(e.unwrap_err().to_string().contains("expected 10 elements, found 10 and more"));
    let e = pool.fill(&mut out, 100, 10, 2, &mut no_poll, &|start, sink| {
        sink.extend(std::iter::repeat_n(1, 20));
        assert!(start < 90, "piece {start} fails");
    });
    let e = e.unwrap_err().to_string();
    assert!(e.contains("expected 10 elements, found 10 and more") || e.contains("piece 90 fails"), "{e}");
    let e = pool.fill(&mut out, 101, 10, 2, &mut no_poll, &|_, _| {}).unwrap_err().to_string();
    assert_eq!(e, "pool fill: expected room for 101 more elements, found room for 100");
    assert!(out.is_empty());
}

#[test]
fn a_fill_polls_every_few_mib_of_work_and_a_failing_poll_stops_it() {
    // Pieces of 1000 elements; the caller polls once per POLL_EVERY elements of the work of
    // every task, whichever did it: 16 polls on any number of threads.
    for threads in [1, 2, 4] {
        let pool = Pool::new(threads);
        let len = 16 * fill::POLL_EVERY;
        let mut out: Vec<u8> = Vec::with_capacity(len);
        let mut polls = 0usize;
        let ok = pool.fill(
            &mut out,
            len,
            1000,
            threads,
            &mut || -> Result<(), String> {
                polls += 1;
                Ok(())
            },
            &|_, sink| sink.extend(std::iter::repeat_n(1, sink.capacity())),
        );
        assert!(ok.is_ok() && out.len() == len);
        assert_eq!(polls, 16, "{threads} threads");
        // A poll that fails on its second call: its error, unchanged, and nothing appended.
        let mut out: Vec<u8> = Vec::with_capacity(len);
        let mut calls = 0;
        let written = AtomicUsize::new(0);
        let e = pool.fill(
            &mut out,
            len,
            1000,
            threads,
            &mut || {
                calls += 1;
                if calls == 2 {
                    Err("stop here".to_string())
                } else {
                    Ok(())
                }
            },
            &|_, sink| {
                written.fetch_add(sink.capacity(), Ordering::Relaxed);
                sink.extend(std::iter::repeat_n(1, sink.capacity()))
            },
        );
        assert_eq!(e.unwrap_err().to_string(), "stop here");
        assert!(out.is_empty());
        assert_eq!(calls, 2, "no poll after the failing one");
        assert!(written.load(Ordering::Relaxed) < len, "{threads} threads: every piece ran");
    }
}

#[test]
fn a_fill_polls_for_the_work_of_every_task_whichever_thread_does_it() {
    // The piece at 0 waits until every other piece is written: when the caller takes it, the
    // worker does all the rest while the caller cannot poll, and the caller makes up each poll
    // due; when the worker takes it, the caller does the rest. 8 polls either way.
    let pool = Pool::new(2);
    let len = 8 * fill::POLL_EVERY;
    let piece = fill::POLL_EVERY / 4;
    for fail_at in [None, Some(8)] {
        let others = AtomicUsize::new(0);
        let mut out: Vec<u8> = Vec::with_capacity(len);
        let mut polls = 0usize;
        let r = pool.fill(
            &mut out,
            len,
            piece,
            2,
            &mut || {
                polls += 1;
                if Some(polls) == fail_at {
                    Err("the last poll".to_string())
                } else {
                    Ok(())
                }
            },
            &|start, sink| {
                if start == 0 {
                    // Until the others are written, or the fill stops (the poll due as the
                    // last piece is taken may fail before that piece runs).
                    while others.load(Ordering::Acquire) < len / piece - 1 {
                        if !sink.progress(0) {
                            return;
                        }
                        std::thread::yield_now();
                    }
                } else {
                    others.fetch_add(1, Ordering::AcqRel);
                }
                sink.extend(std::iter::repeat_n(1, sink.capacity()))
            },
        );
        assert_eq!(polls, 8);
        match fail_at {
            None => assert!(r.is_ok() && out.len() == len),
            // The poll due at the end of the work still stops the fill, with its error.
            Some(_) => assert_eq!((r.unwrap_err().to_string(), out.len()), ("the last poll".into(), 0)),
        }
    }
}

#[test]
fn a_long_piece_reports_progress_and_stops_when_a_poll_fails() {
    // One piece per task, each "reading" without end until told to stop: only polling (on the
    // caller) and the stop flag (on workers) can end it. The poll fails on its second call.
    for threads in [1, 2, 3] {
        let pool = Pool::new(threads);
        let mut out: Vec<u32> = Vec::with_capacity(threads);
        let mut calls = 0;
        let e = pool.fill(
            &mut out,
            threads,
            1,
            threads,
            &mut || {
                calls += 1;
                if calls == 2 {
                    Err("interrupted".to_string())
                } else {
                    Ok(())
                }
            },
            &|_, sink| {
                while sink.progress(4096) {
                    std::thread::yield_now();
                }
            },
        );
        assert_eq!(e.unwrap_err().to_string(), "interrupted");
        assert!(out.is_empty());
    }
}

#[test]
fn helpers_share_the_caller_s_work_and_never_meet() {
    let pool = Pool::new(3);
    for _ in 0..200 {
        let queue = Mutex::new(0..1000usize);
        let done = Mutex::new(Vec::new());
        let take = |t: &Task<'_>| -> std::result::Result<(), String> {
            assert!(t.barrier().wait().is_err(), "helpers do not all run: no barrier");
            while let Some(i) = {
                let next = queue.lock().unwrap().next();
                next
            } {
                done.lock().unwrap().push(i);
            }
            Ok(())
        };
        assert_eq!(pool.help_caller(0, &take, &mut |t| take(t)), Ok(()));
        let mut done = done.into_inner().unwrap();
        done.sort_unstable();
        assert_eq!(done, (0..1000).collect::<Vec<_>>());
    }
    // Launches that need every task still get them all, after helper launches.
    let n = AtomicUsize::new(0);
    let r: Outcome = pool.run(0, &|t| {
        n.fetch_add(1, Ordering::Relaxed);
        t.barrier().wait().map_err(|e| e.to_string())
    });
    assert_eq!((r, n.into_inner()), (Ok(()), 3));
}

/// Run by `the_environment_sets_the_pool_size` in a child process with its own environment.
#[test]
#[ignore = "run in a child process by the_environment_sets_the_pool_size"]
fn child_reports_the_pool_size() {
    let configured = match configured_threads() {
        Ok(n) => n.to_string(),
        Err(e) => e.to_string(),
    };
    println!("configured: {configured}");
    println!("global: {}", global().threads());
}

#[test]
fn the_environment_sets_the_pool_size() {
    let Ok(exe) = std::env::current_exe() else { return };
    let child = |value: Option<&str>| {
        let mut cmd = std::process::Command::new(&exe);
        cmd.args(["--ignored", "--exact", "tests::child_reports_the_pool_size", "--nocapture"]);
        match value {
            Some(v) => cmd.env(NUM_THREADS_VAR, v),
            None => cmd.env_remove(NUM_THREADS_VAR),
        };
        let out = cmd.output().expect("the test binary runs");
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        let line = |key: &str| {
            text.lines().find_map(|l| l.strip_prefix(key)).map(str::to_string).unwrap_or_else(|| panic!("{text}"))
        };
        (line("configured: "), line("global: "))
    };
    assert_eq!(child(Some("1")), ("1".to_string(), "1".to_string()));
    assert_eq!(child(Some("3")), ("3".to_string(), "3".to_string()));
    let (configured, global) = child(Some("zero"));
    assert!(configured.contains("RELAXVM_NUM_THREADS=\"zero\": expected a positive integer"), "{configured}");
    assert_eq!(global, "1", "an invalid setting gives a pool of one thread");
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get()).to_string();
    assert_eq!(child(None), (cores.clone(), cores));
}

#[test]
fn workers_run_tasks_on_the_launcher_s_behalf() {
    let pool = Pool::new(3);
    let me = thread_key();
    assert_ne!(me, 0);
    assert_eq!(launcher(), 0);
    assert!(is_me_or_my_launcher(me) && !is_me_or_my_launcher(0));
    let seen = Mutex::new(Vec::new());
    // The barrier makes the three tasks run at once, on three threads.
    let r: Outcome = pool.run(0, &|t| {
        seen.lock().unwrap().push((t.id(), thread_key(), launcher(), is_me_or_my_launcher(me)));
        t.barrier().wait().map_err(|e| e.to_string())
    });
    assert_eq!(r, Ok(()));
    let seen = seen.into_inner().unwrap();
    assert_eq!(seen.len(), 3);
    for (id, key, launcher, for_me) in seen {
        // Every task, on the caller or a worker, counts the launcher as itself.
        assert!(for_me, "task {id}");
        if id == 0 {
            assert_eq!((key, launcher), (me, 0));
        } else {
            assert_ne!(key, me);
            assert_eq!(launcher, me);
        }
    }
    // A worker is back to working for no one once the task has finished; another thread's
    // key is neither this thread nor its launcher.
    let r: Outcome = pool.run(0, &|t| {
        if t.id() != 0 && !is_me_or_my_launcher(me) {
            return Err("a worker forgot its launcher".into());
        }
        Ok(())
    });
    assert_eq!(r, Ok(()));
    let other = std::thread::spawn(thread_key).join().unwrap();
    assert!(other != me && !is_me_or_my_launcher(other));
    let r: Outcome = pool.run(0, &|_| if is_me_or_my_launcher(other) { Err("a stranger".into()) } else { Ok(()) });
    assert_eq!(r, Ok(()));
}

#[test]
fn the_caller_polls_while_it_waits_and_the_launch_still_waits_for_its_workers() {
    let pool = Pool::new(2);
    let (polled_tx, polled_rx) = std::sync::mpsc::channel::<()>();
    let polled_rx = Mutex::new(polled_rx);
    let finished = std::sync::atomic::AtomicBool::new(false);
    let polls = AtomicUsize::new(0);
    // The worker's task ends only after the caller has polled (ordered by the channel, no
    // sleeps): a poll that ran only after the workers finished would deadlock the test.
    let task = |t: &Task<'_>| -> std::result::Result<(), ()> {
        if t.id() != 0 {
            polled_rx.lock().unwrap().recv().unwrap();
            finished.store(true, Ordering::SeqCst);
        }
        Ok(())
    };
    let mut poll = || {
        if polls.fetch_add(1, Ordering::SeqCst) == 0 {
            polled_tx.send(()).unwrap();
        }
    };
    pool.run_with_caller_polling(2, &task, &mut |t| task(t), &mut poll).unwrap();
    assert!(finished.load(Ordering::SeqCst), "the launch returned before its worker finished");
    assert!(polls.load(Ordering::SeqCst) >= 1);
}
