//! The local provider: files in a temporary directory.

use std::fmt;

use karu::ClientBuilder;

use super::{isolated_builder, write_under};
use crate::conformance::{KnownLimit, Target};

/// The local provider on files in a temporary directory. Two cases expect what a file does
/// not do, its known limits: `merged` (Karu's contract, "The planner": local reads are never coalesced) and
/// `if_match` (a file has no versions, so `stat` gives no ETag to require).
pub struct LocalTarget {
    root: tempfile::TempDir,
}

impl LocalTarget {
    /// A new, empty temporary directory.
    pub fn start() -> std::io::Result<Self> {
        Ok(LocalTarget {
            root: tempfile::tempdir()?,
        })
    }
}

impl fmt::Debug for LocalTarget {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LocalTarget")
            .field("root", &self.root.path())
            .finish()
    }
}

impl Target for LocalTarget {
    fn name(&self) -> String {
        "local".into()
    }

    fn builder(&self) -> ClientBuilder {
        isolated_builder()
    }

    fn address(&self, name: &str) -> String {
        self.root.path().join(name).to_string_lossy().into_owned()
    }

    fn put(&self, name: &str, bytes: &[u8]) -> Result<(), String> {
        write_under(self.root.path(), name, bytes)
    }

    fn known_limits(&self) -> Vec<KnownLimit> {
        vec![
            KnownLimit {
                case: "basic/merged",
                why: "local reads are never coalesced (karu-engine/README.md, The planner): each goes straight \
                      to its destination",
                failure: "expected the three neighbours to merge into one transfer, planned 3",
            },
            KnownLimit {
                case: "basic/if_match",
                why: "a local file has no versions, so no ETag to require",
                failure: "the target sends no strong ETag",
            },
        ]
    }
}
