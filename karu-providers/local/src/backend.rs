//! Resolution of plain paths and `file://` URIs to canonical absolute paths.

use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use karu_engine::sdk::{Backend, CanonicalPath, Error, Resolved, Status, redact};
use percent_encoding::{AsciiSet, CONTROLS, percent_decode_str, percent_encode};

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
        let is_uri = address
            .get(..5)
            .is_some_and(|scheme| scheme.eq_ignore_ascii_case("file:"));
        let path = if is_uri {
            path_of_file_uri(address)?
        } else {
            PathBuf::from(address)
        };
        if path.as_os_str().is_empty() {
            return Err(invalid(address, "the path is empty"));
        }
        // Joined as text: the OS resolves a relative path from the current directory exactly
        // as it resolves that directory's path followed by the relative one, `..` included.
        let absolute = if path.is_absolute() {
            path
        } else {
            match &self.base {
                Some(base) if base.is_absolute() => base.join(path),
                Some(_) => return Err(invalid(address, "the base directory is not absolute")),
                None => return Err(invalid(address, "no current directory to resolve against")),
            }
        };
        Ok(resolved_file(normalise(&absolute)))
    }
}

/// Bytes a `file://` URI made from a path percent-encodes, besides everything not ASCII.
const URI_PATH: &AsciiSet = &CONTROLS.add(b' ').add(b'%').add(b'?').add(b'#');

/// A local file's identity: its path, or, for a path that is not UTF-8 (only a percent-encoded
/// file URI can name one), the `file://` URI that names it. So two such paths never share an
/// identity (a lossy conversion would merge `%FE` and `%FF`), and resolving the canonical path
/// gives the same file.
fn resolved_file(path: PathBuf) -> Resolved {
    if path.to_str().is_some() {
        return Resolved::file(path);
    }
    let uri = format!(
        "file://{}",
        percent_encode(path.as_os_str().as_bytes(), URI_PATH)
    );
    let mut resolved = Resolved::file(path);
    resolved.canonical = CanonicalPath::new(uri.as_str());
    resolved.key = uri;
    resolved
}

