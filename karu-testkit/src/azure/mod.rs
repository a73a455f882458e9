//! An Azure Blob Storage mock: path-style `GET`/`HEAD` of blobs (`/account/container/blob`, as
//! Azurite serves them) with byte ranges, every request authenticated as the service does, on
//! top of the fault-injecting [`MockServer`].
//!
//! [`AzureMock`] installs a [`Gate`](crate::Gate) on a [`MockServer`] whose object handler
//! serves the bytes (ranges, `ETag`, `If-Match`, 404, 416) and the whole fault plan; like
//! Azure, it answers a suffix range (`bytes=-n`) with `200` and the whole blob.
//!
//! What a request goes through (the first failing step answers):
//! 1. the path must start with `/account/` (400 `InvalidUri`);
//! 2. a query with `sig`: a SAS (account SAS or service SAS for a container or blob, versions
//!    2020-12-06 and later) whose signature is the HMAC-SHA256 with the account key of the
//!    documented string to sign (a service SAS for another container or blob does not match),
//!    valid on the mock's clock (`st`..`se`), then the protocol (`spr`: the mock is plain
//!    HTTP), the source address (`sip`, against 127.0.0.1), the service and resource type of
//!    an account SAS and the permission (`r` to read a blob): 403 `AuthenticationFailed` (the
//!    string to sign in `AuthenticationErrorDetail`), `AuthorizationProtocolMismatch`,
//!    `AuthorizationSourceIPMismatch`, `AuthorizationServiceMismatch`,
//!    `AuthorizationResourceTypeMismatch` or `AuthorizationPermissionMismatch`, as the service
//!    answers (see [`sas`]; [`Sas`] makes tokens);
//! 3. no `Authorization`: the container must be [public](AzureMock::set_public) (401
//!    `NoAuthenticationInformation`);
//! 4. `x-ms-version` is required with `Authorization` (400 `MissingRequiredHeader`);
//! 5. `SharedKey account:signature`: the account must be the mock's, `x-ms-date` (or `Date`)
//!    within 15 minutes of the mock's clock, and the signature the one the mock computes with
//!    its own implementation of the documented string to sign (403 `AuthenticationFailed`,
//!    the string to sign in `AuthenticationErrorDetail`, never a signature);
//! 6. `Bearer token`: a token the mock [issued](AzureMock::issue_token) (401
//!    `InvalidAuthenticationInfo`), not expired (401 with `Lifetime validation failed. The
//!    token is expired.` and `WWW-Authenticate: Bearer error="invalid_token"`);
//! 7. the container must exist (404 `ContainerNotFound`) and the method be `GET` or `HEAD`.
//!
//! [`AzureMock::identity_fakes`] serves the Entra ID token endpoint (client secret, federated
//! token) and the managed-identity endpoints (IMDS, App Service) on loopback.
//!
//! Every authentication is recorded with the identity it carried ([`AzureMock::auth_log`]):
//! which account signed, which token's identity, a SAS, or none.
//!
//! ```
//! use karu_testkit::AzureMock;
//!
//! let azure = AzureMock::start();
//! azure.insert("data", "dir/a b.bin", vec![1u8; 100]);
//! assert_eq!(azure.endpoint(), format!("{}/devstoreaccount1", azure.server().base_url()));
//! assert_eq!(
//!     karu_testkit::azure::blob_path("devstoreaccount1", "data", "dir/a b.bin"),
//!     "/devstoreaccount1/data/dir/a%20b.bin"
//! );
//! ```

mod gate;
mod identity;
pub mod sas;
pub(crate) mod sharedkey;

use std::fmt;
use std::io;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use bytes::Bytes;
use percent_encoding::{AsciiSet, NON_ALPHANUMERIC, utf8_percent_encode};

use crate::http::MockServer;

use gate::{AzureGate, AzureState};
pub use identity::{IdentityFakes, TokenCall};
pub use sas::{SAS_VERSION, Sas, SasScope};

/// Azurite's published development account name.
pub const DEV_ACCOUNT: &str = "devstoreaccount1";

/// Azurite's published development account key (base64).
pub const DEV_KEY: &str =
    "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw==";

/// The identity a request carried, as the mock read it.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Identity {
    /// Shared Key, signed for this account.
    SharedKey {
        /// The account named in `Authorization`.
        account: String,
    },
    /// A SAS token in the query.
    Sas,
    /// A bearer token the mock issued to this identity.
    Bearer {
        /// The identity named when the token was issued.
        identity: String,
    },
    /// No authentication.
    Anonymous,
    /// Authentication the mock could not attribute (an unknown token, a malformed header).
    Unknown,
}

