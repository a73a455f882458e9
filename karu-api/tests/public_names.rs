//! A user can name, through `karu` alone, every type `karu` hands out: this file compiles only
//! while each is re-exported. (`cargo xtask public-api` finds such types from rustdoc's JSON;
//! this test keeps the ones it found named, on the stable toolchain, in every test run.)

#![allow(dead_code)]

use std::sync::Arc;

/// What `ClientBuilder`, `Client` and a batch hand out.
type ClientTypes = (
    karu::ClientBuilder,
    karu::Client,
    karu::Batch,
    karu::ScopedBatch<'static>,
    karu::BatchOptions,
    karu::BatchStats,
    karu::Completion,
    karu::Next,
    karu::Ends,
    karu::ObjectInfo,
    karu::TransportStats,
    karu::CredentialStats,
    karu::Timing,
    karu::ObjectReader,
    karu::ProcessStamp,
);

/// The model: addresses, ranges, outcomes.
type ModelTypes = (
    karu::Locator,
    karu::CanonicalPath,
    karu::Window,
    karu::Target,
    karu::Read<'static>,
    karu::RangeSpec,
    karu::ContentRange,
    karu::Status,
    karu::Error,
    karu::Evidence,
    karu::Mismatch,
    karu::Rejection,
);

/// Credential callbacks and their values.
type CredentialTypes = (
    karu::Credential,
    karu::CallbackCredential,
    karu::BearerToken,
    Arc<dyn karu::CredentialCallback>,
    Arc<dyn karu::Clock>,
    karu::SystemClock,
);

/// The configuration a client captures (`Client::snapshot`, `ClientBuilder::wording`,
/// `Snapshot::global`, `Snapshot::explain`, `ConfigBuilder::build`).
type ConfigTypes = (
    karu::ConfigBuilder,
    karu::Snapshot,
    karu::config::Settings,
    karu::config::PlannerSettings,
    karu::config::HttpSettings,
    karu::config::RetrySettings,
    karu::config::Explanation,
    karu::config::Explained,
    karu::config::ConfigError,
    karu::config::ConfigErrorKind,
    karu::config::Origin,
    karu::config::Scoped<()>,
    karu::config::Section,
    karu::config::Wording,
    karu::config::ByteSize,
    karu::config::Seconds,
);

/// What `ClientBuilder::provider`, `Registry` and `Locator` hand out of the provider SDK.
type SdkTypes = (
    karu::Registry,
    karu::sdk::RegistryBuilder,
    Arc<dyn karu::sdk::Backend>,
    karu::sdk::Resolved,
    karu::sdk::PreparedRequest,
);

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
