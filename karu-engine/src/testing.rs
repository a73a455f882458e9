//! A minimal local-file backend for the engine's own tests and doc examples.
//!
//! Real programs use `karu-provider-local`, which also accepts `file://` URIs and normalises
//! paths; this one only makes a plain path absolute.

use std::path::PathBuf;
use std::sync::Arc;

use crate::sdk::backend::{Backend, Registry};
use crate::sdk::locator::Resolved;
use crate::sdk::status::{Error, Status};

/// Resolves plain paths (made absolute against the current directory) to local files.
#[derive(Debug, Clone, Copy, Default)]
pub struct FileBackend;

impl Backend for FileBackend {
    fn name(&self) -> &str {
        "local"
    }

    fn resolve(&self, address: &str) -> Result<Resolved, Error> {
        let path = PathBuf::from(address);
        let path = if path.is_absolute() {
            path
        } else {
            std::env::current_dir()
                .map_err(|e| Error::new(Status::Io, format!("no current directory: {e}")))?
                .join(path)
        };
        Ok(Resolved::file(path))
    }
}

/// A registry with [`FileBackend`] under the `file` scheme (plain paths).
pub fn registry() -> Registry {
    let mut builder = Registry::builder();
    builder.provider(Arc::new(FileBackend)).scheme("file");
    builder
        .build()
        .unwrap_or_else(|e| unreachable!("a valid registration: {e}"))
}
