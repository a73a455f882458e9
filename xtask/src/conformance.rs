//! `cargo xtask conformance`: the provider-agnostic suite against a provider's mock server
//! (fault matrix included), a real server started here, or a real endpoint.

use clap::Args;
use karu_testkit::azurite::Azurite;
use karu_testkit::conformance::{
    self, AzureAuth, AzureEndpointTarget, AzureMockTarget, AzuriteTarget, GcsMockTarget, GcsTarget,
    HfEndpointTarget, HfHubTarget, HfMockTarget, HttpMockTarget, LocalTarget, NginxTarget, Objects,
    Options, ReadOnlyTarget, Report, S3MockTarget, S3Target, Seeds, SourceEndpointTarget,
    SourceMockTarget, Target,
};
use karu_testkit::nginx::Nginx;
use karu_testkit::seaweedfs::SeaweedFs;

#[derive(Debug, Args)]
pub(crate) struct Conformance {
    /// Which provider: `http`, `s3`, `gcs`, `azure`, `hf`, `source`, `local` (files in a
    /// temporary directory), or `all` (default). With
    /// `--endpoint`, one of `s3`, `gcs`, `azure`, `hf`, `source`.
    #[arg(long, default_value = "all")]
    provider: String,
    /// A real endpoint to test instead of the mock: S3-compatible
    /// (`https://s3.eu-west-1.amazonaws.com` for AWS, `http://127.0.0.1:8333` for a local
    /// store), GCS, or an Azure Blob service (`https://ACCOUNT.blob.core.windows.net`,
    /// `http://127.0.0.1:10000/devstoreaccount1` for Azurite), the Hugging Face Hub
    /// (`https://huggingface.co`) or Source Cooperative's data proxy
    /// (`https://data.source.coop`). The Hub and Source are read-only: the suite reads the
    /// objects named with `--object`/`--objects` and checks them against a reference taken
    /// without Karu (the Hub's stated SHA-256 of an LFS file, else a plain GET's bytes).
    #[arg(long, value_name = "URL")]
    endpoint: Option<String>,
    /// Credentials for the endpoint, `ACCESS_KEY_ID:SECRET_ACCESS_KEY` (s3; source, signed
    /// access) or `ACCOUNT:KEY` (azure, Shared Key).
    #[arg(long, value_name = "KEY:SECRET", requires = "endpoint")]
    credentials: Option<String>,
    /// An OAuth 2 access token for a GCS endpoint (`gcloud auth print-access-token`; the
    /// bucket must exist), or a Hugging Face token (`hf_…`) for the Hub.
    #[arg(long, value_name = "TOKEN", requires = "endpoint")]
    token: Option<String>,
    /// An object the read-only suite reads on an hf or source endpoint
    /// (`hf://[datasets/|spaces/]org/repo[@revision]/path`, `source://account/product/path`);
    /// repeatable. Each is read whole into memory (at most 1 GiB).
    #[arg(long, value_name = "ADDRESS", requires = "endpoint")]
    object: Vec<String>,
    /// A file naming objects for the read-only suite, one address a line (`#` comments).
    #[arg(long, value_name = "FILE", requires = "endpoint")]
    objects: Option<std::path::PathBuf>,
    /// An object of a gated or private Hub repository: read without a token, it must fail
    /// with PermissionDenied; repeatable.
    #[arg(long, value_name = "ADDRESS", requires = "endpoint")]
    gated: Vec<String>,
    /// A SAS token for an Azure endpoint instead of `--credentials` (reads need `r`, the
    /// fixtures `c`, `w` and `d`; the container must exist unless it may create one).
    #[arg(
        long,
        value_name = "TOKEN",
        requires = "endpoint",
        conflicts_with = "credentials"
    )]
    sas: Option<String>,
    /// Region of the endpoint (also what Source's signed access signs for).
    #[arg(long, default_value = "us-east-1")]
    region: String,
    /// Bucket (Azure: container) to use on the endpoint (created if missing; objects go under
    /// a unique prefix, deleted afterwards on Azure).
    #[arg(long, default_value = "karu-conformance")]
    bucket: String,
    /// Also run against real servers started here: nginx for `http` (HTTP/1.1, and HTTPS with
    /// HTTP/2), SeaweedFS for `s3`, Azurite for `azure` (with Shared Key and with a SAS),
    /// fake-gcs-server for `gcs`.
    #[arg(long)]
    real: bool,
    /// Run only cases whose name contains this.
    #[arg(long)]
    filter: Option<String>,
    /// Skip cases whose name contains this (repeatable; a server's documented deviation, such
    /// as a store without empty objects: `--skip basic/empty_object`).
    #[arg(long, value_name = "CASE")]
    skip: Vec<String>,
    /// Skip the fault matrix (and the random cases).
    #[arg(long)]
    skip_faults: bool,
    /// The first seed of the random cases run against a mock (each case is a function of its
    /// seed: a failure names it, and `--seed N --cases 1` runs it alone).
    #[arg(long, default_value_t = Seeds::default().first)]
    seed: u64,
    /// How many random cases run against a mock (0: none).
    #[arg(long, default_value_t = Seeds::default().count)]
    cases: u64,
}

