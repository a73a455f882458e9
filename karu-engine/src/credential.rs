//! Credentials: opaque proof of identity that backends attach to requests.

use std::any::Any;
use std::fmt;
use std::sync::Arc;
use std::time::SystemTime;

/// A credential obtained for one scope: a provider-specific secret value (its type is the
/// provider's business), an optional expiry. Cheap to clone. Its `Debug` never shows the
/// secret.
#[derive(Clone)]
pub struct Credential {
    secret: Arc<dyn Any + Send + Sync>,
    expires: Option<SystemTime>,
}

impl Credential {
    /// Wrap a provider's secret value.
    pub fn new<T: Any + Send + Sync>(secret: T) -> Self {
        Credential {
            secret: Arc::new(secret),
            expires: None,
        }
    }

    /// Set when it stops being valid.
    pub fn with_expiry(mut self, expires: Option<SystemTime>) -> Self {
        self.expires = expires;
        self
    }

    /// The secret value, if it is of type `T`.
    pub fn get<T: Any>(&self) -> Option<&T> {
        self.secret.downcast_ref::<T>()
    }

    /// When it expires, if it does.
    pub fn expires(&self) -> Option<SystemTime> {
        self.expires
    }
}

impl fmt::Debug for Credential {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Credential")
            .field("expires", &self.expires)
            .finish_non_exhaustive()
    }
}
