//! The command line: subcommands, options and their help texts.

use std::path::PathBuf;

use clap::{Args, CommandFactory, FromArgMatches, Parser, Subcommand};

use crate::numbers;

/// Exact byte-range reads from files, HTTP and cloud stores.
#[derive(Debug, Parser)]
#[command(
    name = "karu",
    version,
    about = "Exact byte-range reads from files, HTTP and cloud stores",
    long_about = "Exact byte-range reads from files, HTTP and cloud stores.\n\n\
                  Every read is checked: its bytes are exactly the requested range, or it \
                  fails with its own status and message, alone."
)]
pub(crate) struct Cli {
    #[command(flatten)]
    pub(crate) global: Global,
    #[command(subcommand)]
    pub(crate) command: Command,
}

/// Options every subcommand takes.
#[derive(Debug, Args)]
pub(crate) struct Global {
    /// Layer this config file above the user and project files (it must exist).
    #[arg(long, global = true, value_name = "FILE")]
    pub(crate) config: Option<PathBuf>,
    /// Set an option, above files and environment, e.g. `--set planner.max_gap=1MiB` or
    /// `--set s3.region=eu-west-1` (repeatable). The value is read as the key's type: a string
    /// key takes `123` as text.
    #[arg(long = "set", global = true, value_name = "KEY=VALUE")]
    pub(crate) options: Vec<String>,
    /// Expose only [START, START+LEN) of each object (LEN may be `end`); offsets are relative
    /// to it.
    #[arg(long, global = true, value_name = "START:LEN")]
    pub(crate) window: Option<String>,
    /// Print JSON lines instead of raw bytes or text.
    #[arg(long, global = true)]
    pub(crate) json: bool,
}

/// The subcommands.
#[derive(Debug, Subcommand)]
pub(crate) enum Command {
    /// Read ranges in one batch.
    #[command(
        long_about = "Read ranges in one batch: one checked completion per range.\n\n\
                      Ranges are OFFSET:LENGTH, each number decimal, 0x hex or with a unit \
                      (4KiB, 1MiB). One range without --json writes its raw bytes to stdout; \
                      several ranges need --concat (their bytes one after another, in the order \
                      given), --output DIR (one file each) or --json (one line per read, as \
                      each completes)."
    )]
    Read(ReadArgs),
    /// Print the size and ETag.
    Stat {
        /// A path, file:// URI or provider URL (see `karu --help`).
        address: String,
    },
    /// Read the first HEAD and last TAIL bytes in one round trip.
    Ends {
        /// A path, file:// URI or provider URL (see `karu --help`).
        address: String,
        /// Bytes from the start (decimal, 0x hex or with a unit).
        #[arg(value_parser = numbers::bytes)]
        head: u64,
        /// Bytes from the end (decimal, 0x hex or with a unit).
        #[arg(value_parser = numbers::bytes)]
        tail: u64,
    },
    /// Print the effective configuration for an address: each value with the layer and path
    /// rule that supplied it, secrets redacted.
    #[command(
        long_about = "Print the effective configuration for an address: every setting and \
                      every provider option in effect, each with the layer (file and line, \
                      environment variable, --set, built-in default) and the path rule that \
                      supplied it, secrets redacted. Without an address, the global values."
    )]
    Config {
        /// A path, file:// URI or provider URL; without one, the global configuration.
        address: Option<String>,
    },
}

