//! Resolution of plain paths and `file://` URIs to canonical absolute paths.

use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::path::{Component, Path, PathBuf};

use karu_engine::{Backend, Error, Resolved, Status};
use percent_encoding::percent_decode_str;

/// The local-file backend. Resolves against the current directory captured at construction,
/// so a relative path means the same file for the life of a client.
#[derive(Debug, Clone)]
pub struct LocalBackend {
    base: Option<PathBuf>,
}

impl LocalBackend {
    /// A backend resolving relative paths against the current directory (read now).
    pub fn new() -> Self {
        LocalBackend {
            base: std::env::current_dir().ok(),
        }
    }

    /// A backend resolving relative paths against `base` (which must be absolute).
    pub fn with_base(base: impl Into<PathBuf>) -> Self {
        LocalBackend {
            base: Some(base.into()),
        }
    }
}

impl Default for LocalBackend {
    fn default() -> Self {
        Self::new()
    }
}

impl Backend for LocalBackend {
    fn name(&self) -> &str {
        "local"
    }

    fn resolve(&self, address: &str) -> Result<Resolved, Error> {
        let path = if address.len() >= 5 && address[..5].eq_ignore_ascii_case("file:") {
            path_of_file_uri(address)?
        } else {
            PathBuf::from(address)
        };
        if path.as_os_str().is_empty() {
            return Err(invalid(address, "the path is empty"));
        }
        let absolute = if path.is_absolute() {
            path
        } else {
            match &self.base {
                Some(base) => base.join(path),
                None => return Err(invalid(address, "no current directory to resolve against")),
            }
        };
        Ok(Resolved::file(normalise(&absolute)))
    }
}

fn invalid(address: &str, why: &str) -> Error {
    Error::new(
        Status::InvalidArgument,
        format!(
            "invalid local address {:?}: {why}",
            karu_engine::redact_address(address)
        ),
    )
}

/// `file:///p`, `file://localhost/p` and `file:/p` → `/p`, percent-decoded.
fn path_of_file_uri(uri: &str) -> Result<PathBuf, Error> {
    let rest = &uri[5..];
    let path = if let Some(authority_and_path) = rest.strip_prefix("//") {
        let slash = authority_and_path
            .find('/')
            .unwrap_or(authority_and_path.len());
        let host = &authority_and_path[..slash];
        if !host.is_empty() && !host.eq_ignore_ascii_case("localhost") {
            return Err(invalid(
                uri,
                "file URIs must name the local host (file:///path or file://localhost/path)",
            ));
        }
        &authority_and_path[slash..]
    } else {
        rest
    };
    if path.contains(['?', '#']) {
        return Err(invalid(
            uri,
            "file URIs cannot carry a query or fragment (percent-encode ? as %3F and # as %23)",
        ));
    }
    if !path.starts_with('/') {
        return Err(invalid(uri, "a file URI needs an absolute path"));
    }
    let bytes: Vec<u8> = percent_decode_str(path).collect();
    if bytes.contains(&0) {
        return Err(invalid(uri, "the path contains a NUL byte"));
    }
    Ok(PathBuf::from(OsStr::from_bytes(&bytes)))
}

/// Remove `.` segments, resolve `..` lexically, and collapse repeated separators.
fn normalise(path: &Path) -> PathBuf {
    let mut out = PathBuf::from("/");
    for component in path.components() {
        match component {
            Component::RootDir | Component::CurDir | Component::Prefix(_) => {}
            Component::ParentDir => {
                out.pop();
            }
            Component::Normal(part) => out.push(part),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn canonical(address: &str) -> Result<String, Error> {
        LocalBackend::with_base("/work/dir")
            .resolve(address)
            .map(|r| r.canonical.as_str().to_string())
    }

    #[test]
    fn spellings_of_one_file_share_a_canonical_path() {
        for spelling in [
            "/data/a.bin",
            "/data//a.bin",
            "/data/./a.bin",
            "/data/x/../a.bin",
            "file:///data/a.bin",
            "FILE:///data/a.bin",
            "file://localhost/data/a.bin",
            "file:/data/a.bin",
            "file:///data/%61.bin",
            "../../data/a.bin",
        ] {
            assert_eq!(canonical(spelling).unwrap(), "/data/a.bin", "{spelling}");
        }
    }

    #[test]
    fn relative_paths_use_the_base() {
        assert_eq!(canonical("a.bin").unwrap(), "/work/dir/a.bin");
        assert_eq!(canonical("./sub/a.bin").unwrap(), "/work/dir/sub/a.bin");
        assert_eq!(canonical("/../../x").unwrap(), "/x");
    }

    #[test]
    fn bad_addresses_are_invalid_arguments() {
        for bad in [
            "",
            "file://example.com/a",
            "file:///a?x=1",
            "file:///a#frag",
            "file:relative",
            "file:///a%00b",
        ] {
            let err = canonical(bad).unwrap_err();
            assert_eq!(err.status(), Status::InvalidArgument, "{bad}: {err}");
        }
    }

    #[test]
    fn percent_encoded_specials_survive() {
        assert_eq!(canonical("file:///a%3Fb%23c%20d").unwrap(), "/a?b#c d");
    }

    #[test]
    fn resolved_target_is_the_file() {
        let r = LocalBackend::with_base("/w").resolve("x").unwrap();
        assert_eq!(r.target, karu_engine::Target::File(PathBuf::from("/w/x")));
        assert_eq!(r.key, "/w/x");
        assert_eq!(r.container, None);
    }
}
