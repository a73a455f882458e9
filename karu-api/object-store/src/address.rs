//! Where an `object_store` `Path` lives: the Karu address of a path under a store's base.
//!
//! A `Path` (of either object_store major: both spell paths alike) holds its segments in object_store's encoded form (`%` is `%25`, `#` is `%23`,
//! `é` is `%C3%A9`, a space stays a space). Each segment is decoded back to the name it stands for, so
//! `Path::from("a b+c%d é")` reaches the object named `a b+c%d é` on every provider, as
//! `karu read` does; the name is then written the way Karu's addresses spell names: literally
//! after a provider scheme (`s3://bucket/a b+c%d é`) or a local directory, percent-encoded in an
//! `http(s)://` or `file://` URL (`https://host/dir/a%20b%2Bc%25d%20%C3%A9`).
//!
//! A segment names one level below the base, never a way out of it: a name that is only dots
//! (`.`, `..`, `...`), or that holds `/`, `\` or NUL, is refused. Decoded and written literally,
//! `..%2Fsecret` would be `../secret` to a local file system and to S3-compatible servers that
//! resolve dot segments; percent-encoded in a URL it is decoded by the server (nginx serves
//! `/sub/..%2Fsecret` as `/secret`). A backslash separates names in Windows paths, and some
//! servers and tools read it as `/`; NUL ends a path in the kernel's eyes.

use std::fmt;

use percent_encoding::{AsciiSet, NON_ALPHANUMERIC, percent_decode_str, utf8_percent_encode};

/// What a URL path segment keeps unencoded: RFC 3986's unreserved characters.
const URL_SEGMENT: &AsciiSet = &NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'.')
    .remove(b'_')
    .remove(b'~');

/// How names are written after the base.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Spelling {
    /// `http(s)://` and `file://` URLs: each name percent-encoded.
    Url,
    /// Provider schemes (`s3://`, `gs://`, `az://`, `hf://`, ...) and local directories: the
    /// name as it is.
    Literal,
}

/// A store's base address, ready to have paths joined under it.
#[derive(Clone, PartialEq, Eq)]
pub(crate) struct Base {
    /// The base without trailing slashes (empty for the root directory `/`).
    prefix: String,
    spelling: Spelling,
}

/// Why a base or a path cannot name an object.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum AddressError {
    /// The base is empty.
    EmptyBase,
    /// A URL base carries a query or a fragment, which a joined name would land in.
    QueryInBase,
    /// A URL base names a user (`https://user:secret@host/`): credentials belong in Karu's
    /// configuration, not in an address that errors and logs repeat.
    UserInBase,
    /// A segment is not percent-encoded UTF-8 (`%FF`).
    NotUtf8 {
        /// The segment as the path holds it.
        segment: String,
    },
    /// A segment stands for a name made only of dots (`.`, `..`, `...`), which would name the
    /// directory it is in or one above it.
    DotSegment {
        /// The segment as the path holds it.
        segment: String,
    },
    /// A segment decodes to a name holding a character that separates or ends names on some
    /// provider (`/`, `\`, NUL): joined under the base, it could name an object outside it.
    Separator {
        /// The segment as the path holds it.
        segment: String,
        /// The character.
        character: char,
    },
}

impl fmt::Display for AddressError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            AddressError::EmptyBase => f.write_str("the base address is empty"),
            AddressError::QueryInBase => f.write_str(
                "the base address carries a query or a fragment; a name joined under it would \
                 land there (set such options in Karu's configuration instead)",
            ),
            AddressError::UserInBase => f.write_str(
                "the base address names a user; credentials belong in Karu's configuration",
            ),
            AddressError::NotUtf8 { segment } => {
                write!(f, "the path segment {segment:?} does not decode to UTF-8")
            }
            AddressError::DotSegment { segment } => write!(
                f,
                "the path segment {segment:?} is a name made only of dots, which would name a \
                 directory at or above its own instead of an object under the base"
            ),
            AddressError::Separator { segment, character } => write!(
                f,
                "the path segment {segment:?} decodes to a name holding {}, which separates or \
                 ends names on some providers and could name an object outside the base",
                match character {
                    '\0' => "NUL".to_string(),
                    c => format!("`{c}`"),
                }
            ),
        }
    }
}

