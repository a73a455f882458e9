//! Classification of transport failures from structured error kinds, never message text.

use std::error::Error as StdError;
use std::io;

use crate::http::transport::DnsFailure;
use crate::retry::FailureClass;
use crate::status::Status;

/// What a transport error was, decided by walking its source chain for known types.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum TransportKind {
    /// Name resolution failed.
    Dns,
    /// The connection was refused.
    Refused,
    /// Connecting timed out.
    ConnectTimeout,
    /// Connecting failed otherwise.
    Connect,
    /// The server's certificate was not trusted, or TLS could not be agreed: permanent.
    TlsPermanent,
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
            TransportKind::TlsPermanent | TransportKind::Malformed => FailureClass::Permanent,
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

    /// A short description for messages.
    pub(crate) fn describe(self) -> &'static str {
        match self {
            TransportKind::Dns => "name resolution failed",
            TransportKind::Refused => "connection refused",
            TransportKind::ConnectTimeout => "connect timeout",
            TransportKind::Connect => "cannot connect",
            TransportKind::TlsPermanent => {
                "TLS failed (untrusted certificate or no common protocol)"
            }
            TransportKind::Tls => "TLS failed",
            TransportKind::Io => "connection failed mid-exchange",
            TransportKind::Malformed => "malformed HTTP response",
            TransportKind::Http => "HTTP exchange failed",
        }
    }
}

/// Classify an error from the hyper client or the response body.
///
/// The error chain is walked through both `source()` links and the inner errors of
/// `io::Error`s (hyper-rustls and tokio-rustls wrap rustls' error in `io::Error`s), looking
/// for known types: a name-resolution failure or a TLS error anywhere decides the kind;
/// otherwise the innermost I/O error kind, then hyper's own flags.
pub(crate) fn classify(error: &(dyn StdError + 'static), connecting: bool) -> TransportKind {
    let chain = chain_of(error);
    if chain
        .iter()
        .any(|e| e.downcast_ref::<DnsFailure>().is_some())
    {
        return TransportKind::Dns;
    }
    if let Some(tls) = chain.iter().find_map(|e| e.downcast_ref::<rustls::Error>()) {
        return classify_tls(tls);
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

fn classify_tls(error: &rustls::Error) -> TransportKind {
    match error {
        rustls::Error::InvalidCertificate(_)
        | rustls::Error::NoCertificatesPresented
        | rustls::Error::UnsupportedNameType
        | rustls::Error::PeerIncompatible(_)
        | rustls::Error::NoApplicationProtocol => TransportKind::TlsPermanent,
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
        assert_eq!(classify(&untrusted, true), TransportKind::TlsPermanent);
        assert_eq!(TransportKind::TlsPermanent.class(), FailureClass::Permanent);
        let alert = io::Error::other(rustls::Error::AlertReceived(
            rustls::AlertDescription::InternalError,
        ));
        assert_eq!(classify(&alert, true), TransportKind::Tls);
    }

    #[test]
    fn tls_errors_wrapped_twice_in_io_errors_are_found() {
        let inner = io::Error::new(
            io::ErrorKind::InvalidData,
            rustls::Error::InvalidCertificate(rustls::CertificateError::UnknownIssuer),
        );
        let outer = io::Error::other(inner);
        assert_eq!(classify(&outer, true), TransportKind::TlsPermanent);
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
