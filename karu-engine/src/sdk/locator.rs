//! Parsed addresses: the canonical identity of an object and the optional window a caller sees.

use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::sdk::backend::Backend;
use crate::sdk::redact;
use crate::sdk::status::{Error, Status};

/// The normalised identity of an object, used for planner grouping, path rules and credential
/// scope. Different accepted spellings of one object resolve to the same canonical path.
///
/// Its [`Display`](fmt::Display) redacts a query string (`?…` becomes `?<redacted>`), since a
/// query may hold a signature, and clips an identity too long to quote whole
/// ([`redact::clipped`]); [`CanonicalPath::as_str`] gives the full identity.
#[derive(Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct CanonicalPath(Arc<str>);

impl CanonicalPath {
    /// Wrap an already-normalised identity. Backends call this from
    /// [`Backend::resolve`].
    pub fn new(normalised: impl Into<Arc<str>>) -> Self {
        CanonicalPath(normalised.into())
    }

    /// The full identity, including any query string. Never put this in a message.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The identity without its query string, safe for messages and logs
    /// ([`redact::without_query`]).
    pub fn redacted(&self) -> &str {
        redact::without_query(&self.0)
    }

    /// Whether the canonical `prefix` contains this path on whole segments, as a credential
    /// callback's prefix and a path rule do: `s3://b/p` contains `s3://b/p` and `s3://b/p/x`
    /// but not `s3://b/px`; a prefix ending in `/` contains everything below it, and a scheme
    /// alone (`s3://`) every path of its scheme.
    ///
    /// ```
    /// use karu_engine::sdk::CanonicalPath;
    ///
    /// let path = CanonicalPath::new("gs://bucket/dir/a.bin");
    /// assert!(path.is_under("gs://bucket"));
    /// assert!(path.is_under("gs://"));
    /// assert!(!path.is_under("gs://bucket/di"));
    /// ```
    pub fn is_under(&self, prefix: &str) -> bool {
        let path = self.as_str();
        if !path.starts_with(prefix) {
            return false;
        }
        prefix.ends_with('/')
            || path.len() == prefix.len()
            || path.as_bytes()[prefix.len()] == b'/'
            || (prefix.ends_with("://") && path.len() > prefix.len())
    }
}

impl fmt::Display for CanonicalPath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&redact::clipped(self.redacted()))?;
        if self.0.contains('?') {
            write!(f, "?{}", redact::REDACTED)?;
        }
        Ok(())
    }
}

impl fmt::Debug for CanonicalPath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "CanonicalPath({self})")
    }
}

/// The part of an object a locator exposes: `[start, start + len)` of the underlying object, or
/// everything from `start` on when `len` is `None` (an unbounded window).
///
/// Offsets of reads through a windowed locator are relative to `start`; reads leaving a bounded
/// window fail with [`Status::InvalidRange`] before any input or output.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Window {
    /// Absolute offset of the window's first byte in the underlying object.
    pub start: u64,
    /// Visible length, or `None` for "to the end of the object".
    pub len: Option<u64>,
}

/// What a transfer for this locator does: a positional file read, or a request prepared by the
/// backend and sent by the engine.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Target {
    /// A local file at this absolute path.
    File(PathBuf),
    /// A remote object; the backend prepares requests for it.
    Remote,
}

/// What a backend returns from [`Backend::resolve`]: the meaning of an
/// address, established without network access or credentials.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Resolved {
    /// The normalised identity.
    pub canonical: CanonicalPath,
    /// The provider container (bucket, account/container, repository), if any.
    pub container: Option<String>,
    /// The object key inside the container (for a local file: its absolute path).
    pub key: String,
    /// How transfers reach the bytes.
    pub target: Target,
    /// The region the address itself named (an AWS URL's host names one), if any: a hint for
    /// [`Backend::prepare`], not part of the identity. Spellings that
    /// name different regions share their canonical path.
    pub region: Option<String>,
}

