//! `cargo xtask conformance`: the provider-agnostic suite against a provider's mock server
//! (fault matrix included), a real server started here, or a real endpoint.

use clap::Args;
use karu_testkit::azurite::Azurite;
use karu_testkit::conformance::{
    self, AzureAuth, AzureEndpointTarget, AzureMockTarget, AzuriteTarget, GcsMockTarget, GcsTarget,
    HfHubTarget, HfMockTarget, HttpMockTarget, NginxTarget, Options, Report, S3MockTarget,
    S3Target, SourceMockTarget, Target,
};
use karu_testkit::nginx::Nginx;
use karu_testkit::seaweedfs::SeaweedFs;

#[derive(Debug, Args)]
pub(crate) struct Conformance {
    /// Which provider: `http`, `s3`, `gcs`, `azure`, `hf`, `source`, or `all` (default). With
    /// `--endpoint`, `s3`, `gcs` or `azure`.
    #[arg(long, default_value = "all")]
    provider: String,
    /// A real endpoint to test instead of the mock: S3-compatible
    /// (`https://s3.eu-west-1.amazonaws.com` for AWS, `http://127.0.0.1:8333` for a local
    /// store), GCS, or an Azure Blob service (`https://ACCOUNT.blob.core.windows.net`,
    /// `http://127.0.0.1:10000/devstoreaccount1` for Azurite).
    #[arg(long, value_name = "URL")]
    endpoint: Option<String>,
    /// Credentials for the endpoint, `ACCESS_KEY_ID:SECRET_ACCESS_KEY` (s3) or
    /// `ACCOUNT:KEY` (azure, Shared Key).
    #[arg(long, value_name = "KEY:SECRET", requires = "endpoint")]
    credentials: Option<String>,
    /// An OAuth 2 access token for a GCS endpoint (`gcloud auth print-access-token`); the
    /// bucket must exist.
    #[arg(long, value_name = "TOKEN", requires = "endpoint")]
    token: Option<String>,
    /// A SAS token for an Azure endpoint instead of `--credentials` (reads need `r`, the
    /// fixtures `c`, `w` and `d`; the container must exist unless it may create one).
    #[arg(
        long,
        value_name = "TOKEN",
        requires = "endpoint",
        conflicts_with = "credentials"
    )]
    sas: Option<String>,
    /// Region of the endpoint.
    #[arg(long, default_value = "us-east-1")]
    region: String,
    /// Bucket (Azure: container) to use on the endpoint (created if missing; objects go under
    /// a unique prefix, deleted afterwards on Azure).
    #[arg(long, default_value = "karu-conformance")]
    bucket: String,
    /// Also run against real servers started here: nginx for `http`, SeaweedFS for `s3`,
    /// Azurite for `azure` (with Shared Key and with a SAS), fake-gcs-server for `gcs`.
    #[arg(long)]
    real: bool,
    /// Run only cases whose name contains this.
    #[arg(long)]
    filter: Option<String>,
    /// Skip cases whose name contains this (repeatable; a server's documented deviation, such
    /// as Azurite's answer to a range of an empty blob: `--skip basic/empty_object`).
    #[arg(long, value_name = "CASE")]
    skip: Vec<String>,
    /// Skip the fault matrix.
    #[arg(long)]
    skip_faults: bool,
}