/// Why the mock refused a request's authentication.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum AuthFailure {
    /// No authentication for a private container.
    MissingAuthentication,
    /// `Authorization` without `x-ms-version`.
    MissingVersion,
    /// An `Authorization` the mock cannot read.
    MalformedAuthorization,
    /// Shared Key for another account.
    UnknownAccount,
    /// Shared Key without a valid date.
    MissingDate,
    /// Shared Key dated more than 15 minutes from the mock's clock.
    RequestTimeTooSkewed,
    /// The Shared Key signature differs from the mock's.
    SignatureMismatch,
    /// A SAS whose signature is not the one of its string to sign for the requested resource
    /// (a wrong key, a changed field, another container or blob).
    SasMismatch,
    /// A SAS past its expiry (`se`) on the mock's clock.
    SasExpired,
    /// A SAS before its start (`st`) on the mock's clock.
    SasNotYetValid,
    /// A SAS missing a mandatory field, or with a field that cannot be read.
    SasMalformed,
    /// A SAS the mock does not verify: a version before 2020-12-06, a stored access policy
    /// (`si`), a snapshot, version or directory resource.
    SasUnsupported,
    /// A SAS for HTTPS only (`spr=https`) over the mock's plain HTTP.
    SasProtocol,
    /// A SAS whose `sip` excludes 127.0.0.1.
    SasSourceIp,
    /// An account SAS without the blob service (`ss`).
    SasService,
    /// An account SAS without the resource type of the request (`srt`).
    SasResourceType,
    /// A SAS without the permission the request needs (`sp`).
    SasPermission,
    /// A bearer token the mock did not issue.
    UnknownToken,
    /// An expired bearer token.
    ExpiredToken,
}

/// One request's authentication, as the mock saw it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AuthRecord {
    /// The method.
    pub method: String,
    /// The path as sent.
    pub path: String,
    /// Who the request claimed to be.
    pub identity: Identity,
    /// `None` if the mock accepted it.
    pub failure: Option<AuthFailure>,
}

/// Bytes of a blob name kept as they are in a path.
const PATH: &AsciiSet = &NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'.')
    .remove(b'_')
    .remove(b'~')
    .remove(b'/');

/// A blob name as it is sent in a path: every byte but `A-Z a-z 0-9 - . _ ~ /` as `%XY`.
pub(crate) fn encode_blob(blob: &str) -> String {
    utf8_percent_encode(blob, PATH).to_string()
}

/// The code and message of an Azure error answer, for a harness's error message.
pub(crate) fn error_summary(body: &str) -> String {
    let element = |name: &str| {
        let start = body.find(&format!("<{name}>"))? + name.len() + 2;
        let end = body[start..].find(&format!("</{name}>"))? + start;
        Some(body[start..end].lines().next().unwrap_or("").to_string())
    };
    match (element("Code"), element("Message")) {
        (Some(code), Some(message)) => format!("{code}: {message}"),
        _ => body.chars().take(200).collect(),
    }
}

/// The request path of a blob, `/account/container/blob`, the name encoded as clients send it
/// (every byte but `A-Z a-z 0-9 - . _ ~ /` as `%XY`): the path for fault rules and the request
/// log.
pub fn blob_path(account: &str, container: &str, blob: &str) -> String {
    format!("/{account}/{container}/{}", encode_blob(blob))
}

/// A mock Azure Blob endpoint on `127.0.0.1`, running until dropped. See the
/// [module](self) documentation.
pub struct AzureMock {
    server: MockServer,
    state: Arc<AzureState>,
}

impl fmt::Debug for AzureMock {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AzureMock")
            .field("endpoint", &self.endpoint())
            .finish_non_exhaustive()
    }
}

impl AzureMock {
    /// Starts a plain-HTTP mock for Azurite's development account ([`DEV_ACCOUNT`],
    /// [`DEV_KEY`]).
    ///
    /// # Panics
    /// If no port can be bound on `127.0.0.1` (this is a test helper).
    pub fn start() -> AzureMock {
        Self::start_with(DEV_ACCOUNT, DEV_KEY)
            .unwrap_or_else(|e| panic!("karu-testkit: cannot start the Azure mock: {e}"))
    }

