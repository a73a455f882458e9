//! A minimal local-file backend for tests and examples: the engine's own, and those of a
//! provider crate that needs a second backend beside its own (a registry that also serves
//! plain paths).
//!
//! Real programs use `karu-provider-local`, which also accepts `file://` URIs and normalises
//! paths; this one only makes a plain path absolute.
//!
//! ```
//! use karu_engine::sdk::testing;
//!
//! let object = testing::registry().resolve("/data/tensors.bin")?;
//! assert_eq!(object.backend().name(), "local");
//! assert_eq!(object.file_path(), Some(std::path::Path::new("/data/tensors.bin")));
//! # Ok::<(), karu_engine::Error>(())
//! ```

use std::path::PathBuf;
use std::sync::Arc;

use crate::sdk::locator::Resolved;
use crate::sdk::status::{Error, Status};
use crate::sdk::{Backend, Registry};

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
