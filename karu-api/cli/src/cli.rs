//! The command line: subcommands, options and their help texts.

use std::path::PathBuf;

use clap::{ArgAction, Args, CommandFactory, FromArgMatches, Parser, Subcommand, ValueEnum};

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
    /// Show each request on stderr: method, URL (query redacted), range, status, attempt and
    /// time (-v); -vv adds everything Karu logs. KARU_LOG (or RUST_LOG) takes a tracing filter
    /// instead, e.g. KARU_LOG=karu::http=debug.
    #[arg(short, long, global = true, action = ArgAction::Count)]
    pub(crate) verbose: u8,
}

/// The subcommands.
#[derive(Debug, Subcommand)]
pub(crate) enum Command {
    /// Read ranges in one batch.
    #[command(
        long_about = "Read ranges in one batch: one checked completion per range.\n\n\
                      A range is OFFSET:LENGTH, OFFSET:end (or OFFSET:) to the end of the \
                      object, or -LENGTH for its last LENGTH bytes (all of them when it is \
                      shorter, as `curl -r -500`). Numbers are decimal, 0x hex, or with a \
                      binary unit: 4K, 4k and 4KiB are all 4096 bytes, 1M and 1MiB 1048576 \
                      (decimal units such as 1KB are refused here, so that 1kb and 1K never \
                      mean different things). A suffix with a unit goes after `--`: \
                      `karu read URL -- -4K`.\n\n\
                      One range without --json writes its raw bytes to stdout; several ranges \
                      need --concat (their bytes one after another, in the order given), \
                      --output DIR (one file each) or --json (one line per read, as each \
                      completes). Bytes are written as they arrive: a read longer than \
                      http.part_size (8 MiB) goes in pieces of that size, in order, with at \
                      most planner.max_span (64 MiB) of them in memory; the pieces of a remote \
                      read are pinned to one version of the object by the ETag of a stat made \
                      first (an object without a strong ETag is read in one piece), and those \
                      of a local file are checked against the file, its size and its \
                      modification time (a file replaced or rewritten meanwhile fails the \
                      read). A read \
                      that fails after some of its pieces were written to stdout has written \
                      them: the exit status says it failed.\n\n\
                      With --output, a file under its name is always a whole read: bytes go to \
                      a hidden temporary file beside it (created new, never through a link), \
                      renamed over the name when the read is OK. A read that fails or is \
                      interrupted (Ctrl-C, SIGTERM, SIGHUP) removes its temporary file and \
                      leaves what was under the name before as it was, and says so; one that \
                      reached the end of the object keeps the bytes that exist as NAME.partial \
                      if no file has that name. An output that is an input of the command (the \
                      same file by any name or link, standard output too) is refused."
    )]
    Read(ReadArgs),
    /// Print the size and ETag.
    Stat {
        /// A path, file:// URI or provider URL (see `karu --help`).
        address: String,
    },
    /// Read the first HEAD and last TAIL bytes in one round trip.
    #[command(
        long_about = "Read the first HEAD and last TAIL bytes in one round trip (each clamped \
                      to the size), with the size and ETag: the header and footer of a format. \
                      Prints the size, the ETag and each end's length and SHA-256; \
                      --head-only or --tail-only writes that end's raw bytes to stdout \
                      instead; --output DIR writes head.bin and tail.bin; --json puts the \
                      bytes in the line (base64, or hex with --encoding hex)."
    )]
    Ends(EndsArgs),
    /// Print the effective configuration for an address: each value with the layer and path
    /// rule that supplied it, secrets redacted.
    #[command(
        long_about = "Print the effective configuration for an address: every setting and \
                      every provider option in effect, each with where it came from (file and \
                      line, a KARU_* variable, a provider's own variable such as AWS_REGION, \
                      --set, a built-in default) and the path rule that supplied it, secrets \
                      redacted. Without an address, the global values. With --keys, every key \
                      Karu and the providers of this build read, with its aliases, its \
                      environment variables and what it means."
    )]
    Config {
        /// A path, file:// URI or provider URL; without one, the global configuration.
        address: Option<String>,
        /// List every key (settings and provider options) with aliases, environment variables
        /// and meaning, instead of the values in effect.
        #[arg(long, conflicts_with = "address")]
        keys: bool,
    },
    /// Print shell completions (bash, zsh, fish, elvish, powershell).
    #[command(
        long_about = "Print the completions of karu for a shell, to install where the shell \
                      looks for them:\n  \
                      karu completions bash > ~/.local/share/bash-completion/completions/karu\n  \
                      karu completions zsh > ~/.zfunc/_karu   (with fpath+=~/.zfunc before \
                      compinit)\n  \
                      karu completions fish > ~/.config/fish/completions/karu.fish"
    )]
    Completions {
        /// The shell.
        #[arg(value_enum)]
        shell: clap_complete::Shell,
    },
}

/// How `karu ends --json` writes bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(crate) enum Encoding {
    /// Standard base64, with padding.
    Base64,
    /// Lower-case hexadecimal.
    Hex,
}