pub(crate) fn run(args: Conformance) -> Result<(), String> {
    let mut options = Options::default();
    if let Some(filter) = &args.filter {
        options = options.filter(filter.clone());
    }
    if args.skip_faults {
        options = options.skip_faults();
    }
    for case in &args.skip {
        options = options.skip(case.clone());
    }
    let mut reports: Vec<Report> = Vec::new();
    let wants = |p: &str| args.provider == "all" || args.provider == p;

    if let Some(endpoint) = &args.endpoint {
        if args.provider == "gcs" {
            let token = args
                .token
                .as_deref()
                .ok_or("--endpoint with --provider gcs needs --token ACCESS_TOKEN")?;
            let target = GcsTarget::remote(endpoint.clone(), token, args.bucket.clone());
            reports.push(run_one(&target, &options));
            return finish(&reports);
        }
        if args.provider == "azure" {
            let auth = match (&args.credentials, &args.sas) {
                (Some(credentials), None) => {
                    let (account, key) = credentials
                        .split_once(':')
                        .ok_or("--credentials for azure is ACCOUNT:KEY")?;
                    AzureAuth::SharedKey {
                        account: account.into(),
                        key: key.into(),
                    }
                }
                (None, Some(sas)) => AzureAuth::Sas(sas.clone()),
                _ => {
                    return Err(
                        "--endpoint with --provider azure needs --credentials ACCOUNT:KEY or \
                         --sas TOKEN"
                            .into(),
                    );
                }
            };
            reports.push(run_azure_endpoint(endpoint, auth, &args.bucket, &options)?);
            return finish(&reports);
        }
        if !wants("s3") {
            return Err("--endpoint is for the s3, gcs and azure providers".into());
        }
        let (key, secret) = args
            .credentials
            .as_deref()
            .and_then(|c| c.split_once(':'))
            .ok_or("--endpoint needs --credentials ACCESS_KEY_ID:SECRET_ACCESS_KEY")?;
        let target = S3Target::new(
            "s3-endpoint",
            Some(endpoint.clone()),
            args.region.clone(),
            key,
            secret,
            args.bucket.clone(),
        );
        target.ensure_bucket()?;
        reports.push(run_one(&target, &options));
        return finish(&reports);
    }

    if wants("http") {
        reports.push(run_one(&HttpMockTarget::start(), &options));
        if args.real {
            if !Nginx::available() {
                return Err(
                    "nginx is not installed: run `cargo xtask test` once to install it".into(),
                );
            }
            let target = NginxTarget::start().map_err(|e| format!("cannot start nginx: {e}"))?;
            reports.push(run_one(&target, &options));
        }
    }
    if wants("s3") {
        reports.push(run_one(&S3MockTarget::start(), &options));
        if args.real {
            let weed = SeaweedFs::start().map_err(|e| format!("cannot start SeaweedFS: {e}"))?;
            let target = S3Target::new(
                "seaweedfs",
                Some(weed.endpoint()),
                weed.region(),
                weed.access_key_id(),
                weed.secret_access_key(),
                "karu-conformance",
            );
            target.ensure_bucket()?;
            reports.push(run_one(&target, &options));
        }
    }
    if wants("azure") {
        reports.push(run_one(&AzureMockTarget::start(), &options));
        if args.real {
            // Azurite answers a range on an empty blob with `206 bytes 0--1/0`, which Karu
            // refuses as a protocol error (tests/azurite.rs in karu-provider-azure proves it).
            let options = options.clone().skip("basic/empty_object");
            for sas in [false, true] {
                let target =
                    AzuriteTarget::start(sas).map_err(|e| format!("cannot start Azurite: {e}"))?;
                reports.push(run_one(&target, &options));
            }
            // The `--endpoint` path (uploads signed by the testkit, fixtures deleted) against
            // an Azurite on 127.0.0.1.
            let azurite = Azurite::start().map_err(|e| format!("cannot start Azurite: {e}"))?;
            let auth = AzureAuth::SharedKey {
                account: azurite.account().into(),
                key: azurite.account_key().into(),
            };
            reports.push(run_azure_endpoint(
                &azurite.endpoint(),
                auth,
                "karu-conformance",
                &options,
            )?);
        }
    }
    if wants("hf") {
        reports.push(run_one(&HfMockTarget::start(), &options));
        reports.push(run_one(&HfHubTarget::start(), &options));
    }
    if wants("source") {
        reports.push(run_one(&SourceMockTarget::start(), &options));
    }
    if wants("gcs") {
        reports.push(run_one(&GcsMockTarget::start(), &options));
        if args.real {
            reports.push(run_one(&GcsTarget::fake_gcs_server()?, &options));
        }
    }
    if reports.is_empty() {
        return Err(format!(
            "unknown provider {:?} (http, s3, gcs, azure, hf, source, all)",
            args.provider
        ));
    }
    finish(&reports)
}

