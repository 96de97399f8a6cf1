//! The barrier of one launch: every task of the group waits until all have arrived.
//!
//! Unlike `std::sync::Barrier` it can be *broken*: a task that fails (returns an error or
//! panics) before reaching a barrier the others wait at would otherwise leave them waiting
//! forever, so a failing task breaks the barrier and every wait returns at once, reporting it.

use std::sync::{Condvar, Mutex, MutexGuard};

/// A reusable barrier for a fixed number of tasks, which a failing task can break.
pub struct Barrier {
    count: usize,
    state: Mutex<State>,
    all_arrived: Condvar,
}

struct State {
    /// Tasks waiting in the current round.
    arrived: usize,
    /// Completed rounds: a waiter leaves when this moves on.
    round: u64,
    broken: bool,
}

/// Returned by [`Barrier::wait`] when a task of the group failed: the group cannot meet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Broken;

impl std::fmt::Display for Broken {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("a task of the group failed before reaching the barrier")
    }
}

impl std::error::Error for Broken {}

fn lock(m: &Mutex<State>) -> MutexGuard<'_, State> {
    // The state is a pair of counters, consistent whatever panicked while holding the lock.
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl Barrier {
    /// A barrier for `count` tasks (0 counts as 1).
    pub fn new(count: usize) -> Barrier {
        Barrier {
            count: count.max(1),
            state: Mutex::new(State { arrived: 0, round: 0, broken: false }),
            all_arrived: Condvar::new(),
        }
    }

    /// Waits until every task of the group has called `wait` (a group of one returns at
    /// once); [`Broken`] when a task of the group has failed, now or while waiting.
    pub fn wait(&self) -> Result<(), Broken> {
        let mut s = lock(&self.state);
        if s.broken {
            return Err(Broken);
        }
        s.arrived += 1;
        if s.arrived == self.count {
            s.arrived = 0;
            s.round += 1;
            self.all_arrived.notify_all();
            return Ok(());
        }
        let round = s.round;
        while s.round == round && !s.broken {
            s = self.all_arrived.wait(s).unwrap_or_else(|p| p.into_inner());
        }
        if s.round == round {
            Err(Broken)
        } else {
            Ok(())
        }
    }

    /// Marks the group as failed: present and future waits return [`Broken`].
    pub(crate) fn break_group(&self) {
        lock(&self.state).broken = true;
        self.all_arrived.notify_all();
    }
}
