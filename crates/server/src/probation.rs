//! Connections that have not yet made an authorised request, held to a small share of the connection slots.
//!
//! With a token, an unauthenticated client can still open connections and ask for `GET /` and `/healthz`; if it
//! opened `--max-connections` of them and kept them (by never reading, say), no client with the token could
//! connect. A new connection cannot prove anything before its first request arrives, so refusing connections
//! over a share would shut authorised clients out just the same. Instead every new connection starts on
//! probation, at most `cap` connections are on probation at once, and admitting one more closes the oldest one
//! on probation. A connection leaves probation with its first request that carries the token. So connections on
//! probation hold at most `cap` slots, and an authorised client always finds a slot: it displaces the oldest
//! unauthenticated connection and is off probation with its first request. To shut it out, a flood would have to
//! open `cap` new connections between its connecting and its first request arriving.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use tokio::sync::oneshot;

/// The connections on probation, oldest first.
pub(super) struct Probation {
    cap: usize,
    next_id: AtomicU64,
    /// Each connection's id and the sender that closes it.
    waiting: Mutex<VecDeque<(u64, oneshot::Sender<()>)>>,
}

/// A connection's place on probation. Dropping it (when the connection ends) gives the place up.
pub(super) struct Ticket {
    id: u64,
    probation: Arc<Probation>,
    cleared: AtomicBool,
}

/// Resolves when the connection is closed to make room for a newer one; never if it leaves probation.
pub(super) struct Eviction(oneshot::Receiver<()>);

impl Eviction {
    pub(super) async fn wait(self) {
        if self.0.await.is_err() {
            // Off probation (or the connection is over): nothing will evict it.
            std::future::pending::<()>().await;
        }
    }
}

impl Probation {
    /// At most `cap` (at least 1) connections on probation at once.
    pub(super) fn new(cap: usize) -> Arc<Probation> {
        Arc::new(Probation {
            cap: cap.max(1),
            next_id: AtomicU64::new(0),
            waiting: Mutex::new(VecDeque::new()),
        })
    }

    /// Puts a new connection on probation, closing the oldest ones on it to stay within the cap. Returns its
    /// ticket, the eviction it must obey, and whether an older connection was closed for it.
    pub(super) fn admit(self: &Arc<Self>) -> (Arc<Ticket>, Eviction, bool) {
        let (tx, rx) = oneshot::channel();
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let mut waiting = self.waiting.lock().unwrap();
        let mut evicted = false;
        while waiting.len() >= self.cap {
            let (_, close) = waiting
                .pop_front()
                .expect("the queue holds cap >= 1 entries");
            evicted |= close.send(()).is_ok();
        }
        waiting.push_back((id, tx));
        let ticket = Arc::new(Ticket {
            id,
            probation: self.clone(),
            cleared: AtomicBool::new(false),
        });
        (ticket, Eviction(rx), evicted)
    }

    /// Connections on probation now.
    #[cfg(test)]
    fn len(&self) -> usize {
        self.waiting.lock().unwrap().len()
    }

    fn remove(&self, id: u64) {
        let mut waiting = self.waiting.lock().unwrap();
        if let Some(i) = waiting.iter().position(|(w, _)| *w == id) {
            waiting.remove(i);
        }
    }
}

impl Ticket {
    /// The connection made an authorised request: it is off probation for good.
    pub(super) fn clear(&self) {
        if !self.cleared.swap(true, Ordering::Relaxed) {
            self.probation.remove(self.id);
        }
    }
}

impl Drop for Ticket {
    fn drop(&mut self) {
        self.probation.remove(self.id);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_oldest_connection_on_probation_makes_room_and_cleared_ones_stay() {
        let p = Probation::new(2);
        let (a, mut evict_a, e) = p.admit();
        assert!(!e);
        let (b, mut evict_b, _) = p.admit();
        b.clear();
        assert_eq!(p.len(), 1, "b is off probation");
        let (c, mut evict_c, e) = p.admit();
        assert!(!e, "a and c fit");
        assert_eq!(p.len(), 2);
        let (_d, _evict_d, e) = p.admit();
        assert!(e, "d closes a, the oldest on probation");
        assert_eq!(evict_a.0.try_recv(), Ok(()));
        assert!(evict_b.0.try_recv().is_err(), "b is never closed");
        assert!(evict_c.0.try_recv().is_err());
        // A connection that ends gives its place up.
        drop(a);
        assert_eq!(p.len(), 2);
        drop(c);
        assert_eq!(p.len(), 1);
    }
}