pub(crate) fn run(args: Conformance) -> Result<(), String> {
    finish(&reports(args)?)
}

/// Run what `args` ask for; the reports, or why nothing could run.
fn reports(args: Conformance) -> Result<Vec<Report>, String> {
    let mut options = Options::default().seeds(args.seed, args.cases);
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
            return Ok(reports);
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
            return Ok(reports);
        }
        if args.provider == "hf" || args.provider == "source" {
            let objects = named_objects(&args)?;
            let target: Box<dyn ReadOnlyTarget> = if args.provider == "hf" {
                Box::new(HfEndpointTarget::new(endpoint, args.token.clone())?)
            } else {
                if !objects.restricted.is_empty() {
                    return Err("--gated is for the hf provider".into());
                }
                let keys = match &args.credentials {
                    Some(c) => {
                        let (key, secret) = c
                            .split_once(':')
                            .ok_or("--credentials for source is ACCESS_KEY_ID:SECRET_ACCESS_KEY")?;
                        Some((key.to_string(), secret.to_string()))
                    }
                    None => None,
                };
                Box::new(SourceEndpointTarget::new(endpoint, &args.region, keys)?)
            };
            let report = conformance::run_read_only(target.as_ref(), &objects, &options);
            println!("{report}");
            reports.push(report);
            return Ok(reports);
        }
        if !wants("s3") {
            return Err("--endpoint is for the s3, gcs, azure, hf and source providers".into());
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
        return Ok(reports);
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
            let target = NginxTarget::start_https_http2()
                .map_err(|e| format!("cannot start nginx with TLS: {e}"))?;
            reports.push(run_one(&target, &options));
        }
    }
    if wants("s3") {
        reports.push(run_one(&S3MockTarget::start(), &options));
        if args.real {
            let weed = SeaweedFs::start().map_err(|e| format!("cannot start SeaweedFS: {e}"))?;
            let target = S3Target::on_seaweedfs(&weed, "karu-conformance")?;
            reports.push(run_one(&target, &options));
        }
    }
    if wants("azure") {
        reports.push(run_one(&AzureMockTarget::start(), &options));
        if args.real {
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
        reports.push(run_one(&GcsMockTarget::start_emulator(), &options));
        if args.real {
            reports.push(run_one(&GcsTarget::fake_gcs_server()?, &options));
            reports.push(run_one(&GcsTarget::fake_gcs_server_xml()?, &options));
        }
    }
    if wants("local") {
        let target =
            LocalTarget::start().map_err(|e| format!("cannot make a temporary directory: {e}"))?;
        reports.push(run_one(&target, &options));
    }
    if reports.is_empty() {
        return Err(format!(
            "unknown provider {:?} (http, s3, gcs, azure, hf, source, local, all)",
            args.provider
        ));
    }
    Ok(reports)
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

/// The objects named for the read-only suite (`--object`, `--objects FILE`, `--gated`).
fn named_objects(args: &Conformance) -> Result<Objects, String> {
    let mut objects = Objects {
        readable: args.object.clone(),
        restricted: args.gated.clone(),
    };
    if let Some(file) = &args.objects {
        let text = std::fs::read_to_string(file)
            .map_err(|e| format!("cannot read --objects {}: {e}", file.display()))?;
        objects.readable.extend(
            text.lines()
                .map(str::trim)
                .filter(|l| !l.is_empty() && !l.starts_with('#'))
                .map(str::to_string),
        );
    }
    if objects.readable.is_empty() && objects.restricted.is_empty() {
        return Err(format!(
            "--endpoint with --provider {} reads objects it cannot upload: name them with \
             --object ADDRESS or --objects FILE",
            args.provider
        ));
    }
    Ok(objects)
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
    use karu_testkit::hf::{HfMock, RepoAccess};
    use karu_testkit::source::SourceMock;
    use karu_testkit::{GateResponse, RequestHead, Route};

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

    /// The reports `cargo xtask conformance ARGS` prints.
    fn conformance_reports(args: &[&str]) -> Result<Vec<Report>, String> {
        let cli = Cli::try_parse_from(std::iter::once("conformance").chain(args.iter().copied()))
            .map_err(|e| e.to_string())?;
        reports(cli.conformance)
    }

    /// Bytes no range logic could fake: a xorshift stream (not the testkit's pattern).
    fn noise(len: usize, seed: u64) -> Vec<u8> {
        let mut x = seed | 1;
        (0..len)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                (x >> 24) as u8
            })
            .collect()
    }

    /// (case, passed) of every case of `report`, and its failures' texts.
    fn outcomes(report: &Report) -> Vec<(String, bool)> {
        report
            .cases
            .iter()
            .map(|c| (c.name.clone(), c.outcome.is_ok()))
            .collect()
    }

    const HF_TOKEN: &str = "hf_conformance_token";

    /// A Hub mock with a public model (an LFS file of 300,000 bytes and one of 1 byte) and a
    /// gated dataset granted to [`HF_TOKEN`].
    fn hub() -> HfMock {
        let hf = HfMock::start();
        hf.add_token(HF_TOKEN);
        hf.create_repo("org/model", RepoAccess::Public);
        hf.insert(
            "org/model",
            "main",
            "weights/model.safetensors",
            noise(300_000, 1),
        );
        hf.insert("org/model", "main", "tiny.txt", noise(1, 2));
        hf.insert_git("org/model", "main", "config.json", noise(5_000, 7));
        hf.create_repo(
            "datasets/org/gated",
            RepoAccess::Gated(vec![HF_TOKEN.to_string()]),
        );
        hf.insert(
            "datasets/org/gated",
            "v1",
            "data/train.parquet",
            noise(70_000, 3),
        );
        hf
    }

    #[test]
    fn the_hf_endpoint_path_reads_named_objects_on_the_hub_mock_and_every_case_passes() {
        let hf = hub();
        let endpoint = hf.endpoint();
        let list = tempfile::NamedTempFile::new().unwrap();
        std::fs::write(
            list.path(),
            "# objects\nhf://datasets/org/gated@v1/data/train.parquet\n\nhf://org/model/tiny.txt\n",
        )
        .unwrap();
        let reports = conformance_reports(&[
            "--provider",
            "hf",
            "--endpoint",
            endpoint.as_str(),
            "--token",
            HF_TOKEN,
            "--object",
            "hf://org/model/weights/model.safetensors",
            "--objects",
            list.path().to_str().unwrap(),
            "--object",
            "hf://org/model/config.json",
            "--gated",
            "hf://datasets/org/gated@v1/data/train.parquet",
        ])
        .unwrap();
        assert_eq!(reports.len(), 1);
        let report = &reports[0];
        report.assert_passed();
        let cases = outcomes(report);
        assert_eq!(cases.len(), 4 * 7 + 1, "{cases:?}");
        for object in [
            "hf://org/model/weights/model.safetensors",
            "hf://datasets/org/gated@v1/data/train.parquet",
            "hf://org/model/tiny.txt",
            "hf://org/model/config.json",
        ] {
            for case in [
                "reference",
                "stat",
                "whole",
                "ranges",
                "read_ends",
                "past_end",
                "not_found",
            ] {
                let name = format!("{object}/{case}");
                assert!(cases.contains(&(name.clone(), true)), "{name}: {cases:?}");
            }
        }
        assert!(cases.contains(&(
            "hf://datasets/org/gated@v1/data/train.parquet/without_token".into(),
            true
        )));
        // The references are the Hub's stated SHA-256s: the whole reads were hashed.
        let whole = report
            .cases
            .iter()
            .find(|c| c.name == "hf://org/model/weights/model.safetensors/whole")
            .unwrap();
        assert_eq!(
            whole.outcome.as_deref(),
            Ok("300000 bytes whose SHA-256 is the stated one")
        );
        // A file stored in git states no SHA-256: its reference is a plain GET's bytes.
        let reference = report
            .cases
            .iter()
            .find(|c| c.name == "hf://org/model/config.json/reference")
            .unwrap();
        assert!(
            reference.outcome.as_ref().is_ok_and(
                |e| e.starts_with("5000 bytes from a plain GET") && e.contains("not a hash")
            ),
            "{:?}",
            reference.outcome
        );
        // The plain client asked each resolve URL once, without a range and without
        // following the redirect; only Karu's reads reached the CDN, never with the token.
        let references: Vec<String> = hf
            .hub()
            .requests()
            .into_iter()
            .filter(|r| r.range.is_none())
            .map(|r| r.path)
            .collect();
        for (repo, revision, file) in [
            ("org/model", "main", "weights/model.safetensors"),
            ("datasets/org/gated", "v1", "data/train.parquet"),
            ("org/model", "main", "tiny.txt"),
            ("org/model", "main", "config.json"),
        ] {
            let path = hf.resolve_path(repo, revision, file);
            assert_eq!(
                references.iter().filter(|p| **p == path).count(),
                1,
                "{path}: {references:?}"
            );
        }
        assert!(hf.cdn().requests().iter().all(|r| r.range.is_some()));
        assert_eq!(hf.authorization_leaks(), 0);

        assert!(
            conformance(&["--provider", "hf", "--endpoint", endpoint.as_str()])
                .unwrap_err()
                .contains("--object ADDRESS or --objects FILE")
        );
    }

    /// The suite can fail: a CDN serving other bytes than those whose SHA-256 the Hub states
    /// (same size, same ETag: Karu's reads all succeed and agree with each other) fails the
    /// whole read's hash check, and the cases that compare with verified bytes fail with it.
    #[test]
    fn the_hf_endpoint_suite_fails_when_the_bytes_do_not_hash_to_the_hubs_x_linked_etag() {
        let hf = hub();
        hf.corrupt(
            "org/model",
            "main",
            "weights/model.safetensors",
            noise(300_000, 99),
        );
        let endpoint = hf.endpoint();
        let args = [
            "--provider",
            "hf",
            "--endpoint",
            endpoint.as_str(),
            "--object",
            "hf://org/model/weights/model.safetensors",
            "--object",
            "hf://org/model/tiny.txt",
        ];
        let reports = conformance_reports(&args).unwrap();
        let report = &reports[0];
        let failed: Vec<&str> = report.failures().iter().map(|c| c.name.as_str()).collect();
        assert_eq!(
            failed,
            [
                "hf://org/model/weights/model.safetensors/whole",
                "hf://org/model/weights/model.safetensors/ranges",
                "hf://org/model/weights/model.safetensors/read_ends",
                "hf://org/model/weights/model.safetensors/past_end",
            ]
        );
        let whole = report.failures()[0].outcome.clone().unwrap_err();
        assert!(whole.contains("SHA-256"), "{whole}");
        // The stat, reference and not_found cases of that object, and the other object's, pass.
        assert_eq!(report.cases.len() - failed.len(), 10);
        let error = conformance(&args).unwrap_err();
        assert!(error.contains("4 of 14 cases failed"), "{error}");
    }

    /// Answers every `GET` without a `Range` (the plain client's reference) with other bytes of
    /// the same length: Karu's ranged reads get the stored ones.
    #[derive(Debug)]
    struct WrongReference(Vec<u8>);

    impl Route for WrongReference {
        fn respond(&self, request: &RequestHead) -> Option<GateResponse> {
            (request.method == "GET" && request.header("range").is_none())
                .then(|| GateResponse::new(200, self.0.clone()))
        }
    }

    #[test]
    fn the_source_endpoint_path_reads_named_objects_on_the_data_proxy_mock() {
        let source = SourceMock::start();
        // A private account (every request signed, the plain client's too) and a public one.
        source.set_public("karu", false);
        source.set_public("open", true);
        source.insert("karu", "private", "dir/a b.bin", noise(250_000, 4));
        source.insert("open", "public", "countries.parquet", noise(40_000, 5));
        let endpoint = source.endpoint();
        let creds = source.credentials();
        let keys = format!("{}:{}", creds.access_key_id, creds.secret_access_key);
        let reports = conformance_reports(&[
            "--provider",
            "source",
            "--endpoint",
            endpoint.as_str(),
            "--credentials",
            keys.as_str(),
            "--object",
            "source://karu/private/dir/a b.bin",
            "--object",
            "source://open/public/countries.parquet",
        ])
        .unwrap();
        let report = &reports[0];
        report.assert_passed();
        assert_eq!(report.cases.len(), 14);
        // One plain whole-object GET per object, signed.
        let plain: Vec<_> = source
            .server()
            .requests()
            .into_iter()
            .filter(|r| r.range.is_none())
            .collect();
        assert_eq!(plain.len(), 2, "{plain:?}");
        assert!(plain.iter().all(|r| r.status == 200));

        // Anonymous: the public object passes; the private one fails (its reference is refused).
        let anonymous = [
            "--provider",
            "source",
            "--endpoint",
            endpoint.as_str(),
            "--object",
            "source://open/public/countries.parquet",
        ];
        conformance(&anonymous).unwrap();
        let error = conformance(&[
            "--provider",
            "source",
            "--endpoint",
            endpoint.as_str(),
            "--object",
            "source://karu/private/dir/a b.bin",
        ])
        .unwrap_err();
        assert!(error.contains("failed"), "{error}");
        assert!(
            conformance(&[
                "--provider",
                "source",
                "--endpoint",
                endpoint.as_str(),
                "--gated",
                "source://open/public/countries.parquet",
            ])
            .unwrap_err()
            .contains("--gated is for the hf provider")
        );
    }

    /// The suite can fail: a data proxy whose whole-object answer (the reference) differs from
    /// the bytes its ranged answers serve fails the whole read and the cases after it.
    #[test]
    fn the_source_endpoint_suite_fails_when_the_reference_bytes_are_wrong() {
        let source = SourceMock::start();
        source.set_public("open", true);
        source.insert("open", "public", "countries.parquet", noise(40_000, 5));
        source
            .server()
            .set_route(Some(std::sync::Arc::new(WrongReference(noise(40_000, 6)))));
        let endpoint = source.endpoint();
        let reports = conformance_reports(&[
            "--provider",
            "source",
            "--endpoint",
            endpoint.as_str(),
            "--object",
            "source://open/public/countries.parquet",
        ])
        .unwrap();
        let report = &reports[0];
        let failed: Vec<&str> = report.failures().iter().map(|c| c.name.as_str()).collect();
        assert_eq!(
            failed,
            [
                "source://open/public/countries.parquet/whole",
                "source://open/public/countries.parquet/ranges",
                "source://open/public/countries.parquet/read_ends",
                "source://open/public/countries.parquet/past_end",
            ]
        );
        let whole = report.failures()[0].outcome.clone().unwrap_err();
        assert!(whole.contains("differs from the plain GET"), "{whole}");
    }

    #[test]
    fn the_azure_endpoint_path_passes_against_azurite_and_leaves_no_fixture_behind() {
        let azurite = Azurite::start().unwrap_or_else(|e| panic!("cannot start Azurite: {e}"));
        let endpoint = azurite.endpoint();
        let container = "endpoint-conformance";
        let common = [
            "--provider",
            "azure",
            "--endpoint",
            endpoint.as_str(),
            "--bucket",
            container,
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