impl Resolved {
    /// A local file at an absolute, normalised path.
    pub fn file(path: PathBuf) -> Self {
        let key = path.to_string_lossy().into_owned();
        Resolved {
            canonical: CanonicalPath::new(key.as_str()),
            container: None,
            key,
            target: Target::File(path),
            region: None,
        }
    }

    /// A remote object.
    pub fn remote(canonical: CanonicalPath, container: Option<String>, key: String) -> Self {
        Resolved {
            canonical,
            container,
            key,
            target: Target::Remote,
            region: None,
        }
    }

    /// The same object, with the region its address named.
    pub fn with_region(mut self, region: Option<String>) -> Self {
        self.region = region;
        self
    }
}

/// A parsed address: backend, canonical path, container, key and optional [`Window`].
///
/// Cheap to clone (one reference count). Obtain one from
/// [`Registry::resolve`](crate::Registry::resolve) (or `Client::locate` in the `karu` crate);
/// narrow it with [`Locator::with_window`]. Windows work the same for every backend: the
/// engine converts window offsets to absolute ones before planning.
#[derive(Clone)]
pub struct Locator(Arc<LocatorInner>);

struct LocatorInner {
    backend: Arc<dyn Backend>,
    resolved: Resolved,
    window: Option<Window>,
}

impl Locator {
    /// A locator for a resolved object, served by `backend`, without a window.
    pub fn new(backend: Arc<dyn Backend>, resolved: Resolved) -> Self {
        Locator(Arc::new(LocatorInner {
            backend,
            resolved,
            window: None,
        }))
    }

    /// The backend that serves this object.
    pub fn backend(&self) -> &Arc<dyn Backend> {
        &self.0.backend
    }

    /// The normalised identity of the object.
    pub fn canonical(&self) -> &CanonicalPath {
        &self.0.resolved.canonical
    }

    /// The provider container, if any.
    pub fn container(&self) -> Option<&str> {
        self.0.resolved.container.as_deref()
    }

    /// The object key.
    pub fn key(&self) -> &str {
        &self.0.resolved.key
    }

    /// How transfers reach the bytes.
    pub fn target(&self) -> &Target {
        &self.0.resolved.target
    }

    /// The region the address named, if any (see [`Resolved::region`]).
    pub fn region(&self) -> Option<&str> {
        self.0.resolved.region.as_deref()
    }

    /// The local file path, for a local object.
    pub fn file_path(&self) -> Option<&Path> {
        match &self.0.resolved.target {
            Target::File(path) => Some(path),
            Target::Remote => None,
        }
    }

    /// The window this locator exposes, if any.
    pub fn window(&self) -> Option<Window> {
        self.0.window
    }

    /// A locator exposing `[start, start + len)` of what this locator exposes (`len: None` =
    /// to the end). Windows nest: `start` is relative to this locator's own window, and a window
    /// inside a bounded window must fit inside it.
    ///
    /// ```
    /// # use karu_engine::{Locator, Registry, Window};
    /// # let mut registry = Registry::builder();
    /// # registry.provider(std::sync::Arc::new(karu_engine::sdk::testing::FileBackend)).scheme("file");
    /// # let registry = registry.build()?;
    /// let file = registry.resolve("/data/tensors.bin")?;
    /// let tensor = file.with_window(4096, Some(1 << 20))?;
    /// assert_eq!(tensor.window(), Some(Window { start: 4096, len: Some(1 << 20) }));
    /// let half = tensor.with_window(1 << 19, None)?;
    /// assert_eq!(half.window(), Some(Window { start: 4096 + (1 << 19), len: Some(1 << 19) }));
    /// # Ok::<(), karu_engine::Error>(())
    /// ```
    pub fn with_window(&self, start: u64, len: Option<u64>) -> Result<Locator, Error> {
        let window = match self.0.window {
            None => Window { start, len },
            Some(outer) => nest_window(outer, start, len)?,
        };
        if let Some(len) = window.len
            && window.start.checked_add(len).is_none()
        {
            return Err(Error::new(
                Status::InvalidRange,
                format!(
                    "window [{}, +{len}) overflows a 64-bit offset",
                    window.start
                ),
            ));
        }
        Ok(Locator(Arc::new(LocatorInner {
            backend: Arc::clone(&self.0.backend),
            resolved: self.0.resolved.clone(),
            window: Some(window),
        })))
    }

