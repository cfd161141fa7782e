//! An exhaustive model check of the queue's algorithm (not of its code): every
//! interleaving of a few processes taking turns, any of which may die at any
//! step or give up waiting (`acquire` with `Wait::Timeout`), explored state by state.
//!
//! With bounded barging (`xproc/barge.rs`): some processes first look at
//! the head word and try the turn byte, a bounded number of times, before
//! they take a ticket; a ticket whose turn has come takes the turn byte,
//! announcing itself as the head when it has to wait for it.
//!
//! Checked in every reachable state:
//! * at most one process holds the turn (the turn byte);
//! * a process whose ticket's turn comes has a ticket above every ticket
//!   granted before (grants in ticket order), and no smaller ticket is
//!   still live;
//! * an announced head is overtaken by at most one turn of each other
//!   process;
//! * between two turns taken by ticket, at most [`LIMIT`] turns are taken
//!   out of order while tickets wait, plus one per other process that had
//!   already looked;
//! * a live process that holds no turn and has not finished always has a
//!   step to take once the dead are gone and the live holders end their
//!   turns — no deadlock, no wedge (checked as: some non-crash step is
//!   enabled in every state that is not final).
//!
//! The atomic steps are the ones the code makes atomic: everything done
//! while holding the byte-0 mutex is one step (the mutex itself is modelled
//! to check that nothing waits on it while holding it), a kernel wait is
//! one step that is enabled when the awaited byte is free.

use std::collections::HashSet;

