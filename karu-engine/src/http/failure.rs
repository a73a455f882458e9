//! Classification of transport failures from structured error kinds, never message text.
//!
//! Permanent failures are the ones another attempt cannot change: a TLS record that is not TLS
//! (an `https://` address of a plain-HTTP port), a certificate the client does not trust, no
//! TLS version or HTTP version in common with the server. Their messages name the likely cause
//! and the setting or address to change.

use std::error::Error as StdError;
use std::fmt;
use std::io;

use crate::http::transport::{ConnectTimedOut, DnsFailure, NoConnectionSlot};
use crate::retry::FailureClass;
use crate::sdk::Status;

/// What was wrong with the server's certificate.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Certificate {
    /// Not issued by a trusted authority (a private CA, a self-signed certificate).
    Untrusted,
    /// Not valid for the host name addressed.
    WrongName,
    /// Expired, or not valid yet.
    OutOfDate,
    /// Revoked by its issuer.
    Revoked,
    /// Invalid otherwise (bad encoding, signature or purpose); or none was presented.
    Invalid,
}

/// What a transport error was, decided by walking its source chain for known types.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum TransportKind {
    /// Name resolution failed.
    Dns,
    /// The connection was refused.
    Refused,
    /// The connection (TCP and the TLS handshake) was not established within the connect
    /// timeout.
    ConnectTimeout,
    /// Connecting failed otherwise.
    Connect,
    /// The server answered the TLS handshake with something that is not TLS: permanent.
    NotTls,
    /// The server's certificate was refused: permanent.
    Certificate(Certificate),
    /// No TLS version or cipher suite in common with the server: permanent.
    TlsIncompatible,
    /// The server accepts none of the HTTP versions offered in the TLS handshake (ALPN):
    /// permanent.
    NoCommonHttpVersion,
    /// The client speaks only HTTP/2 (`http.version = "http2"`) and the server does not (its
    /// connection showed it, see `transport::Stream`): permanent.
    NotHttp2,
    /// A TLS failure that another connection may not meet.
    Tls,
    /// The connection was reset, aborted or closed mid-exchange, or a send or receive failed.
    Io,
    /// The response could not be parsed: permanent.
    Malformed,
    /// Anything else from the HTTP layer (HTTP/2 stream resets, GOAWAY, canceled requests).
    Http,
}

impl TransportKind {
    /// The retry class of this kind.
    pub(crate) fn class(self) -> FailureClass {
        match self {
            TransportKind::Dns
            | TransportKind::Refused
            | TransportKind::ConnectTimeout
            | TransportKind::Connect => FailureClass::Connect,
            TransportKind::NotTls
            | TransportKind::Certificate(_)
            | TransportKind::TlsIncompatible
            | TransportKind::NoCommonHttpVersion
            | TransportKind::NotHttp2
            | TransportKind::Malformed => FailureClass::Permanent,
            TransportKind::Tls | TransportKind::Io | TransportKind::Http => FailureClass::Transport,
        }
    }

    /// The status a read fails with when this is the last error.
    pub(crate) fn status(self) -> Status {
        match self {
            TransportKind::ConnectTimeout => Status::TimedOut,
            TransportKind::Malformed => Status::Protocol,
            _ => Status::Network,
        }
    }
}

