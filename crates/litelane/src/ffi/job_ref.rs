//! A queued write closure borrowed across threads for group commit by
//! flat combining.

use std::ptr;

/// A queued write job, borrowed from a thread that sleeps until it is done.
///
/// Group commit runs by flat combining: the thread holding the writer's turn
/// runs the closures of the writers queued behind it, back to back, in one
/// transaction. Each closure lives on its owner's stack and may borrow from
/// it, so the reference that travels through the queue has its lifetime
/// erased. That is sound because of how [`enter_with_job`] and the queue
/// work, not because of any caller's care:
/// - a `JobRef` is created only by [`enter_with_job`], and only a turn
///   holder's [`Claimed`](crate::queue::Claimed) can dereference it;
/// - the owner stays inside [`Queue::enter`](crate::queue::Queue::enter)
///   until its waiter is either granted the turn (the queue drops the
///   `JobRef` first) or marked done (by dropping the `Claimed` that holds the
///   `JobRef`, after which it can no longer be reached);
/// - the owner's wait loop cannot unwind (lock poisoning is ignored).
pub(crate) struct JobRef {
    ptr: ptr::NonNull<dyn crate::tx::Job + Send>,
}

// SAFETY: the job it points to is `Send`, and it is used by one thread at a
// time (the owner sleeps while the turn holder runs it).
unsafe impl Send for JobRef {}

impl JobRef {
    /// The job, for the turn holder that claimed it.
    pub(crate) fn get(&mut self) -> &mut (dyn crate::tx::Job + Send) {
        // SAFETY: see the type's documentation: the owner is asleep in
        // `enter_with_job` for as long as the claim that holds this exists,
        // and `&mut self` makes the access exclusive.
        unsafe { self.ptr.as_mut() }
    }
}

/// Queues `job` on the writer's queue: returns with the turn (the caller
/// then runs `job` itself) or once the turn holder has run it.
pub(crate) fn enter_with_job<'q, 'j>(
    queue: &'q crate::queue::Queue<JobRef>,
    job: &'j mut (dyn crate::tx::Job + Send + 'j),
) -> crate::queue::Entered<'q, JobRef> {
    let short: ptr::NonNull<dyn crate::tx::Job + Send + 'j> = ptr::NonNull::from(job);
    // SAFETY: only the trait object's lifetime bound changes (same layout);
    // the pointer is never used after this call returns (see `JobRef`).
    let ptr: ptr::NonNull<dyn crate::tx::Job + Send + 'static> =
        unsafe { std::mem::transmute(short) };
    queue.enter(crate::queue::Kind::Job, Some(JobRef { ptr }))
}