/// The model's limit on turns out of order between two turns by ticket
/// (the code's `MAX_BARGED_PER_TICKET`, scaled down for the search).
const LIMIT: u8 = 1;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum Pc {
    /// Between turns, `left` acquires to go.
    Idle,
    /// Waiting for the mutex to take a ticket.
    WantTicket,
    /// Holding the mutex, deciding about ticket `k` (walk step).
    Check { k: u8 },
    /// Sleeping in the kernel until ticket `k`'s byte is free.
    Sleep { k: u8 },
    /// Waiting for the mutex again, then checking `k`.
    WantMutex { k: u8 },
    /// A barger about to read the head word (`tries` attempts left).
    BargeLook { tries: u8 },
    /// A barger that read no head (and room under the limit, or no ticket
    /// waiting: then `counted` is false), about to try the turn byte.
    BargeTry { tries: u8, counted: bool },
    /// Its ticket's turn has come: about to try the turn byte.
    TakeTurn,
    /// Announced as the head, waiting for the turn byte.
    HeadWait,
    /// Holding the turn (`by_ticket`: through its ticket).
    Holding { by_ticket: bool },
    /// Turn byte released, ticket byte not yet.
    Releasing,
    /// Finished all its acquires.
    Done,
    /// Killed.
    Dead,
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct Proc {
    pc: Pc,
    left: u8,
    ticket: u8,
    /// Gave up waiting (`Wait::Timeout`): steps aside when its turn comes.
    abandoned: bool,
    /// Whether this process may still give up once (bounded for the search).
    may_abandon: bool,
    /// Barge attempts before each ticket (0: never barges).
    barges: u8,
    /// Turns taken out of order while this process was the announced head.
    overtaken: u8,
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct State {
    next: u8,
    floor: u8,
    mutex: Option<u8>,
    /// Ticket bytes write-locked by a live ticket: `owner[t]`.
    owner: Vec<Option<u8>>,
    /// Who write-locks the turn byte.
    turn: Option<u8>,
    /// The head word: an announced ticket plus one, 0 when none.
    head: u8,
    /// Turns taken out of order while tickets waited, since the last turn
    /// taken by ticket.
    barged: u8,
    procs: Vec<Proc>,
    /// Highest ticket granted so far.
    last_granted: u8,
    crashes_left: u8,
}

impl State {
    fn byte_free(&self, k: u8) -> bool {
        self.owner[k as usize].is_none()
    }

    fn die(&mut self, p: usize) {
        if self.mutex == Some(p as u8) {
            self.mutex = None;
        }
        if self.turn == Some(p as u8) {
            self.turn = None;
        }
        for o in self.owner.iter_mut() {
            if *o == Some(p as u8) {
                *o = None;
            }
        }
        self.procs[p].pc = Pc::Dead;
    }

    fn finish_turn(&mut self, p: usize) {
        let pr = &mut self.procs[p];
        pr.left -= 1;
        pr.abandoned = false;
        pr.pc = if pr.left == 0 { Pc::Done } else { Pc::Idle };
    }

    /// Process `p` takes the turn byte: checks the exclusion, and counts
    /// an out-of-order turn against the announced head.
    fn take_turn(&mut self, p: usize, by_ticket: bool, counted: bool) {
        assert!(self.turn.is_none(), "the turn byte is held: {self:?}");
        self.turn = Some(p as u8);
        for (q, other) in self.procs.iter().enumerate() {
            assert!(
                q == p || !matches!(other.pc, Pc::Holding { .. }),
                "two holders: {self:?}"
            );
        }
        if by_ticket {
            self.barged = 0;
        } else if counted {
            self.barged += 1;
            let others = self.procs.len() as u8 - 1;
            assert!(
                self.barged <= LIMIT + others,
                "{} turns out of order",
                self.barged
            );
        }
        if !by_ticket {
            let n = self.procs.len() as u8;
            for other in self.procs.iter_mut() {
                if other.pc == Pc::HeadWait {
                    other.overtaken += 1;
                    assert!(
                        other.overtaken < n,
                        "a head overtaken {} times",
                        other.overtaken
                    );
                }
            }
        }
        self.procs[p].pc = Pc::Holding { by_ticket };
    }

    /// Every state reachable in one step, with whether the step was
    /// progress (not a crash, not a caller giving up).
    fn successors(&self) -> Vec<(State, bool)> {
        let mut out = Vec::new();
        for p in 0..self.procs.len() {
            let pr = &self.procs[p];
            if matches!(pr.pc, Pc::Dead | Pc::Done) {
                continue;
            }
            if self.crashes_left > 0 {
                let mut s = self.clone();
                s.crashes_left -= 1;
                s.die(p);
                out.push((s, false));
            }
            if pr.may_abandon
                && !pr.abandoned
                && matches!(
                    pr.pc,
                    Pc::WantTicket
                        | Pc::Check { .. }
                        | Pc::Sleep { .. }
                        | Pc::WantMutex { .. }
                        | Pc::HeadWait
                )
            {
                // The caller's timeout fires: it walks away; its helper
                // stays queued and steps aside at its turn.
                let mut s = self.clone();
                s.procs[p].abandoned = true;
                s.procs[p].may_abandon = false;
                out.push((s, false));
                // (the helper's own steps follow below)
            }
            let mut s = self.clone();
            let me = p as u8;
            match pr.pc {
                Pc::Idle if pr.barges > 0 => s.procs[p].pc = Pc::BargeLook { tries: pr.barges },
                Pc::Idle => s.procs[p].pc = Pc::WantTicket,
                Pc::BargeLook { tries } => {
                    let waiting = s.next > s.floor + 1;
                    let room = !waiting || s.barged < LIMIT;
                    s.procs[p].pc = match (s.head == 0 && room, tries) {
                        (true, _) => Pc::BargeTry {
                            tries,
                            counted: waiting,
                        },
                        (false, 1) => Pc::WantTicket,
                        (false, _) => Pc::BargeLook { tries: tries - 1 },
                    }
                }
                Pc::BargeTry { tries, counted } => match (s.turn, tries) {
                    (None, _) => s.take_turn(p, false, counted),
                    (Some(_), 1) => s.procs[p].pc = Pc::WantTicket,
                    _ => s.procs[p].pc = Pc::BargeLook { tries: tries - 1 },
                },
                Pc::TakeTurn => match s.turn {
                    None => {
                        // Every ticket below is finished: a head left
                        // announced is a dead one's.
                        s.head = 0;
                        s.take_turn(p, true, false);
                    }
                    Some(_) => {
                        s.head = pr.ticket + 1;
                        s.procs[p].overtaken = 0;
                        s.procs[p].pc = Pc::HeadWait;
                    }
                },
                Pc::HeadWait if pr.abandoned => {
                    // Timed out waiting for the turn byte: withdraw (only
                    // our own announcement) and finish the ticket.
                    if s.head == pr.ticket + 1 {
                        s.head = 0;
                    }
                    s.owner[pr.ticket as usize] = None;
                    s.finish_turn(p);
                }
                Pc::HeadWait => {
                    if s.turn.is_some() {
                        continue;
                    }
                    s.head = 0;
                    s.take_turn(p, true, false);
                }
                Pc::WantTicket | Pc::WantMutex { .. } => {
                    if s.mutex.is_some() {
                        continue;
                    }
                    s.mutex = Some(me);
                    match pr.pc {
                        Pc::WantTicket => {
                            let t = s.next;
                            assert!(s.byte_free(t), "a fresh ticket's byte is held");
                            s.next += 1;
                            s.owner[t as usize] = Some(me);
                            s.procs[p].ticket = t;
                            s.procs[p].pc = Pc::Check { k: t - 1 };
                        }
                        Pc::WantMutex { k } => s.procs[p].pc = Pc::Check { k },
                        _ => unreachable!(),
                    }
                }
                Pc::Check { k } => {
                    assert_eq!(s.mutex, Some(me));
                    let t = pr.ticket;
                    if k < s.floor {
                        if pr.abandoned {
                            // The gate refuses: give the ticket up.
                            s.owner[t as usize] = None;
                            s.mutex = None;
                            s.finish_turn(p);
                        } else {
                            s.floor = t;
                            s.mutex = None;
                            // The ticket's turn has come: check the order
                            // (the exclusion is checked at the turn byte).
                            assert!(t > s.last_granted, "granted out of order: {s:?}");
                            for u in 1..t {
                                assert!(s.byte_free(u), "ticket {u} live below {t}: {s:?}");
                            }
                            for (q, other) in s.procs.iter().enumerate() {
                                assert!(
                                    q == p
                                        || !matches!(
                                            other.pc,
                                            Pc::Holding { by_ticket: true }
                                                | Pc::TakeTurn
                                                | Pc::HeadWait
                                        ),
                                    "two tickets' turns at once: {s:?}"
                                );
                            }
                            s.last_granted = t;
                            s.procs[p].pc = Pc::TakeTurn;
                        }
                    } else if s.byte_free(k) {
                        s.procs[p].pc = Pc::Check { k: k - 1 };
                    } else {
                        s.mutex = None;
                        s.procs[p].pc = Pc::Sleep { k };
                    }
                }
                Pc::Sleep { k } => {
                    if !s.byte_free(k) {
                        continue;
                    }
                    s.procs[p].pc = Pc::WantMutex { k: k - 1 };
                }
                Pc::Holding { by_ticket } => {
                    // The turn byte first, then the ticket byte.
                    s.turn = None;
                    if by_ticket {
                        s.procs[p].pc = Pc::Releasing;
                    } else {
                        s.finish_turn(p);
                    }
                }
                Pc::Releasing => {
                    s.owner[pr.ticket as usize] = None;
                    s.finish_turn(p);
                }
                Pc::Done | Pc::Dead => unreachable!(),
            }
            out.push((s, true));
        }
        out
    }
}

/// The initial state: `procs` processes, each with `acquires` turns to
/// take, `barges[i]` barge attempts before each ticket (missing: none).
fn initial(procs: usize, acquires: u8, crashes: u8, abandons: bool, barges: &[u8]) -> State {
    State {
        next: 1,
        floor: 1,
        mutex: None,
        owner: vec![None; procs * acquires as usize + 2],
        turn: None,
        head: 0,
        barged: 0,
        procs: (0..procs)
            .map(|i| Proc {
                pc: Pc::Idle,
                left: acquires,
                ticket: 0,
                abandoned: false,
                may_abandon: abandons,
                barges: barges.get(i).copied().unwrap_or(0),
                overtaken: 0,
            })
            .collect(),
        last_granted: 0,
        crashes_left: crashes,
    }
}

/// Explores every state from [`initial`]; returns how many were reachable.
fn explore(procs: usize, acquires: u8, crashes: u8, abandons: bool, barges: &[u8]) -> usize {
    let init = initial(procs, acquires, crashes, abandons, barges);
    let mut seen = HashSet::new();
    let mut stack = vec![init];
    while let Some(s) = stack.pop() {
        if !seen.insert(s.clone()) {
            continue;
        }
        let next = s.successors();
        let final_state = s.procs.iter().all(|p| matches!(p.pc, Pc::Done | Pc::Dead));
        assert!(
            final_state || next.iter().any(|(_, progress)| *progress),
            "stuck: {s:?}"
        );
        stack.extend(next.into_iter().map(|(s, _)| s));
    }
    seen.len()
}

fn long() -> bool {
    std::env::var("LITELANE_XPROC_LONG").is_ok_and(|v| v != "0" && !v.is_empty())
}

#[test]
fn three_processes_two_turns_each_any_crashes() {
    let t = std::time::Instant::now();
    let (procs, crashes) = if long() { (3, 3) } else { (3, 1) };
    let states = explore(procs, 2, crashes, false, &[]);
    println!(
        "model: {procs} processes x 2 turns, {crashes} crash(es): {states} states in {:?}",
        t.elapsed()
    );
    assert!(states > 1000, "explored only {states} states");
}

#[test]
fn abandoned_waits_step_aside() {
    let t = std::time::Instant::now();
    let (procs, crashes) = if long() { (3, 2) } else { (3, 0) };
    let states = explore(procs, 2, crashes, true, &[]);
    println!("model: {procs} processes x 2 turns, {crashes} crash(es), timeouts: {states} states in {:?}", t.elapsed());
    assert!(states > 1000, "explored only {states} states");
}

/// Two of three processes barge (twice before each ticket), one only takes
/// tickets; any process may die, or give up waiting.
#[test]
fn bargers_keep_the_exclusion_and_the_bound() {
    let t = std::time::Instant::now();
    let (crashes, abandons) = if long() { (2, true) } else { (1, false) };
    let states = explore(3, 2, crashes, abandons, &[2, 2, 0]);
    println!(
        "model: 3 processes x 2 turns, 2 barging, {crashes} crash(es), timeouts {abandons}: \
         {states} states in {:?}",
        t.elapsed()
    );
    assert!(states > 1000, "explored only {states} states");
}

/// Every process barges, and may give up waiting as the head.
#[test]
fn every_process_barging_with_timeouts() {
    let states = explore(3, 2, 0, true, &[1, 1, 1]);
    assert!(states > 1000, "explored only {states} states");
}

#[test]
fn the_model_catches_a_barger_that_ignores_the_turn_byte() {
    // Sanity check of the checker: a barger that takes the turn while
    // another holds it must be caught.
    let mut s = initial(2, 1, 0, false, &[1, 1]);
    s.turn = Some(0);
    s.procs[0].pc = Pc::Holding { by_ticket: false };
    s.procs[1].pc = Pc::BargeTry {
        tries: 1,
        counted: false,
    };
    s.turn = None; // pretend the byte is free while process 0 holds
    let broken = std::panic::catch_unwind(|| s.successors());
    assert!(broken.is_err(), "two holders went unnoticed");
}

#[test]
fn the_model_catches_a_broken_walk() {
    // Sanity check of the checker: a walk that trusts `floor` alone (takes
    // the turn without waiting for ticket t - 1) must be caught.
    let mut s = initial(2, 1, 0, false, &[]);
    // Process 0 takes ticket 1 and the turn.
    for _ in 0..4 {
        s = s
            .successors()
            .into_iter()
            .find(|(n, _)| n.procs[0] != s.procs[0])
            .unwrap()
            .0;
    }
    assert_eq!(s.procs[0].pc, Pc::Holding { by_ticket: true });
    // Process 1 takes ticket 2; breaking the rule (pretending k < floor)
    // trips the exclusion assertion.
    s.procs[1].pc = Pc::WantTicket;
    s = s
        .successors()
        .into_iter()
        .find(|(n, _)| n.procs[1].pc != Pc::WantTicket)
        .unwrap()
        .0;
    s.floor = 3;
    let broken = std::panic::catch_unwind(|| s.successors());
    assert!(broken.is_err(), "two holders went unnoticed");
}