/// `karu read`.
#[derive(Debug, Args)]
pub(crate) struct ReadArgs {
    /// A path, file:// URI or provider URL (see `karu --help`); optional with --ranges-from
    /// when every line names its address.
    pub(crate) address: Option<String>,
    /// Ranges as OFFSET:LENGTH (decimal, 0x hex or with a unit: 0x100:4KiB).
    #[arg(value_name = "OFFSET:LENGTH")]
    pub(crate) ranges: Vec<String>,
    /// Read ranges from FILE (`-` for stdin), one per line: `OFFSET:LENGTH`, or
    /// `ADDRESS OFFSET:LENGTH` to read many objects in one batch. Blank lines and lines
    /// starting with `#` are skipped.
    #[arg(long, value_name = "FILE|-")]
    pub(crate) ranges_from: Option<String>,
    /// Write the bytes of several ranges to stdout one after another, in the order given.
    #[arg(long, conflicts_with_all = ["json", "output", "out_template"])]
    pub(crate) concat: bool,
    /// Write each read's bytes to its own file in DIR (named by --out-template, default
    /// `{tag}.bin`).
    #[arg(long, value_name = "DIR")]
    pub(crate) output: Option<PathBuf>,
    /// The file of each read: {tag} (its place in the batch, from 0), {offset}, {length} and
    /// {name} (the last segment of its address); relative to --output DIR when given.
    #[arg(long, value_name = "TEMPLATE")]
    pub(crate) out_template: Option<String>,
    /// Require this ETag on every read (sent as If-Match, checked on the response).
    #[arg(long, value_name = "ETAG")]
    pub(crate) if_match: Option<String>,
    /// Largest gap between merged neighbours (0 disables merging), e.g. 1MiB.
    #[arg(long, value_name = "SIZE", value_parser = numbers::size)]
    pub(crate) max_gap: Option<u64>,
    /// Largest span of a merged transfer, e.g. 64MiB.
    #[arg(long, value_name = "SIZE", value_parser = numbers::size)]
    pub(crate) max_span: Option<u64>,
    /// Most reads in one transfer (at least 1).
    #[arg(long, value_name = "N", value_parser = numbers::positive)]
    pub(crate) max_parts: Option<u32>,
    /// Most fetched bytes per useful byte (at least 1).
    #[arg(long, value_name = "RATIO", value_parser = numbers::positive)]
    pub(crate) max_amplification: Option<u32>,
}

/// Every provider feature, and the store it reads.
const PROVIDER_NAMES: [(&str, &str); 7] = [
    ("local", "local files"),
    ("http", "plain HTTP"),
    ("s3", "Amazon S3"),
    ("gcs", "Google Cloud Storage"),
    ("azure", "Azure"),
    ("hf", "Hugging Face"),
    ("source", "Source Cooperative"),
];

/// The address forms of the providers built in, by provider name.
fn addresses(providers: &[&str]) -> String {
    let mut text = String::from("Addresses:\n");
    for provider in providers {
        let lines: &[&str] = match *provider {
            "local" => &["  /path/file, ./relative/file, file:///path/file   a local file"],
            "http" => &[
                "  http://host/path, https://host/path               any HTTP(S) server that honours Range",
            ],
            "s3" => &[
                "  s3://bucket/key                                   Amazon S3, or an S3-compatible store with s3.endpoint",
                "  https://bucket.s3.REGION.amazonaws.com/key        the same object by its AWS URL (also path style)",
            ],
            "azure" => &[
                "  az://container/path, azure://container/path       Azure Blob Storage, the account from azure.account",
                "  abfss://container@account.dfs.core.windows.net/path, https://account.blob.core.windows.net/container/path",
                "                                                    the same blob with its account (Data Lake or Blob URL)",
            ],
            "hf" => &[
                "  hf://[datasets/|spaces/]org/repo[@REV]/path       a file on the Hugging Face Hub (HF_TOKEN, hf.endpoint)",
                "  https://huggingface.co/org/repo/resolve/REV/path  the same file by its resolve URL",
            ],
            "source" => &[
                "  source://account/product/path                     Source Cooperative (anonymous, or source.profile)",
                "  https://data.source.coop/account/product/path     the same file by its data proxy URL",
            ],
            "gcs" => &[
                "  gs://bucket/key                                   Google Cloud Storage, or an emulator with gcs.endpoint",
                "  https://storage.googleapis.com/bucket/key         the same object by its URL (also bucket.storage.googleapis.com)",
            ],
            _ => &[],
        };
        for line in lines {
            text.push_str(line);
            text.push('\n');
        }
    }
    // Stores whose provider this build leaves out, so that a user of a slim build knows why.
    let missing: Vec<&str> = PROVIDER_NAMES
        .iter()
        .filter(|(provider, _)| !providers.contains(provider))
        .map(|(_, store)| *store)
        .collect();
    if !missing.is_empty() {
        text.push_str(&format!(
            "  Not built into this karu: {} (cargo features of the karu crate).\n",
            missing.join(", ")
        ));
    }
    text
}

