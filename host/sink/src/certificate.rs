//! Why a broker's TLS certificate failed verification. librdkafka says only
//! "certificate verify failed"; a handshake of our own with the same CA settings, through
//! the same OpenSSL, reads the verification result: an unknown issuer, a name the
//! certificate does not carry, or a certificate out of date.

use std::net::{TcpStream, ToSocketAddrs};
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use openssl::nid::Nid;
use openssl::ssl::{HandshakeError, SslConnector, SslMethod, SslVerifyMode};
use openssl::x509::X509;

use crate::failure::SecurityProblem;

/// OpenSSL's verification results this module tells apart (`X509_V_ERR_*`).
const UNABLE_TO_GET_ISSUER_CERT: i32 = 2;
const CERT_NOT_YET_VALID: i32 = 9;
const CERT_HAS_EXPIRED: i32 = 10;
const DEPTH_ZERO_SELF_SIGNED_CERT: i32 = 18;
const SELF_SIGNED_CERT_IN_CHAIN: i32 = 19;
const UNABLE_TO_GET_ISSUER_CERT_LOCALLY: i32 = 20;
const UNABLE_TO_VERIFY_LEAF_SIGNATURE: i32 = 21;
const HOSTNAME_MISMATCH: i32 = 62;
const IP_ADDRESS_MISMATCH: i32 = 64;

/// How long looking at the certificate may take.
const WAIT: Duration = Duration::from_secs(5);

/// Why `broker`'s certificate does not verify against the trusted CAs (`ssl.ca.location`,
/// a PEM file or directory, and `ssl.ca.pem`; the system's CA certificates when both are
/// unset), or `None` if that cannot be told.
pub(crate) fn why_unverified(
    broker: &str,
    (ca, ca_pem): (Option<&str>, Option<&str>),
    verify_hostname: bool,
) -> Option<SecurityProblem> {
    let (host, _) = broker.rsplit_once(':')?;
    let host = host.trim_start_matches('[').trim_end_matches(']');
    let address = broker.to_socket_addrs().ok()?.next()?;
    let stream = TcpStream::connect_timeout(&address, WAIT).ok()?;
    stream.set_read_timeout(Some(WAIT)).ok()?;
    stream.set_write_timeout(Some(WAIT)).ok()?;
    let mut builder = SslConnector::builder(SslMethod::tls_client()).ok()?;
    // `probe` is librdkafka's word for "look for the system's CA certificates".
    match ca.filter(|ca| *ca != "probe") {
        Some(ca) if Path::new(ca).is_dir() => {
            builder.load_verify_locations(None, Some(Path::new(ca)))
        }
        Some(ca) => builder.set_ca_file(ca),
        None if ca_pem.is_some() => Ok(()),
        None => builder.set_default_verify_paths(),
    }
    .ok()?;
    if let Some(pem) = ca_pem {
        for certificate in X509::stack_from_pem(pem.as_bytes()).ok()? {
            builder.cert_store_mut().add_cert(certificate).ok()?;
        }
    }
    let mut configuration = builder
        .build()
        .configure()
        .ok()?
        .verify_hostname(verify_hostname);
    // A handshake that fails verification keeps no peer certificate: the verification
    // callback keeps the broker's own (the chain's first) as it goes by.
    let seen: Arc<Mutex<Option<X509>>> = Arc::default();
    let keep = seen.clone();
    configuration.set_verify_callback(SslVerifyMode::PEER, move |ok, context| {
        let mut kept = keep.lock().unwrap_or_else(|e| e.into_inner());
        if kept.is_none() {
            *kept = context
                .chain()
                .and_then(|chain| chain.iter().next().map(|c| c.to_owned()))
                .or_else(|| context.current_cert().map(|c| c.to_owned()));
        }
        ok
    });
    let HandshakeError::Failure(failed) = configuration.connect(host, stream).err()? else {
        return None;
    };
    let result = failed.ssl().verify_result().as_raw();
    let certificate = seen.lock().unwrap_or_else(|e| e.into_inner()).take()?;
    match result {
        HOSTNAME_MISMATCH | IP_ADDRESS_MISMATCH => Some(SecurityProblem::HostnameMismatch {
            host: host.to_string(),
            names: names(&certificate),
        }),
        CERT_HAS_EXPIRED | CERT_NOT_YET_VALID => Some(SecurityProblem::CertificateOutOfDate),
        UNABLE_TO_GET_ISSUER_CERT
        | DEPTH_ZERO_SELF_SIGNED_CERT
        | SELF_SIGNED_CERT_IN_CHAIN
        | UNABLE_TO_GET_ISSUER_CERT_LOCALLY
        | UNABLE_TO_VERIFY_LEAF_SIGNATURE => Some(SecurityProblem::UntrustedCertificate {
            ca: ca.map(str::to_string),
            issuer: issuer(&certificate),
        }),
        // Verified here, or failed for a reason not told apart: librdkafka's words stand.
        _ => None,
    }
}

/// The DNS names and IP addresses a certificate is for, or its common name if it has
/// no subject alternative names.
fn names(certificate: &X509) -> Vec<String> {
    let alternatives: Vec<String> = certificate
        .subject_alt_names()
        .map(|names| {
            names
                .iter()
                .filter_map(|name| {
                    name.dnsname().map(str::to_string).or_else(|| {
                        name.ipaddress().and_then(|ip| match ip.len() {
                            4 => Some(
                                std::net::Ipv4Addr::from(<[u8; 4]>::try_from(ip).ok()?).to_string(),
                            ),
                            16 => Some(
                                std::net::Ipv6Addr::from(<[u8; 16]>::try_from(ip).ok()?)
                                    .to_string(),
                            ),
                            _ => None,
                        })
                    })
                })
                .collect()
        })
        .unwrap_or_default();
    if alternatives.is_empty() {
        common_name(certificate.subject_name())
            .into_iter()
            .collect()
    } else {
        alternatives
    }
}

fn issuer(certificate: &X509) -> String {
    common_name(certificate.issuer_name()).unwrap_or_else(|| "an unnamed issuer".into())
}

fn common_name(name: &openssl::x509::X509NameRef) -> Option<String> {
    name.entries_by_nid(Nid::COMMONNAME)
        .next()
        .and_then(|entry| entry.data().to_string().ok())
}