/// The suite against an Azure Blob endpoint: the container created if missing (and allowed),
/// fixtures uploaded under a unique prefix and deleted afterwards.
fn run_azure_endpoint(
    endpoint: &str,
    auth: AzureAuth,
    container: &str,
    options: &Options,
) -> Result<Report, String> {
    let target = AzureEndpointTarget::new(endpoint, auth, container)?;
    target.ensure_container()?;
    let report = run_one(&target, options);
    let deleted = target.cleanup()?;
    println!(
        "azure-endpoint: deleted the {deleted} fixtures under {}/{}",
        container,
        target.prefix()
    );
    Ok(report)
}

fn run_one(target: &dyn Target, options: &Options) -> Report {
    let report = conformance::run(target, options);
    println!("{report}");
    report
}

fn finish(reports: &[Report]) -> Result<(), String> {
    let failed: usize = reports.iter().map(|r| r.failures().len()).sum();
    let total: usize = reports.iter().map(|r| r.cases.len()).sum();
    if failed == 0 {
        println!("conformance: all {total} cases passed");
        Ok(())
    } else {
        Err(format!("conformance: {failed} of {total} cases failed"))
    }
}

#[cfg(test)]
mod tests {
    use std::time::{Duration, SystemTime};

    use clap::Parser;
    use karu_testkit::azure::Sas;

    use super::*;

    #[derive(Debug, Parser)]
    struct Cli {
        #[command(flatten)]
        conformance: Conformance,
    }

    /// `cargo xtask conformance ARGS`, parsed and run as the command line does.
    fn conformance(args: &[&str]) -> Result<(), String> {
        let cli = Cli::try_parse_from(std::iter::once("conformance").chain(args.iter().copied()))
            .map_err(|e| e.to_string())?;
        run(cli.conformance)
    }

    #[test]
    fn the_azure_endpoint_path_passes_against_azurite_and_leaves_no_fixture_behind() {
        let azurite = Azurite::start().unwrap_or_else(|e| panic!("cannot start Azurite: {e}"));
        let endpoint = azurite.endpoint();
        let container = "endpoint-conformance";
        // Azurite answers a range of an empty blob with `206 bytes 0--1/0` (see
        // karu-provider-azure's tests/azurite.rs): that case is its own.
        let common = [
            "--provider",
            "azure",
            "--endpoint",
            endpoint.as_str(),
            "--bucket",
            container,
            "--skip",
            "basic/empty_object",
        ];

        // Shared Key: the container is created, the fixtures uploaded with the testkit's own
        // signer, read by the provider, then deleted.
        let credentials = format!("{}:{}", azurite.account(), azurite.account_key());
        let mut args = common.to_vec();
        args.extend(["--credentials", credentials.as_str()]);
        conformance(&args).unwrap();
        assert_eq!(azurite.list(container).unwrap(), Vec::<String>::new());

        // A SAS that may write and delete: the same, every request carrying the token.
        let sas = azurite.sas(
            &Sas::account(SystemTime::now() + Duration::from_secs(3600)).permissions("rwdlac"),
        );
        let mut args = common.to_vec();
        args.extend(["--sas", sas.as_str()]);
        conformance(&args).unwrap();
        assert_eq!(azurite.list(container).unwrap(), Vec::<String>::new());

        // A read-only SAS cannot upload: the run fails and says so.
        let read_only = azurite.account_sas(Duration::from_secs(3600));
        let mut args = common.to_vec();
        args.extend(["--sas", read_only.as_str(), "--filter", "basic/single"]);
        let error = conformance(&args).unwrap_err();
        assert!(error.contains("failed"), "{error}");
        assert_eq!(azurite.list(container).unwrap(), Vec::<String>::new());

        assert!(
            conformance(&["--provider", "azure", "--endpoint", endpoint.as_str()])
                .unwrap_err()
                .contains("--credentials ACCOUNT:KEY or --sas TOKEN")
        );
    }
}