    /// [`whole`](Self::whole), taking this locator: without a window it is the same one, and
    /// no count changes hands.
    pub(crate) fn into_whole(self) -> Locator {
        if self.0.window.is_none() {
            self
        } else {
            self.whole()
        }
    }

    /// This object without any window.
    pub fn whole(&self) -> Locator {
        if self.0.window.is_none() {
            return self.clone();
        }
        Locator(Arc::new(LocatorInner {
            backend: Arc::clone(&self.0.backend),
            resolved: self.0.resolved.clone(),
            window: None,
        }))
    }

    /// Whether two locators name the same object (ignoring windows).
    pub fn same_object(&self, other: &Locator) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
            || (self.0.backend.name() == other.0.backend.name()
                && self.canonical() == other.canonical())
    }
}

fn nest_window(outer: Window, start: u64, len: Option<u64>) -> Result<Window, Error> {
    let out_of_range = || {
        Error::new(
            Status::InvalidRange,
            format!(
                "window [{start}, {}) does not fit inside the enclosing window of {} bytes",
                len.map_or("end".to_string(), |l| format!("+{l}")),
                outer.len.unwrap_or(u64::MAX)
            ),
        )
    };
    let abs_start = outer.start.checked_add(start).ok_or_else(out_of_range)?;
    let len = match (outer.len, len) {
        (None, len) => len,
        (Some(outer_len), None) => Some(outer_len.checked_sub(start).ok_or_else(out_of_range)?),
        (Some(outer_len), Some(len)) => {
            let end = start.checked_add(len).ok_or_else(out_of_range)?;
            if end > outer_len {
                return Err(out_of_range());
            }
            Some(len)
        }
    };
    Ok(Window {
        start: abs_start,
        len,
    })
}

impl fmt::Debug for Locator {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut d = f.debug_struct("Locator");
        d.field("backend", &self.0.backend.name())
            .field("canonical", &self.0.resolved.canonical);
        if let Some(container) = &self.0.resolved.container {
            d.field("container", container);
        }
        if let Some(window) = &self.0.window {
            d.field("window", window);
        }
        d.finish()
    }
}

impl fmt::Display for Locator {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0.resolved.canonical)?;
        if let Some(w) = self.0.window {
            match w.len {
                Some(len) => write!(f, "[{}, +{len})", w.start)?,
                None => write!(f, "[{}, end)", w.start)?,
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn display_redacts_query() {
        let p = CanonicalPath::new("https://h.example/a?sig=SECRET");
        assert_eq!(p.to_string(), "https://h.example/a?<redacted>");
        assert_eq!(p.redacted(), "https://h.example/a");
        assert!(!format!("{p:?}").contains("SECRET"));
    }

    #[test]
    fn nested_windows() {
        let outer = Window {
            start: 100,
            len: Some(50),
        };
        assert_eq!(
            nest_window(outer, 10, Some(40)).unwrap(),
            Window {
                start: 110,
                len: Some(40)
            }
        );
        assert_eq!(
            nest_window(outer, 50, None).unwrap(),
            Window {
                start: 150,
                len: Some(0)
            }
        );
        assert_eq!(
            nest_window(outer, 10, Some(41)).unwrap_err().status(),
            Status::InvalidRange
        );
        assert_eq!(
            nest_window(outer, 51, None).unwrap_err().status(),
            Status::InvalidRange
        );
        let unbounded = Window {
            start: u64::MAX - 1,
            len: None,
        };
        assert_eq!(
            nest_window(unbounded, 2, None).unwrap_err().status(),
            Status::InvalidRange
        );
    }
}