    /// Starts a mock for `account` with the base64 `key`.
    pub fn start_with(account: &str, key: &str) -> io::Result<AzureMock> {
        let key = STANDARD
            .decode(key)
            .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))?;
        let server = MockServer::builder().start()?;
        server.set_ignore_suffix_ranges(true);
        let state = Arc::new(AzureState::new(account.to_owned(), key));
        server.set_gate(Some(Arc::new(AzureGate::new(state.clone()))));
        Ok(AzureMock { server, state })
    }

    /// The blob service URL: `http://127.0.0.1:PORT/account` (for `azure.endpoint`).
    pub fn endpoint(&self) -> String {
        format!("{}/{}", self.server.base_url(), self.state.account)
    }

    /// The account name.
    pub fn account(&self) -> &str {
        &self.state.account
    }

    /// A connection string naming the account, its key and [`endpoint`](AzureMock::endpoint).
    pub fn connection_string(&self) -> String {
        format!(
            "DefaultEndpointsProtocol=http;AccountName={};AccountKey={};BlobEndpoint={};",
            self.state.account,
            STANDARD.encode(&self.state.key),
            self.endpoint()
        )
    }

    /// The account key, base64.
    pub fn account_key(&self) -> String {
        STANDARD.encode(&self.state.key)
    }

    /// The underlying server: request log, fault plan, latency.
    pub fn server(&self) -> &MockServer {
        &self.server
    }

    /// The request path of a blob: [`blob_path`] for this account.
    pub fn path(&self, container: &str, blob: &str) -> String {
        blob_path(&self.state.account, container, blob)
    }

    /// Creates a container (private) if it does not exist.
    pub fn create_container(&self, container: &str) {
        self.state.create_container(container);
    }

    /// Makes a container (created if missing) public or private.
    pub fn set_public(&self, container: &str, public: bool) {
        self.state.set_public(container, public);
    }

    /// Stores a blob (creating the container if missing).
    pub fn insert(&self, container: &str, blob: &str, body: impl Into<Bytes>) {
        self.create_container(container);
        self.server.insert(&self.path(container, blob), body);
    }

    /// Stores a `size`-byte virtual blob (creating the container if missing).
    pub fn insert_virtual(&self, container: &str, blob: &str, size: u64) {
        self.create_container(container);
        self.server
            .insert_virtual(&self.path(container, blob), size);
    }

    /// Removes a blob.
    pub fn remove(&self, container: &str, blob: &str) {
        self.server.remove(&self.path(container, blob));
    }

    /// Sets a blob's `ETag` header (`None` for none).
    pub fn set_etag(&self, container: &str, blob: &str, etag: Option<&str>) {
        self.server.set_etag(&self.path(container, blob), etag);
    }

    /// Issues a bearer token for `identity`, valid for `lifetime` on the mock's clock.
    pub fn issue_token(&self, identity: &str, lifetime: Duration) -> String {
        let token = format!(
            "mock-token-{}-{}",
            identity.replace(|c: char| !c.is_ascii_alphanumeric(), "-"),
            self.state
                .now()
                .duration_since(SystemTime::UNIX_EPOCH)
                .unwrap_or_default()
                .as_nanos()
        );
        self.state.add_token(
            token.clone(),
            identity.to_owned(),
            self.state.now() + lifetime,
        );
        token
    }

    /// Fakes of the Entra ID token endpoint and the managed-identity endpoints on another
    /// loopback server, issuing tokens this mock accepts.
    ///
    /// # Panics
    /// If no port can be bound on `127.0.0.1`.
    pub fn identity_fakes(&self) -> IdentityFakes {
        IdentityFakes::start(self.state.clone(), false)
            .unwrap_or_else(|e| panic!("karu-testkit: cannot start the identity fakes: {e}"))
    }

    /// [`identity_fakes`](AzureMock::identity_fakes) over HTTPS, with a certificate of a
    /// generated CA ([`IdentityFakes::ca_file`]): an authority behind a private CA.
    ///
    /// # Panics
    /// If no port can be bound on `127.0.0.1`.
    pub fn identity_fakes_over_tls(&self) -> IdentityFakes {
        IdentityFakes::start(self.state.clone(), true)
            .unwrap_or_else(|e| panic!("karu-testkit: cannot start the identity fakes: {e}"))
    }

    /// From now on every issued token is expired.
    pub fn expire_tokens(&self) {
        self.state.expire_tokens();
    }

    /// A service SAS (without `?`) reading the blobs of `container` for `lifetime` on the
    /// mock's clock, signed with the account key ([`Sas::container`]).
    pub fn sas_token(&self, container: &str, lifetime: Duration) -> String {
        self.sas(&Sas::container(container, self.state.now() + lifetime))
    }

    /// `sas` signed with this account's key: the token (without `?`).
    pub fn sas(&self, sas: &Sas) -> String {
        sas.token(&self.state.account, &self.state.key)
    }

    /// The mock's clock (the system clock moved by [`set_clock_offset`](Self::set_clock_offset)).
    pub fn now(&self) -> SystemTime {
        self.state.now()
    }

    /// Moves the mock's clock `secs` ahead of the system clock (behind if negative).
    pub fn set_clock_offset(&self, secs: i64) {
        self.state.set_clock_offset(secs);
    }

    /// Every authentication so far, in order.
    pub fn auth_log(&self) -> Vec<AuthRecord> {
        self.state.log()
    }

    /// Every authentication so far, clearing the log.
    pub fn take_auth_log(&self) -> Vec<AuthRecord> {
        self.state.take_log()
    }
}