/// Where configuration comes from.
const CONFIGURATION: &str = "\
Configuration, lowest first (each layer overrides the ones before it, key by key):
  1. built-in defaults
  2. the user file: config.toml in the platform config directory
     (~/.config/karu/config.toml on Linux), if present
  3. the project file: ./karu.toml, if present
  4. the file given with --config (it must exist)
  5. the file named by KARU_CONFIG (it must exist)
  6. KARU_* environment variables
  7. --set KEY=VALUE options
  Path rules ([paths.\"s3://bucket/prefix\"] in a file) override every layer for the
  objects under them. `karu config ADDRESS` shows which layer and rule supplied each value.
";

/// The main environment variables.
const ENVIRONMENT: &str = "\
Environment:
  KARU_CONFIG=FILE             one more config file
  KARU_IO_THREADS=N            HTTP event loops (default 4, at most 256)
  KARU_FILE_WORKERS=N          local file threads (default 4, at most 1024)
  KARU_CREDENTIAL_WORKERS=N    credential lookup threads (default 4, at most 256)
  KARU_CONCURRENCY=N           remote transfers at once (default 64, at most 65536)
  KARU_CA_FILE=FILE            extra trusted roots (PEM)
  KARU_<TABLE>__<KEY>=VALUE    any setting: KARU_PLANNER__MAX_GAP=1MiB, KARU_RETRY__DEADLINE=30s
  KARU_<SECTION>__<KEY>=VALUE  a provider option: KARU_S3__REGION=eu-west-1
  A KARU_* name that Karu does not read is an error, with a did-you-mean.
";

/// The exit statuses.
const EXIT_STATUS: &str = "\
Exit status:
  0  every read (or the operation) succeeded
  1  a read or the operation failed; each failure is reported on stderr
  2  usage or configuration error: nothing was read
  3  the output could not be written (a full disk, an unwritable --output file)
  A closed stdout (a broken pipe, as with `| head`) ends karu quietly, like cat; the status is
  then 0, or 1 if a read had already failed.
";

/// Parses the command line, with help texts that name the providers of this build. Exits on
/// `--help`, `--version` and usage errors (status 2), as clap does.
pub(crate) fn parse() -> Cli {
    let providers = karu::providers::enabled();
    let addresses = addresses(providers);
    let everything = format!("{addresses}\n{CONFIGURATION}\n{ENVIRONMENT}\n{EXIT_STATUS}");
    let command = Cli::command()
        .after_long_help(everything)
        .after_help(
            "Run `karu --help` for address forms, configuration, environment and exit status.",
        )
        .mut_subcommand("read", |read| {
            read.after_long_help(format!("{addresses}\n{EXIT_STATUS}"))
        })
        .mut_subcommand("stat", |stat| {
            stat.after_long_help(format!("{addresses}\n{EXIT_STATUS}"))
        })
        .mut_subcommand("ends", |ends| {
            ends.after_long_help(format!("{addresses}\n{EXIT_STATUS}"))
        })
        .mut_subcommand("config", |config| {
            config.after_long_help(format!("{CONFIGURATION}\n{ENVIRONMENT}\n{EXIT_STATUS}"))
        });
    let matches = command.get_matches();
    match Cli::from_arg_matches(&matches) {
        Ok(cli) => cli,
        Err(error) => error.exit(),
    }
}