/// A short description for messages: what failed, and for permanent failures the likely cause
/// and what to change.
impl fmt::Display for TransportKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let text = match self {
            TransportKind::Dns => "name resolution failed",
            TransportKind::Refused => "connection refused",
            TransportKind::ConnectTimeout => {
                "no connection within the connect timeout (TCP and TLS handshake; \
                 http.connect_timeout)"
            }
            TransportKind::Connect => "cannot connect",
            TransportKind::NotTls => {
                "TLS failed: the server did not answer with TLS; is this a plain HTTP port \
                 addressed with https://? (use http:// for it)"
            }
            TransportKind::Certificate(Certificate::Untrusted) => {
                "TLS failed: the server's certificate is not issued by a trusted authority \
                 (a private CA can be added with http.ca_file)"
            }
            TransportKind::Certificate(Certificate::WrongName) => {
                "TLS failed: the server's certificate is not valid for this host name"
            }
            TransportKind::Certificate(Certificate::OutOfDate) => {
                "TLS failed: the server's certificate is expired or not valid yet"
            }
            TransportKind::Certificate(Certificate::Revoked) => {
                "TLS failed: the server's certificate was revoked"
            }
            TransportKind::Certificate(Certificate::Invalid) => {
                "TLS failed: the server's certificate is invalid"
            }
            TransportKind::TlsIncompatible => {
                "TLS failed: no TLS version or cipher suite in common with the server"
            }
            TransportKind::NoCommonHttpVersion => {
                "TLS failed: the server accepts none of the HTTP versions offered (ALPN); \
                 check http.version (\"http1\", \"auto\" or \"http2\")"
            }
            TransportKind::NotHttp2 => {
                "the server does not speak HTTP/2, which http.version = \"http2\" requires \
                 (use \"auto\" or \"http1\" for it)"
            }
            TransportKind::Tls => "TLS failed",
            TransportKind::Io => "connection failed mid-exchange",
            TransportKind::Malformed => "malformed HTTP response",
            TransportKind::Http => "HTTP exchange failed",
        };
        f.write_str(text)
    }
}