/// `karu ends`.
#[derive(Debug, Args)]
pub(crate) struct EndsArgs {
    /// A path, file:// URI or provider URL (see `karu --help`).
    pub(crate) address: String,
    /// Bytes from the start (decimal, 0x hex or with a binary unit: 64K).
    #[arg(value_parser = numbers::bytes)]
    pub(crate) head: u64,
    /// Bytes from the end (decimal, 0x hex or with a binary unit).
    #[arg(value_parser = numbers::bytes)]
    pub(crate) tail: u64,
    /// Write the head's raw bytes to stdout, and nothing else.
    #[arg(long, conflicts_with_all = ["tail_only", "json"])]
    pub(crate) head_only: bool,
    /// Write the tail's raw bytes to stdout, and nothing else.
    #[arg(long, conflicts_with_all = ["head_only", "json"])]
    pub(crate) tail_only: bool,
    /// Write the bytes to DIR/head.bin and DIR/tail.bin (only the one of --head-only or
    /// --tail-only) instead of stdout.
    #[arg(long, value_name = "DIR")]
    pub(crate) output: Option<PathBuf>,
    /// How --json writes the bytes.
    #[arg(long, value_enum, default_value_t = Encoding::Base64)]
    pub(crate) encoding: Encoding,
}

/// `karu read`.
#[derive(Debug, Args)]
pub(crate) struct ReadArgs {
    /// A path, file:// URI or provider URL (see `karu --help`); optional with --ranges-from
    /// when every line names its address.
    pub(crate) address: Option<String>,
    /// Ranges: OFFSET:LENGTH, OFFSET:end (or OFFSET:) to the end, or -LENGTH for the last
    /// bytes; numbers decimal, 0x hex or with a binary unit (0x100:4K, 1M:end, -500).
    #[arg(value_name = "RANGE", allow_negative_numbers = true)]
    pub(crate) ranges: Vec<String>,
    /// Read ranges from FILE (`-` for stdin), one per line: `RANGE`, or `ADDRESS RANGE` to
    /// read many objects in one batch. Blank lines and lines starting with `#` are skipped.
    #[arg(long, value_name = "FILE|-")]
    pub(crate) ranges_from: Option<String>,
    /// Write the bytes of several ranges to stdout one after another, in the order given.
    #[arg(long, conflicts_with_all = ["json", "output", "out_template"])]
    pub(crate) concat: bool,
    /// Write each read's bytes to its own file in DIR (named by --out-template, default
    /// `{tag}.bin`); a file takes its name only when its read is OK (see above).
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
fn configuration() -> String {
    let global_only: Vec<String> = karu::config::Settings::GLOBAL_ONLY
        .iter()
        .map(|key| match *key {
            "planner" => "planner.*".to_owned(),
            key => key.to_owned(),
        })
        .collect();
    format!(
        "\
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
  objects under them, for every key but those that configure the whole client, which a
  rule may not set (it is an error):
{}
  `karu config ADDRESS` shows which layer and rule supplied each value; `karu config --keys`
  lists every key.
",
        wrap(&global_only.join(", "), 4, 92)
    )
}

/// `text` wrapped at `width` columns, every line indented by `indent`.
fn wrap(text: &str, indent: usize, width: usize) -> String {
    let mut out = " ".repeat(indent);
    let mut column = indent;
    for word in text.split(' ') {
        if column > indent && column + 1 + word.len() > width {
            out.push('\n');
            out.push_str(&" ".repeat(indent));
            column = indent;
        } else if column > indent {
            out.push(' ');
            column += 1;
        }
        out.push_str(word);
        column += word.len();
    }
    out
}

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
  KARU_LOG=FILTER              what -v shows, as a tracing filter (RUST_LOG too)
  A KARU_* name that Karu does not read is an error, with a did-you-mean. Providers also
  read their own variables (AWS_REGION, AWS_ENDPOINT_URL, HF_TOKEN, …): `karu config --keys`.
";

/// The exit statuses.
const EXIT_STATUS: &str = "\
Exit status:
  0  every read (or the operation) succeeded
  1  a read or the operation failed; each failure is reported on stderr
  2  usage or configuration error: nothing was read
  3  the output could not be written (a full disk, an unwritable --output file)
  A closed stdout (a broken pipe, as with `| head`) ends karu quietly, like cat; the status is
  then 0, or 1 if a read had already failed. A stdout that is not open at all (`>&-`) is an
  output error (3), as cat fails on it.
";

/// Where the subcommands' help sends a reader for what `karu --help` says once.
const SEE_MAIN_HELP: &str =
    "Addresses, configuration, environment and exit status: see `karu --help`.";

/// The command, with help texts that name the providers of this build.
pub(crate) fn command() -> clap::Command {
    let providers = karu::providers::enabled();
    let addresses = addresses(providers);
    let everything = format!(
        "{addresses}\n{}\n{ENVIRONMENT}\n{EXIT_STATUS}",
        configuration()
    );
    Cli::command()
        .after_long_help(everything)
        .after_help(
            "Run `karu --help` for address forms, configuration, environment and exit status.",
        )
        .mut_subcommands(|sub| sub.after_long_help(SEE_MAIN_HELP))
}

/// Parses the command line. Exits on `--help`, `--version` and usage errors (status 2), as
/// clap does.
pub(crate) fn parse() -> Cli {
    let matches = command().get_matches();
    match Cli::from_arg_matches(&matches) {
        Ok(cli) => cli,
        Err(error) => error.exit(),
    }
}