impl std::error::Error for AddressError {}

impl Base {
    /// Parse a base address: a provider URL prefix, an `http(s)://` or `file://` URL of a
    /// directory, or a local directory. Nothing is resolved here.
    pub(crate) fn parse(base: &str) -> Result<Base, AddressError> {
        let base = base.trim();
        if base.is_empty() {
            return Err(AddressError::EmptyBase);
        }
        let scheme = base
            .split_once("://")
            .map(|(scheme, _)| scheme.to_ascii_lowercase());
        let spelling = match scheme.as_deref() {
            Some("http" | "https" | "file") => Spelling::Url,
            _ => Spelling::Literal,
        };
        if spelling == Spelling::Url {
            if base.contains(['?', '#']) {
                return Err(AddressError::QueryInBase);
            }
            let authority = base
                .split_once("://")
                .map_or("", |(_, rest)| rest.split('/').next().unwrap_or(""));
            if authority.contains('@') {
                return Err(AddressError::UserInBase);
            }
        }
        Ok(Base {
            prefix: base.trim_end_matches('/').to_string(),
            spelling,
        })
    }

    /// The address of `path` under the base (the base itself for the empty path). `path` is
    /// an object_store `Path`'s encoded form (`Path::as_ref`): segments separated by `/`.
    pub(crate) fn join(&self, path: &str) -> Result<String, AddressError> {
        let mut address = self.prefix.clone();
        for segment in path.split('/').filter(|s| !s.is_empty()) {
            let name =
                percent_decode_str(segment)
                    .decode_utf8()
                    .map_err(|_| AddressError::NotUtf8 {
                        segment: segment.to_string(),
                    })?;
            check_name(segment, &name)?;
            address.push('/');
            match self.spelling {
                Spelling::Url => address.extend(utf8_percent_encode(&name, URL_SEGMENT)),
                Spelling::Literal => address.push_str(&name),
            }
        }
        if address.is_empty() {
            // The root directory itself.
            address.push('/');
        }
        Ok(address)
    }
}

/// Refuse a decoded segment `name` that could leave its directory on some provider: only dots,
/// or a separator or terminator in it.
fn check_name(segment: &str, name: &str) -> Result<(), AddressError> {
    if let Some(character) = name.chars().find(|c| matches!(c, '/' | '\\' | '\0')) {
        return Err(AddressError::Separator {
            segment: segment.to_string(),
            character,
        });
    }
    if !name.is_empty() && name.chars().all(|c| c == '.') {
        return Err(AddressError::DotSegment {
            segment: segment.to_string(),
        });
    }
    Ok(())
}

impl fmt::Display for Base {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.prefix.is_empty() {
            f.write_str("/")
        } else {
            f.write_str(&self.prefix)
        }
    }
}

impl fmt::Debug for Base {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{self}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use object_store::path::Path;

    fn join(base: &str, path: &Path) -> String {
        Base::parse(base).unwrap().join(path.as_ref()).unwrap()
    }

    #[test]
    fn provider_schemes_and_local_directories_take_names_literally() {
        let path = Path::from("dir/a b+c%d é#?.bin");
        assert_eq!(path.as_ref(), "dir/a b+c%25d %C3%A9%23%3F.bin");
        assert_eq!(
            join("s3://bucket/prefix/", &path),
            "s3://bucket/prefix/dir/a b+c%d é#?.bin"
        );
        assert_eq!(join("gs://b", &path), "gs://b/dir/a b+c%d é#?.bin");
        assert_eq!(join("/data/set", &path), "/data/set/dir/a b+c%d é#?.bin");
        assert_eq!(join("/", &path), "/dir/a b+c%d é#?.bin");
    }

