//! The Hub's access token, looked up in the order the Hub's own clients (`huggingface_hub`)
//! document:
//!
//! 1. the configuration (`hf.token`) — and, before everything, an application's credential
//!    callback for the `hf` family, which the engine asks instead of this lookup;
//! 2. `HF_TOKEN`, then the legacy `HUGGING_FACE_HUB_TOKEN`;
//! 3. the token file the CLI writes (`hf auth login`): `HF_TOKEN_PATH`, else `$HF_HOME/token`,
//!    else `$XDG_CACHE_HOME/huggingface/token`, else `~/.cache/huggingface/token`;
//!
//! anonymous when none is found (public repositories need no token). As in the Hub's clients,
//! `HF_HUB_DISABLE_IMPLICIT_TOKEN` turns steps 2 and 3 off, a token is stripped of line breaks
//! and surrounding spaces, an empty one counts as none, and a missing file is no token while a
//! file that cannot be read is an error. The environment is the one Karu captured when the
//! client was built; the file is read on a credential worker, never on an event loop.

use std::fmt;
use std::io;
use std::path::{Path, PathBuf};

use karu_engine::sdk::{
    Credential, CredentialProvider, Error, FetchContext, Status, read_credential_file,
};

/// The secret the engine carries for Hub requests: a token, or none (anonymous). Its `Debug`
/// hides the token.
#[derive(Clone, PartialEq, Eq)]
pub(crate) struct HfToken(pub(crate) Option<String>);

impl fmt::Debug for HfToken {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.0 {
            Some(_) => f.write_str("HfToken(<redacted>)"),
            None => f.write_str("HfToken(anonymous)"),
        }
    }
}

/// A [`Credential`] holding a Hub access token, for an application's
/// [`CredentialCallback`](karu_engine::sdk::CredentialCallback) registered for the
/// [`FAMILY`](crate::FAMILY) `"hf"`. Its `Debug` hides the token.
///
/// ```
/// let credential = karu_provider_hf::credential("hf_example");
/// assert!(!format!("{credential:?}").contains("hf_example"));
/// ```
pub fn credential(token: impl Into<String>) -> Credential {
    Credential::new(HfToken(clean(&token.into())))
}

/// Where a token was found (for tests and debug logs; never the token).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Found {
    Config,
    Env(&'static str),
    File(PathBuf),
    Nowhere,
}

/// `token` without line breaks and surrounding spaces; `None` if that leaves nothing.
fn clean(token: &str) -> Option<String> {
    let token = token.replace(['\r', '\n'], "");
    let token = token.trim();
    (!token.is_empty()).then(|| token.to_string())
}

fn truthy(value: Option<&str>) -> bool {
    value.is_some_and(|v| matches!(v.to_ascii_lowercase().as_str(), "1" | "on" | "yes" | "true"))
}

/// The token file the Hub's clients read: `HF_TOKEN_PATH`, else `$HF_HOME/token`, else the
/// default cache location. `~` at the start of a path is the home directory, as
/// `os.path.expanduser` makes it.
pub(crate) fn token_path(env: &dyn Fn(&str) -> Option<String>) -> Option<PathBuf> {
    let home = env("HOME").filter(|h| !h.is_empty());
    let expand = |p: String| -> Option<PathBuf> {
        match (p.strip_prefix("~/"), p.as_str(), &home) {
            (Some(rest), _, Some(home)) => Some(Path::new(home).join(rest)),
            (_, "~", Some(home)) => Some(PathBuf::from(home)),
            (Some(_), _, None) => None,
            _ => Some(PathBuf::from(p)),
        }
    };
    let set = |name: &str| env(name).filter(|v| !v.is_empty());
    if let Some(path) = set("HF_TOKEN_PATH") {
        return expand(path);
    }
    let hf_home = match set("HF_HOME") {
        Some(dir) => expand(dir)?,
        None => {
            let cache = match set("XDG_CACHE_HOME") {
                Some(dir) => expand(dir)?,
                None => Path::new(&home?).join(".cache"),
            };
            cache.join("huggingface")
        }
    };
    Some(hf_home.join("token"))
}

