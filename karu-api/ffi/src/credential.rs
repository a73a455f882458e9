//! Credential callbacks from C: the callback type, what it fills in, and its adapter to the
//! engine's `CredentialCallback`.

use std::ffi::{CString, c_char, c_void};
use std::time::{Duration, SystemTime};

use karu::providers::{AWS_KEY_FAMILIES, BEARER_FAMILIES};
use karu::{
    BearerToken, CallbackCredential, CanonicalPath, Credential, CredentialCallback, Error, Status,
};

use crate::boundary::{entry, object_mut, optional_text, text};
use crate::status::{karu_status, karu_status_name};

/// An application credential callback (see `karu_client_builder_credential_callback`):
/// `ctx` as registered, the canonical path of the object (`"s3://bucket/key"`,
/// NUL-terminated, valid during the call), and the credential to fill in with
/// `karu_credential_set_*` (valid during the call). Returns `KARU_OK` (a `karu_status`) when
/// it set a credential; any other value fails the reads that needed it with
/// `KARU_ERR_CREDENTIALS`.
pub type karu_credential_callback = Option<
    unsafe extern "C" fn(
        ctx: *mut c_void,
        canonical_path: *const c_char,
        out: *mut karu_credential_out,
    ) -> u32,
>;

/// What a credential callback fills in; valid only during the call.
pub struct karu_credential_out {
    aws: Option<Aws>,
    token: Option<BearerToken>,
    expires: Option<SystemTime>,
    prefix: Option<String>,
}

impl karu_credential_out {
    /// Nothing set yet: what a callback is handed.
    pub(crate) fn empty() -> Self {
        karu_credential_out {
            aws: None,
            token: None,
            expires: None,
            prefix: None,
        }
    }
}

impl std::fmt::Debug for karu_credential_out {
    /// Never the secret or the token.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("karu_credential_out")
            .field(
                "access_key_id",
                &self.aws.as_ref().map(|a| &a.access_key_id),
            )
            .field("token", &self.token)
            .field("expires", &self.expires)
            .field("prefix", &self.prefix)
            .finish_non_exhaustive()
    }
}

struct Aws {
    access_key_id: String,
    secret_access_key: String,
    session_token: Option<String>,
}

/// Set an AWS credential (families `"aws"`: S3 and S3-compatible stores, and `"source"`:
/// Source Cooperative): an access key id, a secret access key and, for temporary credentials,
/// a session token (NULL for none). Karu copies the strings during the call. Requests are
/// signed with it as with discovered credentials; its secret never appears in a message or
/// log. A callback of another of Karu's families that sets one fails its reads with
/// `KARU_ERR_CREDENTIALS`.
///
/// # Safety
///
/// `out` is the pointer the callback was given, during the call; the strings are NULL or
/// NUL-terminated.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn karu_credential_set_aws(
    out: *mut karu_credential_out,
    access_key_id: *const c_char,
    secret_access_key: *const c_char,
    session_token: *const c_char,
) -> karu_status {
    entry(|| {
        // SAFETY: the caller's contract.
        let out = unsafe { object_mut(out) }?;
        // SAFETY: the caller's contract, for each string.
        let (access_key_id, secret_access_key, session_token) = unsafe {
            (
                text(access_key_id)?,
                text(secret_access_key)?,
                optional_text(session_token)?,
            )
        };
        out.aws = Some(Aws {
            access_key_id: access_key_id.to_owned(),
            secret_access_key: secret_access_key.to_owned(),
            session_token: session_token.map(str::to_owned),
        });
        Ok(())
    })
}

/// Set a bearer token (without `Bearer `), sent as `Authorization: Bearer <token>`: for the
/// families `"gcp"` (Google Cloud Storage: an OAuth 2 access token), `"azure"` (Azure Blob
/// and Data Lake Storage: an Entra ID access token for `https://storage.azure.com/`) and
/// `"hf"` (Hugging Face: a user access token). Karu copies it during the call; it never
/// appears in a message or log. A callback of the `"aws"` or `"source"` family that sets one
/// fails its reads with `KARU_ERR_CREDENTIALS` (they sign with key pairs:
/// `karu_credential_set_aws`).
///
/// # Safety
///
/// `out` is the pointer the callback was given, during the call; `token` is NULL or
/// NUL-terminated.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn karu_credential_set_bearer_token(
    out: *mut karu_credential_out,
    token: *const c_char,
) -> karu_status {
    entry(|| {
        // SAFETY: the caller's contract.
        let out = unsafe { object_mut(out) }?;
        // SAFETY: the caller's contract.
        out.token = Some(BearerToken::new(unsafe { text(token) }?));
        Ok(())
    })
}

