//! `karu.Client(credentials=fn)`: a Python credential callback as Karu's
//! [`CredentialCallback`], for one family.
//!
//! Karu calls it from its credential workers (never from a Python thread), once per cold
//! scope (single flight: reads under a prefix the answer names wait for it) and again near the
//! answer's expiry, as it calls a Rust callback. Each call takes the GIL (the Python threads
//! waiting for reads have released it); it is refused once the interpreter is exiting
//! ([`runtime::with_python`]). What the Python half hands over is already checked and
//! flattened (`karu._credential_answer`): `None`, or `(kind, secret, key_id, session_token,
//! expiry, prefix)`. An exception, `None`, or a credential the family does not take fails the
//! reads that needed it with `Credentials`, naming the callback's family and the path; a
//! callback that hangs holds one credential worker and fails its reads with `TimedOut` at
//! their deadline, as in Rust.

use std::time::{Duration, SystemTime};

use karu::providers::{AWS_KEY_FAMILIES, BEARER_FAMILIES};
use karu::{
    BearerToken, CallbackCredential, CanonicalPath, Credential, CredentialCallback, Error, Status,
};
use pyo3::prelude::*;

use crate::runtime;

/// What the Python half's `_credential_answer` returns for one call.
type Answer = Option<(
    String,
    String,
    Option<String>,
    Option<String>,
    Option<f64>,
    Option<String>,
)>;

/// A Python callable answering for one credential family.
pub(crate) struct PyCallback {
    family: String,
    callable: Py<PyAny>,
}

impl PyCallback {
    pub(crate) fn new(family: String, callable: Py<PyAny>) -> Self {
        PyCallback { family, callable }
    }

    /// Call it with the GIL; the credential or why there is none.
    fn call(&self, py: Python<'_>, path: &CanonicalPath) -> Result<CallbackCredential, Error> {
        let family = &self.family;
        let refuse = |why: String| Error::new(Status::Credentials, why);
        let answer: Answer = self
            .callable
            .call1(py, (path.as_str(),))
            .and_then(|value| value.extract(py))
            .map_err(|e| {
                let kind = e
                    .get_type(py)
                    .name()
                    .map_or_else(|_| "an exception".to_owned(), |n| n.to_string());
                let text = karu::redact::text(&e.value(py).to_string());
                refuse(format!(
                    "the {family} credentials callback raised {kind} for {path}: {text}"
                ))
            })?;
        let Some((kind, secret, key_id, session_token, expiry, prefix)) = answer else {
            return Err(refuse(format!(
                "the {family} credentials callback returned None for {path}"
            )));
        };
        let expires = match expiry {
            None => None,
            Some(at) if at.is_finite() && at >= 0.0 => {
                // Past what the system clock can hold: it does not expire.
                Duration::try_from_secs_f64(at)
                    .ok()
                    .and_then(|d| SystemTime::UNIX_EPOCH.checked_add(d))
            }
            Some(_) => {
                return Err(refuse(format!(
                    "the {family} credentials callback gave {path} an expiry before 1970"
                )));
            }
        };
        let credential = match kind.as_str() {
            "aws" if BEARER_FAMILIES.contains(&family.as_str()) => {
                return Err(refuse(format!(
                    "the {family} credentials callback returned a karu.AwsCredential for \
                     {path}, which takes a karu.BearerToken"
                )));
            }
            "token" if AWS_KEY_FAMILIES.contains(&family.as_str()) => {
                return Err(refuse(format!(
                    "the {family} credentials callback returned a karu.BearerToken for {path}, which \
                     takes a karu.AwsCredential"
                )));
            }
            "aws" => karu::providers::s3::credential(
                key_id.unwrap_or_default(),
                secret,
                session_token,
                expires,
            ),
            _ => Credential::new(BearerToken::new(secret)).with_expiry(expires),
        };
        Ok(match prefix {
            Some(prefix) => CallbackCredential::for_prefix(credential, prefix),
            None => CallbackCredential::once(credential),
        })
    }
}

impl CredentialCallback for PyCallback {
    fn credential(&self, path: &CanonicalPath) -> Result<CallbackCredential, Error> {
        runtime::with_python(|py| self.call(py, path)).unwrap_or_else(|| {
            Err(Error::new(
                Status::Credentials,
                format!(
                    "the {} credentials callback cannot run for {path}: the Python interpreter \
                     is exiting",
                    self.family
                ),
            ))
        })
    }
}

/// The families a callback given without a family answers for: those of this build's
/// providers that take a key pair or a token from a callback.
pub(crate) fn families() -> Vec<String> {
    let mut registry = karu::Registry::builder();
    karu::providers::register_all(&mut registry);
    let Ok(registry) = registry.build() else {
        return Vec::new();
    };
    let declared = registry.credential_families();
    AWS_KEY_FAMILIES
        .iter()
        .chain(&BEARER_FAMILIES)
        .filter(|family| declared.contains(family))
        .map(|family| (*family).to_owned())
        .collect()
}