/// The token, in the documented order (see the [module](self) documentation), and where it
/// was found. `read` reads a file (a test passes a fake).
pub(crate) fn lookup(
    configured: Option<&str>,
    env: &dyn Fn(&str) -> Option<String>,
    read: &dyn Fn(&Path) -> io::Result<String>,
) -> Result<(Option<String>, Found), Error> {
    if let Some(token) = configured.and_then(clean) {
        return Ok((Some(token), Found::Config));
    }
    if truthy(env("HF_HUB_DISABLE_IMPLICIT_TOKEN").as_deref()) {
        return Ok((None, Found::Nowhere));
    }
    for name in ["HF_TOKEN", "HUGGING_FACE_HUB_TOKEN"] {
        if let Some(token) = env(name).as_deref().and_then(clean) {
            return Ok((Some(token), Found::Env(name)));
        }
    }
    let Some(path) = token_path(env) else {
        return Ok((None, Found::Nowhere));
    };
    match read(&path) {
        Ok(text) => Ok(match clean(&text) {
            Some(token) => (Some(token), Found::File(path)),
            None => (None, Found::Nowhere),
        }),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok((None, Found::Nowhere)),
        Err(e) => Err(Error::new(
            Status::Credentials,
            format!(
                "cannot read the Hugging Face token file {}: {e}",
                path.display()
            ),
        )),
    }
}

/// Looks up the token of one credential scope.
pub(crate) struct Tokens {
    configured: Option<String>,
    env: Vec<(String, String)>,
}

impl Tokens {
    /// A lookup of `configured` (the section's token) over the captured environment `env`.
    pub(crate) fn new(configured: Option<String>, env: Vec<(String, String)>) -> Self {
        Tokens { configured, env }
    }
}

impl fmt::Debug for Tokens {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Tokens")
            .field("configured", &self.configured.is_some())
            .field("env_vars", &self.env.len())
            .finish()
    }
}