fn invalid(address: &str, why: &str) -> Error {
    Error::new(
        Status::InvalidArgument,
        format!(
            "invalid local address {:?}: {why}",
            redact::address(address)
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

/// The path the operating system opens for `path` (absolute), spelled without what cannot
/// change which file that is: repeated separators and `.` segments go, and so does a `..`
/// directly under the root (the root is its own parent). Every other `..` stays: the kernel
/// resolves it after following the symbolic links before it, so `link/../x` is not `x` when
/// `link` points elsewhere, and `missing/../x` does not exist at all. A trailing separator
/// stays too (`file/` is not `file`: it must be a directory).
fn normalise(path: &Path) -> PathBuf {
    let bytes = path.as_os_str().as_bytes();
    let mut out: Vec<u8> = Vec::with_capacity(bytes.len());
    let mut last = &b""[..];
    for segment in bytes.split(|&b| b == b'/') {
        last = segment;
        match segment {
            b"" | b"." => {}
            b".." if out.is_empty() => {}
            _ => {
                out.push(b'/');
                out.extend_from_slice(segment);
            }
        }
    }
    if out.is_empty() || matches!(last, b"" | b".") {
        out.push(b'/');
    }
    PathBuf::from(OsStr::from_bytes(&out))
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
            "//data///a.bin",
            "/data/./a.bin",
            "/./data/././a.bin",
            "/../data/a.bin",
            "/../../data/a.bin",
            "file:///data/a.bin",
            "FILE:///data/a.bin",
            "file://localhost/data/a.bin",
            "file:/data/a.bin",
            "file:///data/%61.bin",
            "file:///data/.//a.bin",
        ] {
            assert_eq!(canonical(spelling).unwrap(), "/data/a.bin", "{spelling}");
        }
    }

    #[test]
    fn dot_dot_segments_stay_for_the_operating_system_to_resolve() {
        // `x` may be a symbolic link (then `x/..` is the parent of its target) or missing
        // (then the path does not exist): only the filesystem knows, at open.
        for (address, expected) in [
            ("/data/x/../a.bin", "/data/x/../a.bin"),
            ("/data/x/./../a.bin", "/data/x/../a.bin"),
            ("/data/x/..", "/data/x/.."),
            ("../../data/a.bin", "/work/dir/../../data/a.bin"),
            ("sub/../a.bin", "/work/dir/sub/../a.bin"),
            ("/a/../../x", "/a/../../x"),
            ("file:///data/x/%2E%2E/a.bin", "/data/x/../a.bin"),
        ] {
            assert_eq!(canonical(address).unwrap(), expected, "{address}");
        }
        assert_ne!(
            canonical("/data/x/../a.bin").unwrap(),
            canonical("/data/a.bin").unwrap()
        );
    }

    #[test]
    fn a_trailing_separator_stays() {
        // `a.bin/` names a directory: opening it fails where opening `a.bin` would not.
        for (address, expected) in [
            ("/data/a.bin/", "/data/a.bin/"),
            ("/data/a.bin//", "/data/a.bin/"),
            ("/data/a.bin/.", "/data/a.bin/"),
            ("/data/a.bin/./", "/data/a.bin/"),
            ("/", "/"),
            ("/.", "/"),
            ("//", "/"),
            ("/..", "/"),
            ("./", "/work/dir/"),
            (".", "/work/dir/"),
        ] {
            assert_eq!(canonical(address).unwrap(), expected, "{address}");
        }
    }

    #[test]
    fn relative_paths_use_the_base() {
        assert_eq!(canonical("a.bin").unwrap(), "/work/dir/a.bin");
        assert_eq!(canonical("./sub/a.bin").unwrap(), "/work/dir/sub/a.bin");
        let err = LocalBackend::with_base("relative/base")
            .resolve("a.bin")
            .unwrap_err();
        assert_eq!(err.status(), Status::InvalidArgument, "{err}");
    }

    #[test]
    fn the_canonical_path_resolves_to_itself() {
        for address in [
            "/data/x/../a.bin/",
            "sub/.././a.bin",
            "file:///a%3Fb%23c%20d",
            "/..",
        ] {
            let once = canonical(address).unwrap();
            assert_eq!(canonical(&once).unwrap(), once, "{address}");
        }
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
    fn non_ascii_addresses_resolve() {
        // Found by the `resolve` fuzz target: byte 5 inside a character panicked.
        for (address, expected) in [
            ("bli/\u{7d3}", "/work/dir/bli/\u{7d3}"),
            ("ab/ü", "/work/dir/ab/ü"),
            ("file\u{e9}/x", "/work/dir/file\u{e9}/x"),
            ("ファイル", "/work/dir/ファイル"),
        ] {
            assert_eq!(canonical(address).unwrap(), expected, "{address}");
        }
    }

    #[test]
    fn a_path_that_is_not_utf8_is_named_by_a_file_uri() {
        // Found by the `resolve` fuzz target: the identity was the lossy UTF-8 of the path, so
        // `%FE` and `%FF` shared one, and resolving it named another file.
        let backend = LocalBackend::with_base("/w");
        let ff = backend.resolve("file:///d/a%FF%20b%25?").unwrap_err();
        assert_eq!(ff.status(), Status::InvalidArgument, "a query: {ff}");
        let ff = backend.resolve("file:///d/./a%FF%20b%25%3F").unwrap();
        let fe = backend.resolve("file:///d/a%FE%20b%25%3F").unwrap();
        assert_eq!(ff.canonical.as_str(), "file:///d/a%FF%20b%25%3F");
        assert_ne!(ff.canonical, fe.canonical);
        assert_eq!(
            ff.target,
            karu_engine::sdk::Target::File(PathBuf::from(OsStr::from_bytes(b"/d/a\xFF b%?")))
        );
        let again = backend.resolve(ff.canonical.as_str()).unwrap();
        assert_eq!(again, ff);
    }

    #[test]
    fn percent_encoded_specials_survive() {
        assert_eq!(canonical("file:///a%3Fb%23c%20d").unwrap(), "/a?b#c d");
    }

    #[test]
    fn resolved_target_is_the_file() {
        let r = LocalBackend::with_base("/w").resolve("x").unwrap();
        assert_eq!(
            r.target,
            karu_engine::sdk::Target::File(PathBuf::from("/w/x"))
        );
        assert_eq!(r.key, "/w/x");
        assert_eq!(r.container, None);
        let r = LocalBackend::with_base("/w").resolve("l/../x").unwrap();
        assert_eq!(
            r.target,
            karu_engine::sdk::Target::File(PathBuf::from("/w/l/../x"))
        );
    }

    /// Open `path` as the operating system does; the file's identity, or the error number.
    fn outcome(path: &Path) -> Result<(u64, u64), i32> {
        use std::os::unix::fs::MetadataExt;
        std::fs::File::open(path)
            .and_then(|f| f.metadata())
            .map(|m| (m.dev(), m.ino()))
            .map_err(|e| e.raw_os_error().unwrap_or(-1))
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(512))]

        /// Whatever the spelling (symbolic links to files and directories, dangling links,
        /// missing directories, `.`, `..`, repeated and trailing separators), the normalised
        /// path opens exactly what the operating system opens for the path as written, or
        /// fails with the same error.
        #[test]
        fn the_normalised_path_opens_what_the_os_opens(
            segments in proptest::collection::vec(
                proptest::sample::select(vec![
                    "a", "b", "hello.txt", "blink", "flink", "dangling", "missing", ".", "..", "",
                ]),
                0..7,
            ),
        ) {
            let fixture = fixture();
            let written = format!("{}/{}", fixture.path().display(), segments.join("/"));
            let written = PathBuf::from(written);
            let normalised = normalise(&written);
            proptest::prop_assert_eq!(
                outcome(&normalised),
                outcome(&written),
                "{} -> {}",
                written.display(),
                normalised.display()
            );
            proptest::prop_assert_eq!(normalise(&normalised), normalised.clone());
        }
    }

    /// `a/hello.txt`, `a/b/hello.txt`, `hello.txt`, `blink -> a/b`, `flink -> hello.txt`,
    /// `dangling -> missing`, made once per test process.
    fn fixture() -> &'static tempfile::TempDir {
        static FIXTURE: std::sync::OnceLock<tempfile::TempDir> = std::sync::OnceLock::new();
        FIXTURE.get_or_init(|| {
            let dir = tempfile::tempdir().unwrap();
            let root = dir.path();
            std::fs::create_dir_all(root.join("a/b")).unwrap();
            std::fs::write(root.join("hello.txt"), "top").unwrap();
            std::fs::write(root.join("a/hello.txt"), "a").unwrap();
            std::fs::write(root.join("a/b/hello.txt"), "b").unwrap();
            std::os::unix::fs::symlink("a/b", root.join("blink")).unwrap();
            std::os::unix::fs::symlink("hello.txt", root.join("flink")).unwrap();
            std::os::unix::fs::symlink("missing", root.join("dangling")).unwrap();
            dir
        })
    }

    #[test]
    fn through_a_link_to_a_directory_dot_dot_is_the_targets_parent() {
        let root = fixture().path();
        let through = normalise(&root.join("blink/../hello.txt"));
        assert_eq!(outcome(&through), outcome(&root.join("a/hello.txt")));
        assert_ne!(outcome(&through), outcome(&root.join("hello.txt")));
        let missing = normalise(&root.join("missing/../hello.txt"));
        assert_eq!(outcome(&missing), Err(2), "ENOENT, as the OS says");
    }
}
