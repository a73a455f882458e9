//! A user can name, through `karu` alone, every type `karu` hands out: this file compiles only
//! while each is re-exported. (`cargo xtask public-api` finds such types from rustdoc's JSON;
//! this test keeps the ones it found named, on the stable toolchain, in every test run.)

#![allow(dead_code)]

use std::sync::Arc;

/// What `ClientBuilder`, `Client` and a batch hand out.
fn client_types(
    _: karu::ClientBuilder,
    _: karu::Client,
    _: karu::Batch,
    _: karu::ScopedBatch<'static>,
    _: karu::BatchOptions,
    _: karu::BatchStats,
    _: karu::Completion,
    _: karu::Next,
    _: karu::Ends,
    _: karu::ObjectInfo,
    _: karu::TransportStats,
    _: karu::CredentialStats,
    _: karu::Timing,
    _: karu::ObjectReader,
    _: karu::ProcessStamp,
) {
}

/// The model: addresses, ranges, outcomes.
fn model_types(
    _: karu::Locator,
    _: karu::CanonicalPath,
    _: karu::Window,
    _: karu::Target,
    _: karu::Read<'static>,
    _: karu::RangeSpec,
    _: karu::ContentRange,
    _: karu::Status,
    _: karu::Error,
    _: karu::Evidence,
    _: karu::Mismatch,
    _: karu::Rejection,
) {
}

/// Credential callbacks and their values.
fn credential_types(
    _: karu::Credential,
    _: karu::CallbackCredential,
    _: karu::BearerToken,
    _: Arc<dyn karu::CredentialCallback>,
    _: Arc<dyn karu::Clock>,
    _: karu::SystemClock,
) {
}

/// The configuration a client captures (`Client::snapshot`, `ClientBuilder::wording`,
/// `Snapshot::global`, `Snapshot::explain`, `ConfigBuilder::build`).
fn config_types(
    _: karu::ConfigBuilder,
    _: karu::Snapshot,
    _: karu::config::Settings,
    _: karu::config::PlannerSettings,
    _: karu::config::HttpSettings,
    _: karu::config::RetrySettings,
    _: karu::config::Explanation,
    _: karu::config::Explained,
    _: karu::config::ConfigError,
    _: karu::config::ConfigErrorKind,
    _: karu::config::Origin,
    _: karu::config::Scoped<()>,
    _: karu::config::Section,
    _: karu::config::Wording,
    _: karu::config::ByteSize,
    _: karu::config::Seconds,
) {
}

/// What `ClientBuilder::provider`, `Registry` and `Locator` hand out of the provider SDK.
fn sdk_types(
    _: karu::Registry,
    _: karu::sdk::RegistryBuilder,
    _: Arc<dyn karu::sdk::Backend>,
    _: karu::sdk::Resolved,
    _: karu::sdk::PreparedRequest,
) {
}

#[test]
fn a_provider_registers_through_karu_alone() {
    // `ClientBuilder::provider` takes what `karu::providers`' register functions are.
    let register: fn(&mut karu::sdk::RegistryBuilder) = karu::providers::local::register;
    let client = karu::Client::builder()
        .user_config_file(None)
        .project_config_file(None)
        .provider(register)
        .wording(karu::config::Wording::new(
            "added",
            "explicit",
            "path rules",
        ))
        .build()
        .unwrap();
    let settings: &karu::config::Settings = client.snapshot().global();
    assert_eq!(settings.file_workers, 4);
    assert!(karu::providers::enabled().contains(&"local"));
    let mut builder = karu::Registry::builder();
    karu::providers::register_all(&mut builder);
    assert!(builder.build().unwrap().resolve("/tmp/x").is_ok());
}