/// When the credential expires, in seconds since the Unix epoch. Karu reuses it until then
/// (refreshing it by calling the callback again in the final tenth of its lifetime); without
/// an expiry, or with one past what the system clock can hold (`UINT64_MAX` for "never"), it
/// does not expire.
///
/// # Safety
///
/// `out` is the pointer the callback was given, during the call.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn karu_credential_set_expiry(
    out: *mut karu_credential_out,
    unix_seconds: u64,
) -> karu_status {
    entry(|| {
        // SAFETY: the caller's contract.
        let out = unsafe { object_mut(out) }?;
        out.expires = SystemTime::UNIX_EPOCH.checked_add(Duration::from_secs(unix_seconds));
        Ok(())
    })
}

/// The canonical path prefix under which the credential is valid (`"s3://bucket"`, whole
/// segments): Karu caches it there, if the requested path is inside it, and calls the callback
/// again only for paths outside it or when it expires. Without a prefix the callback is called
/// for every request.
///
/// # Safety
///
/// `out` is the pointer the callback was given, during the call; `prefix` is NULL or
/// NUL-terminated.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn karu_credential_set_prefix(
    out: *mut karu_credential_out,
    prefix: *const c_char,
) -> karu_status {
    entry(|| {
        // SAFETY: the caller's contract.
        let out = unsafe { object_mut(out) }?;
        // SAFETY: the caller's contract.
        out.prefix = Some(unsafe { text(prefix) }?.to_owned());
        Ok(())
    })
}

/// The function of a (non-NULL) [`karu_credential_callback`].
pub(crate) type CallbackFn =
    unsafe extern "C" fn(*mut c_void, *const c_char, *mut karu_credential_out) -> u32;

/// A C callback as the engine's [`CredentialCallback`].
pub(crate) struct CCallback {
    family: String,
    callback: CallbackFn,
    /// The caller's context, passed through untouched.
    ctx: *mut c_void,
}

// SAFETY: `karu_client_builder_credential_callback` requires the callback and its context to
// be thread safe (called from several credential workers at once) and to outlive every client
// that owns them; Karu itself only passes `ctx` back to `callback`.
unsafe impl Send for CCallback {}
// SAFETY: as for `Send`: every use is a call, which the caller made thread safe.
unsafe impl Sync for CCallback {}

impl std::fmt::Debug for CCallback {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CCallback")
            .field("family", &self.family)
            .finish_non_exhaustive()
    }
}

impl CCallback {
    /// # Safety
    ///
    /// `callback` and `ctx` honour the contract of `karu_client_builder_credential_callback`.
    pub(crate) unsafe fn new(family: &str, callback: CallbackFn, ctx: *mut c_void) -> Self {
        CCallback {
            family: family.to_owned(),
            callback,
            ctx,
        }
    }
}

impl CredentialCallback for CCallback {
    fn credential(&self, path: &CanonicalPath) -> Result<CallbackCredential, Error> {
        let refuse = |why: String| Error::new(Status::Credentials, why);
        let c_path = CString::new(path.as_str())
            .map_err(|_| refuse(format!("the canonical path {path} holds a NUL byte")))?;
        let mut out = karu_credential_out::empty();
        // SAFETY: the registration's contract; `c_path` and `out` outlive the call.
        let answer = unsafe { (self.callback)(self.ctx, c_path.as_ptr(), &mut out) };
        if answer != karu_status::KARU_OK as u32 {
            // SAFETY: a static NUL-terminated string.
            let name = unsafe { std::ffi::CStr::from_ptr(karu_status_name(answer)) };
            return Err(refuse(format!(
                "the {} credential callback answered {} for {path}",
                self.family,
                name.to_string_lossy()
            )));
        }
        let family = &self.family;
        let credential = match (out.aws, out.token) {
            (Some(_), Some(_)) => {
                return Err(refuse(format!(
                    "the {family} credential callback set both an AWS key pair and a bearer token \
                     for {path} (one credential, please)"
                )));
            }
            (None, None) => {
                return Err(refuse(format!(
                    "the {family} credential callback set no credential for {path}"
                )));
            }
            (Some(_), None) if BEARER_FAMILIES.contains(&family.as_str()) => {
                return Err(refuse(format!(
                    "the {family} credential callback set an AWS key pair for {path}, which \
                     takes a bearer token (karu_credential_set_bearer_token)"
                )));
            }
            (None, Some(_)) if AWS_KEY_FAMILIES.contains(&family.as_str()) => {
                return Err(refuse(format!(
                    "the {family} credential callback set a bearer token for {path}, which takes an \
                     AWS key pair (karu_credential_set_aws)"
                )));
            }
            (Some(aws), None) => karu::providers::s3::credential(
                aws.access_key_id,
                aws.secret_access_key,
                aws.session_token,
                out.expires,
            ),
            (None, Some(token)) => Credential::new(token).with_expiry(out.expires),
        };
        Ok(match out.prefix {
            Some(prefix) => CallbackCredential::for_prefix(credential, prefix),
            None => CallbackCredential::once(credential),
        })
    }
}
