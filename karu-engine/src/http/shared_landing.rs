//! A transfer's destinations lent to the pieces of a split transfer that run on other event
//! loops ([`pieces`](super::pieces)), for as long as the transfer waits for them and no
//! longer.

use std::ptr::NonNull;
use std::sync::Arc;

use parking_lot::Mutex;

use crate::http::landing::Landing;

/// The transfer's destinations while its pieces run, reachable from this loop and from the
/// loops that run some of its pieces until the transfer lets go of them ([`Lent::drop`]).
///
/// Every access is under the lock, so pieces on several loops write their bytes one chunk at
/// a time; and once the transfer lets go (when its pieces ended, or when it is dropped, a
/// cancelled batch), a piece still running on another loop finds nothing to write into and
/// drops its bytes, and the transfer has its destinations back.
pub(crate) struct SharedLanding {
    landing: Mutex<Option<LandingPtr>>,
}

/// A pointer to the transfer's `dyn Landing`, valid while it is in a [`SharedLanding`]: set by
/// [`SharedLanding::lend`] from a borrow that outlives it there, taken out before that borrow
/// ends.
struct LandingPtr(NonNull<dyn Landing + 'static>);

// SAFETY: a `Landing` is `Send`, and the pointer is dereferenced only under the
// `SharedLanding`'s lock, by one thread at a time.
unsafe impl Send for LandingPtr {}

impl SharedLanding {
    /// Lend `landing` to pieces (here and on other loops) until the returned guard drops.
    pub(crate) fn lend<'l>(landing: &'l mut (dyn Landing + 'l)) -> Lent<'l> {
        let ptr = NonNull::from(landing);
        // SAFETY: only the lifetime is erased. The pointer is used only while it is in the
        // `SharedLanding`, and `Lent`, which borrows `landing` for `'l`, takes it out when it
        // drops (taking the lock, so no access is under way), so no use outlives `'l`.
        let ptr: NonNull<dyn Landing + 'static> = unsafe { std::mem::transmute(ptr) };
        Lent {
            shared: Arc::new(SharedLanding {
                landing: Mutex::new(Some(LandingPtr(ptr))),
            }),
            _borrow: std::marker::PhantomData,
        }
    }

    /// `f` on the landing, if the transfer still lends it.
    pub(crate) fn with<R>(&self, f: impl FnOnce(&mut dyn Landing) -> R) -> Option<R> {
        let mut landing = self.landing.lock();
        let ptr = landing.as_mut()?;
        // SAFETY: the pointer is in the `SharedLanding`, so the borrow it came from is alive
        // (see `lend`), and the lock makes this the only access to it.
        Some(f(unsafe { ptr.0.as_mut() }))
    }
}

/// The transfer's side of a [`SharedLanding`]: its landing is lent while this lives.
pub(crate) struct Lent<'l> {
    shared: Arc<SharedLanding>,
    _borrow: std::marker::PhantomData<&'l mut dyn Landing>,
}

impl Lent<'_> {
    /// The shared side, for the pieces.
    pub(crate) fn shared(&self) -> &Arc<SharedLanding> {
        &self.shared
    }
}

impl Drop for Lent<'_> {
    fn drop(&mut self) {
        // Under the lock: a piece writing on another loop finishes its chunk first.
        self.shared.landing.lock().take();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::http::landing::{Dest, Scatter};

    #[test]
    fn pieces_on_other_threads_land_until_the_transfer_lets_go() {
        let mut buffer = vec![0u8; 64];
        let mut landing = Scatter::one(Dest::Slice(&mut buffer));
        let kept = {
            let lent = SharedLanding::lend(&mut landing);
            let shared = Arc::clone(lent.shared());
            std::thread::scope(|s| {
                for half in 0..2u8 {
                    let shared = Arc::clone(&shared);
                    s.spawn(move || {
                        let at = u64::from(half) * 32;
                        assert_eq!(shared.with(|l| l.put(at, &[half + 1; 32])), Some(()));
                    });
                }
            });
            drop(lent);
            // A piece that outlived the transfer finds nothing to write into.
            let late = std::thread::spawn(move || shared.with(|l| l.put(0, &[9; 64])));
            late.join().expect("the late piece")
        };
        assert_eq!(kept, None);
        assert!(landing.failure().is_none());
        drop(landing);
        assert_eq!(&buffer[..32], &[1; 32]);
        assert_eq!(&buffer[32..], &[2; 32]);
    }
}