impl CredentialProvider for Tokens {
    fn fetch(&self, _ctx: &FetchContext) -> Result<Credential, Error> {
        let env = |name: &str| {
            self.env
                .iter()
                .find(|(k, _)| k == name)
                .map(|(_, v)| v.clone())
        };
        let (token, _where) = lookup(self.configured.as_deref(), &env, &read_credential_file)?;
        Ok(Credential::new(HfToken(token)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn env_of(vars: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
        let map: HashMap<String, String> = vars
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        move |name| map.get(name).cloned()
    }

    /// A file system holding `files`; every other path is missing.
    fn files(files: &[(&str, &str)]) -> impl Fn(&Path) -> io::Result<String> {
        let map: HashMap<PathBuf, String> = files
            .iter()
            .map(|(p, t)| (PathBuf::from(p), t.to_string()))
            .collect();
        move |path| {
            map.get(path)
                .cloned()
                .ok_or_else(|| io::Error::from(io::ErrorKind::NotFound))
        }
    }

    fn found(
        configured: Option<&str>,
        env: &[(&str, &str)],
        fs: &[(&str, &str)],
    ) -> (Option<String>, Found) {
        lookup(configured, &env_of(env), &files(fs)).unwrap()
    }

    const HOME: (&str, &str) = ("HOME", "/home/u");
    const DEFAULT_FILE: (&str, &str) = ("/home/u/.cache/huggingface/token", "hf_file\n");

    #[test]
    fn the_configured_token_comes_first() {
        let all = [
            HOME,
            ("HF_TOKEN", "hf_env"),
            ("HUGGING_FACE_HUB_TOKEN", "hf_legacy"),
        ];
        assert_eq!(
            found(Some(" hf_cfg "), &all, &[DEFAULT_FILE]),
            (Some("hf_cfg".into()), Found::Config)
        );
        // An empty configured token counts as none.
        assert_eq!(
            found(Some(""), &all, &[DEFAULT_FILE]).1,
            Found::Env("HF_TOKEN")
        );
    }

    #[test]
    fn hf_token_then_the_legacy_name() {
        let both = [
            HOME,
            ("HF_TOKEN", "hf_env"),
            ("HUGGING_FACE_HUB_TOKEN", "hf_legacy"),
        ];
        assert_eq!(
            found(None, &both, &[DEFAULT_FILE]),
            (Some("hf_env".into()), Found::Env("HF_TOKEN"))
        );
        let legacy = [
            HOME,
            ("HF_TOKEN", " \n"),
            ("HUGGING_FACE_HUB_TOKEN", "hf_legacy"),
        ];
        assert_eq!(
            found(None, &legacy, &[DEFAULT_FILE]),
            (
                Some("hf_legacy".into()),
                Found::Env("HUGGING_FACE_HUB_TOKEN")
            )
        );
    }

    #[test]
    fn the_token_file_hf_token_path_then_hf_home_then_the_cache() {
        let fs = [
            ("/p/tok", "hf_path"),
            ("/hfhome/token", "hf_home\r\n"),
            ("/xdg/huggingface/token", "hf_xdg"),
            DEFAULT_FILE,
        ];
        type Env<'a> = &'a [(&'a str, &'a str)];
        let cases: [(Env<'_>, &str, &str); 5] = [
            (
                &[HOME, ("HF_TOKEN_PATH", "/p/tok"), ("HF_HOME", "/hfhome")],
                "hf_path",
                "/p/tok",
            ),
            (
                &[HOME, ("HF_HOME", "/hfhome"), ("XDG_CACHE_HOME", "/xdg")],
                "hf_home",
                "/hfhome/token",
            ),
            (
                &[HOME, ("XDG_CACHE_HOME", "/xdg")],
                "hf_xdg",
                "/xdg/huggingface/token",
            ),
            (&[HOME], "hf_file", "/home/u/.cache/huggingface/token"),
            (
                &[("HOME", "/p"), ("HF_TOKEN_PATH", "~/tok")],
                "hf_path",
                "/p/tok",
            ),
        ];
        for (env, token, path) in cases {
            assert_eq!(
                found(None, env, &fs),
                (Some(token.into()), Found::File(path.into())),
                "{env:?}"
            );
        }
    }

    #[test]
    fn anonymous_when_nothing_is_found() {
        assert_eq!(found(None, &[HOME], &[]), (None, Found::Nowhere));
        assert_eq!(found(None, &[], &[DEFAULT_FILE]), (None, Found::Nowhere));
        let empty_file = [("/home/u/.cache/huggingface/token", "\n")];
        assert_eq!(found(None, &[HOME], &empty_file), (None, Found::Nowhere));
    }

    #[test]
    fn disabling_implicit_tokens_keeps_only_the_configured_one() {
        let env = [
            HOME,
            ("HF_TOKEN", "hf_env"),
            ("HF_HUB_DISABLE_IMPLICIT_TOKEN", "1"),
        ];
        assert_eq!(found(None, &env, &[DEFAULT_FILE]), (None, Found::Nowhere));
        assert_eq!(
            found(Some("hf_cfg"), &env, &[DEFAULT_FILE]).1,
            Found::Config
        );
    }

    #[test]
    fn an_unreadable_file_is_an_error_without_the_token() {
        let read = |_: &Path| -> io::Result<String> {
            Err(io::Error::from(io::ErrorKind::PermissionDenied))
        };
        let e = lookup(None, &env_of(&[HOME]), &read).unwrap_err();
        assert_eq!(e.status(), Status::Credentials);
        assert!(
            e.message().contains("/home/u/.cache/huggingface/token"),
            "{e}"
        );
    }

    #[test]
    fn the_real_file_is_read_through_the_provider() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("token"), "hf_from_disk\n").unwrap();
        let home = dir.path().to_str().unwrap().to_string();
        let tokens = Tokens::new(None, vec![("HF_HOME".into(), home)]);
        let credential = tokens.fetch(&FetchContext::new(None)).unwrap();
        assert_eq!(
            credential.get::<HfToken>(),
            Some(&HfToken(Some("hf_from_disk".into())))
        );
        assert!(!format!("{credential:?}").contains("hf_from_disk"));
    }
}