    #[test]
    fn urls_take_names_percent_encoded() {
        let path = Path::from("dir/a b+c%d é~-_.bin");
        assert_eq!(
            join("https://host:8443/root/", &path),
            "https://host:8443/root/dir/a%20b%2Bc%25d%20%C3%A9~-_.bin"
        );
        assert_eq!(
            join("file:///data", &Path::from("x y")),
            "file:///data/x%20y"
        );
    }

    #[test]
    fn a_parsed_path_is_decoded_as_object_store_encodes_it() {
        // `Path::parse` keeps what it is given: `%41` is the letter A.
        let path = Path::parse("percent%41.bin").unwrap();
        assert_eq!(join("s3://b", &path), "s3://b/percentA.bin");
        // A name holding `%2F` literally (object_store's `%252F`) is a name, not a separator.
        let path = Path::from_iter(["a%2Fb"]);
        assert_eq!(join("s3://b", &path), "s3://b/a%2Fb");
        assert_eq!(join("https://h", &path), "https://h/a%252Fb");
    }

    #[test]
    fn the_empty_path_is_the_base() {
        assert_eq!(join("s3://b/p", &Path::from("")), "s3://b/p");
        assert_eq!(join("/", &Path::from("")), "/");
    }

    #[test]
    fn dot_segments_and_bytes_that_are_not_utf8_are_refused() {
        let base = Base::parse("/data").unwrap();
        for path in [
            Path::from_iter(["a", ".."]),
            Path::from_iter(["."]),
            Path::parse("%2E%2E/x").unwrap(),
            Path::parse("a/.%2E").unwrap(),
            Path::from_iter(["..."]),
        ] {
            assert!(
                matches!(
                    base.join(path.as_ref()),
                    Err(AddressError::DotSegment { .. })
                ),
                "{path}"
            );
        }
        // Names with dots among other characters are names.
        assert_eq!(
            base.join(Path::from_iter(["..a", "b..", ".hidden"]).as_ref()),
            Ok("/data/..a/b../.hidden".to_string())
        );
        let path = Path::parse("a/%FF").unwrap();
        assert_eq!(
            base.join(path.as_ref()),
            Err(AddressError::NotUtf8 {
                segment: "%FF".into()
            })
        );
    }

    #[test]
    fn segments_holding_a_separator_or_nul_are_refused_by_name() {
        let cases = [
            (Path::from_iter(["../secret.txt"]), "..%2Fsecret.txt", '/'),
            (Path::from_iter(["sub", "../../s"]), "..%2F..%2Fs", '/'),
            (Path::parse("a/..%2Fs").unwrap(), "..%2Fs", '/'),
            (Path::parse("a/%2f").unwrap(), "%2f", '/'),
            (Path::from_iter(["..\\s"]), "..%5Cs", '\\'),
            (Path::from_iter(["a\0b"]), "a%00b", '\0'),
        ];
        for base in [
            "/data",
            "file:///data",
            "https://h/d",
            "s3://b/p",
            "az://c/p",
        ] {
            let base = Base::parse(base).unwrap();
            for (path, segment, character) in &cases {
                let error = base.join(path.as_ref()).unwrap_err();
                assert_eq!(
                    error,
                    AddressError::Separator {
                        segment: segment.to_string(),
                        character: *character
                    },
                    "{base}: {path}"
                );
                assert!(
                    error.to_string().contains(&format!("{segment:?}")),
                    "{error}"
                );
            }
        }
    }

    #[test]
    fn bases_that_cannot_be_joined_are_refused() {
        assert_eq!(Base::parse("  "), Err(AddressError::EmptyBase));
        assert_eq!(
            Base::parse("https://h/d?sig=1"),
            Err(AddressError::QueryInBase)
        );
        assert_eq!(
            Base::parse("https://u:p@h/d"),
            Err(AddressError::UserInBase)
        );
        // A provider address may hold `@` (abfs://container@account...).
        assert!(Base::parse("abfs://c@acct.dfs.core.windows.net/d").is_ok());
    }
}