/// Classify an error from the client (a request that got no answer) or the response body.
///
/// The error chain is walked through both `source()` links and the inner errors of
/// `io::Error`s (hyper-rustls and tokio-rustls wrap rustls' error in `io::Error`s), looking
/// for known types: a name-resolution failure, the connect timeout or a TLS error anywhere
/// decides the kind; otherwise the innermost I/O error kind, then hyper's own flags.
/// `connecting` says whether the error came from establishing the connection.
pub(crate) fn classify(error: &(dyn StdError + 'static), connecting: bool) -> TransportKind {
    let chain = chain_of(error);
    if chain
        .iter()
        .any(|e| e.downcast_ref::<DnsFailure>().is_some())
    {
        return TransportKind::Dns;
    }
    if chain.iter().any(|e| {
        e.downcast_ref::<ConnectTimedOut>().is_some()
            || e.downcast_ref::<NoConnectionSlot>().is_some()
    }) {
        return TransportKind::ConnectTimeout;
    }
    if let Some(tls) = chain.iter().find_map(|e| e.downcast_ref::<rustls::Error>()) {
        return classify_tls(tls, connecting);
    }
    if let Some(io) = chain
        .iter()
        .rev()
        .find_map(|e| e.downcast_ref::<io::Error>())
    {
        return match io.kind() {
            io::ErrorKind::ConnectionRefused => TransportKind::Refused,
            io::ErrorKind::TimedOut if connecting => TransportKind::ConnectTimeout,
            io::ErrorKind::InvalidData if !connecting => TransportKind::Malformed,
            _ if connecting => TransportKind::Connect,
            _ => TransportKind::Io,
        };
    }
    let mut parse = false;
    for e in &chain {
        if let Some(h) = e.downcast_ref::<hyper::Error>() {
            if h.is_parse() || h.is_parse_status() || h.is_parse_too_large() {
                parse = true;
            } else if h.is_incomplete_message() || h.is_closed() || h.is_body_write_aborted() {
                return TransportKind::Io;
            }
        }
    }
    match (parse, connecting) {
        (true, _) => TransportKind::Malformed,
        (false, true) => TransportKind::Connect,
        (false, false) => TransportKind::Http,
    }
}

/// Every error in the chain, outermost first, following `source()` and `io::Error` payloads.
fn chain_of<'a>(error: &'a (dyn StdError + 'static)) -> Vec<&'a (dyn StdError + 'static)> {
    let mut chain = Vec::new();
    let mut next: Option<&'a (dyn StdError + 'static)> = Some(error);
    while let Some(e) = next {
        if chain.len() >= 32 {
            break;
        }
        chain.push(e);
        next = match e.downcast_ref::<io::Error>().and_then(|io| io.get_ref()) {
            Some(inner) => Some(inner as &(dyn StdError + 'static)),
            None => e.source(),
        };
    }
    chain
}

fn classify_tls(error: &rustls::Error, connecting: bool) -> TransportKind {
    use rustls::{AlertDescription as Alert, CertificateError as Cert, Error as E};
    match error {
        // The bytes that came back in the handshake are not TLS records: the port speaks
        // something else, most often plain HTTP.
        E::InvalidMessage(_) if connecting => TransportKind::NotTls,
        E::InvalidCertificate(cert) => TransportKind::Certificate(match cert {
            Cert::UnknownIssuer | Cert::BadSignature => Certificate::Untrusted,
            Cert::NotValidForName | Cert::NotValidForNameContext { .. } => Certificate::WrongName,
            Cert::Expired
            | Cert::ExpiredContext { .. }
            | Cert::NotValidYet
            | Cert::NotValidYetContext { .. } => Certificate::OutOfDate,
            Cert::Revoked => Certificate::Revoked,
            _ => Certificate::Invalid,
        }),
        E::NoCertificatesPresented | E::UnsupportedNameType => {
            TransportKind::Certificate(Certificate::Invalid)
        }
        E::PeerIncompatible(_)
        | E::AlertReceived(Alert::ProtocolVersion | Alert::HandshakeFailure) => {
            TransportKind::TlsIncompatible
        }
        // ALPN: the server accepts none of the protocols offered, or picked one not offered.
        E::NoApplicationProtocol | E::AlertReceived(Alert::NoApplicationProtocol) => {
            TransportKind::NoCommonHttpVersion
        }
        _ => TransportKind::Tls,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn io_kinds() {
        let e = io::Error::from(io::ErrorKind::ConnectionRefused);
        assert_eq!(classify(&e, true), TransportKind::Refused);
        let e = io::Error::from(io::ErrorKind::TimedOut);
        assert_eq!(classify(&e, true), TransportKind::ConnectTimeout);
        let e = io::Error::from(io::ErrorKind::ConnectionReset);
        assert_eq!(classify(&e, false), TransportKind::Io);
        assert_eq!(TransportKind::Io.class(), FailureClass::Transport);
        assert_eq!(TransportKind::Refused.class(), FailureClass::Connect);
    }

    #[test]
    fn tls_kinds() {
        let untrusted = io::Error::other(rustls::Error::InvalidCertificate(
            rustls::CertificateError::UnknownIssuer,
        ));
        assert_eq!(
            classify(&untrusted, true),
            TransportKind::Certificate(Certificate::Untrusted)
        );
        assert_eq!(
            TransportKind::Certificate(Certificate::Untrusted).class(),
            FailureClass::Permanent
        );
        let alert = io::Error::other(rustls::Error::AlertReceived(
            rustls::AlertDescription::InternalError,
        ));
        assert_eq!(classify(&alert, true), TransportKind::Tls);
    }

    /// A rustls error as hyper-rustls reports it: inside tokio-rustls' `io::Error`, inside
    /// hyper-rustls' own `io::Error`.
    fn wrapped(error: rustls::Error) -> io::Error {
        io::Error::other(io::Error::new(io::ErrorKind::InvalidData, error))
    }

    #[test]
    fn permanent_tls_failures_name_their_cause_and_are_not_retried() {
        use rustls::{AlertDescription as Alert, CertificateError as Cert, Error as E};
        let cases = [
            (
                E::InvalidMessage(rustls::InvalidMessage::InvalidContentType),
                TransportKind::NotTls,
                "http://",
            ),
            (
                E::InvalidCertificate(Cert::UnknownIssuer),
                TransportKind::Certificate(Certificate::Untrusted),
                "http.ca_file",
            ),
            (
                E::InvalidCertificate(Cert::NotValidForName),
                TransportKind::Certificate(Certificate::WrongName),
                "host name",
            ),
            (
                E::InvalidCertificate(Cert::Expired),
                TransportKind::Certificate(Certificate::OutOfDate),
                "expired",
            ),
            (
                E::InvalidCertificate(Cert::Revoked),
                TransportKind::Certificate(Certificate::Revoked),
                "revoked",
            ),
            (
                E::InvalidCertificate(Cert::BadEncoding),
                TransportKind::Certificate(Certificate::Invalid),
                "certificate",
            ),
            (
                E::AlertReceived(Alert::ProtocolVersion),
                TransportKind::TlsIncompatible,
                "TLS version",
            ),
            (
                E::AlertReceived(Alert::NoApplicationProtocol),
                TransportKind::NoCommonHttpVersion,
                "http.version",
            ),
            (
                E::NoApplicationProtocol,
                TransportKind::NoCommonHttpVersion,
                "http.version",
            ),
        ];
        for (error, kind, names) in cases {
            let debug = format!("{error:?}");
            assert_eq!(classify(&wrapped(error), true), kind, "{debug}");
            assert_eq!(kind.class(), FailureClass::Permanent, "{debug}");
            assert_eq!(kind.status(), Status::Network, "{debug}");
            assert!(kind.to_string().contains(names), "{debug}: {kind}");
        }
    }

    #[test]
    fn a_tls_record_that_is_not_tls_is_permanent_only_in_the_handshake() {
        let garbage = || {
            wrapped(rustls::Error::InvalidMessage(
                rustls::InvalidMessage::InvalidContentType,
            ))
        };
        assert_eq!(classify(&garbage(), true), TransportKind::NotTls);
        // Mid-exchange, another connection may not meet it.
        assert_eq!(classify(&garbage(), false), TransportKind::Tls);
        assert_eq!(TransportKind::Tls.class(), FailureClass::Transport);
    }

    #[test]
    fn the_connect_timeout_is_a_connect_failure() {
        let e = io::Error::other(ConnectTimedOut::for_tests());
        assert_eq!(classify(&e, true), TransportKind::ConnectTimeout);
        assert_eq!(TransportKind::ConnectTimeout.class(), FailureClass::Connect);
        assert_eq!(TransportKind::ConnectTimeout.status(), Status::TimedOut);
        assert!(
            TransportKind::ConnectTimeout
                .to_string()
                .contains("http.connect_timeout")
        );
    }

    #[test]
    fn a_server_without_http2_is_a_permanent_failure_naming_http_version() {
        let kind = TransportKind::NotHttp2;
        assert_eq!(kind.class(), FailureClass::Permanent);
        assert_eq!(kind.status(), Status::Network);
        assert!(kind.to_string().contains("http.version"), "{kind}");
    }

    #[test]
    fn tls_errors_wrapped_twice_in_io_errors_are_found() {
        let inner = io::Error::new(
            io::ErrorKind::InvalidData,
            rustls::Error::InvalidCertificate(rustls::CertificateError::UnknownIssuer),
        );
        let outer = io::Error::other(inner);
        assert_eq!(
            classify(&outer, true),
            TransportKind::Certificate(Certificate::Untrusted)
        );
    }

    #[test]
    fn dns_failures_are_found_in_the_chain() {
        #[derive(Debug)]
        struct Wrapper(DnsFailure);
        impl std::fmt::Display for Wrapper {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                write!(f, "wrapped")
            }
        }
        impl StdError for Wrapper {
            fn source(&self) -> Option<&(dyn StdError + 'static)> {
                Some(&self.0)
            }
        }
        let e = Wrapper(DnsFailure::for_tests("nowhere.invalid"));
        assert_eq!(classify(&e, true), TransportKind::Dns);
        assert_eq!(TransportKind::Dns.class(), FailureClass::Connect);
    }
}
