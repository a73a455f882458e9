//! `Client` and `ClientBuilder`: the engine, the providers and one configuration snapshot.

use std::fmt;
use std::future::Future;
use std::path::PathBuf;
use std::pin::Pin;
use std::sync::Arc;

use futures_core::Stream;

use karu_config::{ConfigBuilder, Snapshot, Wording};
use karu_engine::sdk::RegistryBuilder;
use karu_engine::{
    Batch, BatchOptions, Clock, Completion, CredentialCallback, CredentialStats, Ends, Engine,
    EngineOptions, Error, Evidence, Locator, ObjectInfo, Read, Registry, Scope, ScopedBatch,
    Status,
};

/// A provider crate's `register` function, kept to be run for every client built.
type Register = dyn Fn(&mut RegistryBuilder) + Send + Sync;

/// Configures and builds a [`Client`]. Cheap to clone; [`ClientBuilder::build`] copies
/// everything, so changing a builder afterwards never changes a client.
///
/// ```
/// let client = karu::Client::builder()
///     .user_config_file(None)          // ignore ~/.config/karu/config.toml
///     .project_config_file(None)       // ignore ./karu.toml
///     .file_workers(2)
///     .set("planner.max_gap", "256KiB")
///     .path_set("/data/cold", "retry.deadline", "10s")
///     .build()?;
/// assert_eq!(client.snapshot().global().file_workers, 2);
/// assert_eq!(client.snapshot().global().planner.max_gap.0, 256 << 10);
/// # Ok::<(), karu::Error>(())
/// ```
#[derive(Clone, Default)]
pub struct ClientBuilder {
    config: ConfigBuilder,
    /// Third-party providers, registered after the enabled ones of `karu-providers`.
    providers: Vec<Arc<Register>>,
    options: EngineOptions,
}

impl ClientBuilder {
    /// A builder with Karu's defaults; config files and the environment are read at
    /// [`build`](ClientBuilder::build).
    pub fn new() -> Self {
        Self::default()
    }

    /// Set any option by dotted key (`"planner.max_gap"`, `"retry.deadline"`,
    /// `"s3.region"`), above files and the environment.
    pub fn set(mut self, key: &str, value: impl serde::Serialize) -> Self {
        self.config = self.config.set(key, value);
        self
    }

    /// Set an option for canonical paths under `prefix` (whole segments).
    pub fn path_set(mut self, prefix: &str, key: &str, value: impl serde::Serialize) -> Self {
        self.config = self.config.path_set(prefix, key, value);
        self
    }

    /// HTTP event loops (default 4), started with the first remote read.
    pub fn io_threads(self, n: usize) -> Self {
        self.set("io_threads", n)
    }

    /// File worker threads (default 4), started with the first local read.
    pub fn file_workers(self, n: usize) -> Self {
        self.set("file_workers", n)
    }

    /// Remote transfers active at once (default 64).
    pub fn concurrency(self, n: usize) -> Self {
        self.set("concurrency", n)
    }

    /// Use this user config file instead of the platform one; `None` for none.
    pub fn user_config_file(mut self, path: Option<PathBuf>) -> Self {
        self.config = self.config.user_file(path);
        self
    }

    /// Use this project config file instead of `./karu.toml`; `None` for none.
    pub fn project_config_file(mut self, path: Option<PathBuf>) -> Self {
        self.config = self.config.project_file(path);
        self
    }

    /// Layer another config file above the project file.
    pub fn config_file(mut self, path: impl Into<PathBuf>) -> Self {
        self.config = self.config.file(path);
        self
    }

    /// Layer a TOML document given as text, as a config file added with
    /// [`config_file`](Self::config_file) would be (in the order added among them). `name`
    /// is how configuration errors name it, with the line of the offending key.
    ///
    /// ```
    /// let client = karu::Client::builder()
    ///     .user_config_file(None)
    ///     .project_config_file(None)
    ///     .config_toml("the settings of this program", "file_workers = 2\n[planner]\nmax_gap = \"64KiB\"\n")
    ///     .build()?;
    /// assert_eq!(client.snapshot().global().file_workers, 2);
    /// # Ok::<(), karu::Error>(())
    /// ```
    pub fn config_toml(mut self, name: impl Into<String>, text: impl Into<String>) -> Self {
        self.config = self.config.toml(name, text);
        self
    }

    /// Use these environment variables instead of the process environment at build time.
    pub fn environment<I, K, V>(mut self, vars: I) -> Self
    where
        I: IntoIterator<Item = (K, V)>,
        K: Into<String>,
        V: Into<String>,
    {
        self.config = self.config.environment(vars);
        self
    }

    /// Add a provider (a third-party provider crate) by its `register` function, in addition
    /// to the providers enabled by `karu`'s cargo features: `.provider(my_provider::register)`.
    /// The function declares the provider's backend, the schemes and address prefixes it
    /// serves, its credential family and its configuration section (see
    /// [`sdk::RegistryBuilder`](crate::sdk::RegistryBuilder), the provider SDK);
    /// [`build`](Self::build) checks that section
    /// as it checks Karu's own. It runs for every client `build` makes, so each client has
    /// backends of its own; a pattern also registered by an earlier provider is served by this
    /// one.
    pub fn provider<F>(mut self, register: F) -> Self
    where
        F: Fn(&mut RegistryBuilder) + Send + Sync + 'static,
    {
        self.providers.push(Arc::new(register));
        self
    }

    /// Name configuration errors in the words of another interface: for faces of Karu that
    /// take options their own way (the `karu` command says `--config` and `--set`, Python's
    /// `karu.Client` its keywords). See [`config::Wording`](crate::config::Wording).
    pub fn wording(mut self, wording: Wording) -> Self {
        self.config = self.config.wording(wording);
        self
    }

    /// Provide credentials for a provider family (`"aws"`, `"gcp"`, `"azure"`, `"hf"`, ...: each
    /// provider's `FAMILY` in [`providers`](crate::providers)) from the application, e.g. a
    /// vendor SDK or a secret manager, instead of Karu's own discovery. Its value is a
    /// [`Credential`](crate::Credential) holding what the family's provider accepts: an S3 key
    /// pair ([`providers::s3::credential`](crate::providers::s3::credential)) for `"aws"`, a
    /// [`BearerToken`](crate::BearerToken) for `"gcp"`, `"azure"` and `"hf"`. The callback receives
    /// the canonical path; it may return an expiry and a canonical prefix where its value is
    /// valid (Karu caches it there, only if the path is inside it; without a prefix it is
    /// called for every request). Calls for different paths may run concurrently, but cold
    /// requests first wait for a call in flight whose prefix may cover them, so concurrent
    /// cold reads under one cacheable prefix call it once. A call that panics fails its
    /// reads with `Credentials`; one that hangs fails them with `TimedOut` at their deadline
    /// (the callback should bound its own input and output).
    ///
    /// [`build`](ClientBuilder::build) refuses a callback for a family that no provider of
    /// the client declares (a misspelt `"awz"` would otherwise leave Karu's own discovery in
    /// place without a word).
    pub fn credential_callback(
        mut self,
        family: &str,
        callback: impl CredentialCallback + 'static,
    ) -> Self {
        self.options.credential_callback(family, Arc::new(callback));
        self
    }

    /// Judge credential expiries (the refresh window, a callback value's lifetime) by `clock`
    /// instead of the system clock. For tests: a simulated clock moved into a credential's
    /// refresh window replaces a sleep until it comes.
    pub fn clock(mut self, clock: Arc<dyn Clock>) -> Self {
        self.options.clock(clock);
        self
    }

    /// Register the providers, capture the configuration and start the engine. A malformed
    /// file or value is an [`Status::InvalidArgument`] error naming the file (and line) or
    /// variable, the key and the expected type. The sections the providers declare (`[s3]`,
    /// `[http_provider]`, a third party's) are checked here, globally and under every path
    /// rule, and path rule prefixes are made canonical the way addresses are. An invalid
    /// provider registration, and a credential callback for a family no provider declares,
    /// are [`Status::InvalidArgument`] errors too.
    pub fn build(&self) -> Result<Client, Error> {
        let registry = Arc::new(registry(&self.providers)?);
        let families = registry.credential_families();
        if let Some(unknown) = self
            .options
            .callback_families()
            .into_iter()
            .find(|family| !families.contains(family))
        {
            return Err(Error::new(
                Status::InvalidArgument,
                format!(
                    "a credential callback is registered for the family \"{unknown}\", which no \
                     provider of this client uses (families: {})",
                    families.join(", ")
                ),
            ));
        }
        let resolver = Arc::clone(&registry);
        let snapshot = self
            .config
            .clone()
            .sections(registry.config_sections().iter().cloned())
            .canonical_prefixes(move |prefix| canonical_prefix(&resolver, prefix))
            .build()
            .map_err(|e| Error::new(Status::InvalidArgument, e.to_string()))?;
        Client::start(snapshot, registry, self.options.clone())
    }
}

/// The registry of a client: the providers enabled by cargo features, then `extra`.
fn registry(extra: &[Arc<Register>]) -> Result<Registry, Error> {
    let mut registry = RegistryBuilder::new();
    karu_providers::register_all(&mut registry);
    for register in extra {
        std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| register(&mut registry)))
            .map_err(|_| Error::new(Status::Internal, "a provider's register function panicked"))?;
    }
    registry.build()
}

/// The canonical form of a path rule prefix, found the way an address's is: the backend of the
/// prefix resolves it with a last segment added, which is then taken off again. So
/// `HTTP://Host:80/data` is `http://host/data` and `https://b.s3.amazonaws.com/logs/` is
/// `s3://b/logs/`; a scheme alone (`s3://`) covers every object of its backend.
fn canonical_prefix(registry: &Registry, prefix: &str) -> Result<String, String> {
    /// A last segment no real prefix ends with.
    const PROBE: &str = "karu~prefix~probe";
    let not_an_address = |why: String| format!("not a prefix of addresses Karu can read: {why}");
    if let Some(scheme) = prefix.strip_suffix("://") {
        registry
            .backend_for(prefix)
            .map_err(|e| not_an_address(e.message().to_owned()))?;
        return Ok(format!("{}://", scheme.to_ascii_lowercase()));
    }
    let separator = if prefix.ends_with('/') { "" } else { "/" };
    let probe = format!("{prefix}{separator}{PROBE}");
    let locator = registry
        .resolve(&probe)
        .map_err(|e| not_an_address(e.message().replace(PROBE, "…")))?;
    let canonical = locator.canonical().as_str();
    canonical
        .strip_suffix(PROBE)
        .map(|rest| match separator {
            "" => rest.to_owned(),
            _ => rest.strip_suffix('/').unwrap_or(rest).to_owned(),
        })
        .ok_or_else(|| not_an_address(format!("its canonical form {canonical:?} is not a prefix")))
}

impl fmt::Debug for ClientBuilder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ClientBuilder")
            .field("config", &self.config)
            .field("options", &self.options)
            .field("extra_providers", &self.providers.len())
            .finish()
    }
}

/// Owns the engine (workers, event loops, connection pools, credential cache), the providers
/// and an immutable configuration snapshot. Cheap to clone and shareable across threads: use
/// one client for related work.
///
/// # Fork safety
///
/// A client built in a parent process works in a forked child (the data-loader pattern: build
/// the client, then fork worker processes): on its first use in the child, the client starts
/// the child's own workers, event loops, connections, DNS and credential caches (and the
/// providers their own state) from the same configuration, and never touches the parent's
/// there — not its connections, not its threads (which the child does not have), not a lock
/// one of them may have held at the instant of the fork. The parent's engine is left
/// allocated in the child until it exits. A [`Batch`] belongs to the process that submitted
/// it: in a child, one submitted before the fork completes every read with
/// [`Status::InvalidArgument`] at once, and dropping it frees nothing (see [`Batch`]).
#[derive(Clone)]
pub struct Client {
    engine: Engine,
    /// Frozen when the client was built.
    registry: Arc<Registry>,
}

impl Client {
    /// A client with the default configuration layers (files, environment).
    pub fn new() -> Result<Client, Error> {
        ClientBuilder::new().build()
    }

    /// A builder.
    pub fn builder() -> ClientBuilder {
        ClientBuilder::new()
    }

    /// A client from an already-built snapshot, with the providers enabled by `karu`'s cargo
    /// features. The snapshot's builder checked only the sections declared to it
    /// ([`ConfigBuilder::section`]; a client's [`Registry::config_sections`] are the ones its
    /// providers declare).
    pub fn with_snapshot(snapshot: Snapshot) -> Result<Client, Error> {
        Client::start(snapshot, Arc::new(registry(&[])?), EngineOptions::default())
    }

    fn start(
        snapshot: Snapshot,
        registry: Arc<Registry>,
        options: EngineOptions,
    ) -> Result<Client, Error> {
        let engine = Engine::with_options(snapshot, options)?;
        Ok(Client { engine, registry })
    }

    /// The configuration captured when the client was built.
    pub fn snapshot(&self) -> &Snapshot {
        self.engine.snapshot()
    }

    /// The providers' registry, frozen when the client was built: which addresses it can
    /// read, the credential families and configuration sections of its providers.
    pub fn registry(&self) -> &Registry {
        &self.registry
    }

    /// Counters of the remote path since the client started: requests sent (every attempt),
    /// body bytes received, retries.
    pub fn transport_stats(&self) -> karu_engine::TransportStats {
        self.engine.transport_stats()
    }

    /// Counters of the credential cache: lookups made (one per scope, plus refreshes),
    /// callback calls, cache hits, failures.
    pub fn credential_stats(&self) -> CredentialStats {
        self.engine.credential_stats()
    }

    /// Resolve an address (a path, `file://`, or a provider URL) to a [`Locator`]. Never
    /// touches the network or credentials.
    pub fn locate(&self, address: &str) -> Result<Locator, Error> {
        self.registry.resolve(address)
    }

    /// Submit reads; returns at once with a [`Batch`] that yields one completion per read,
    /// blocking ([`Batch::next_timeout`], [`Batch::wait`]) or as a `Stream` on any executor.
    /// Dropping the batch cancels what has not completed, without waiting.
    ///
    /// ```
    /// use futures::StreamExt;
    /// # let dir = tempfile::tempdir()?;
    /// # let path = dir.path().join("a"); std::fs::write(&path, (0..=255u8).collect::<Vec<_>>())?;
    /// # let client = karu::Client::builder().user_config_file(None).project_config_file(None).build()?;
    /// let object = client.locate(path.to_str().unwrap())?;
    /// let mut batch = client.submit([karu::Read::new(&object, 0, 4), karu::Read::new(&object, 100, 2)]);
    /// futures::executor::block_on(async {
    ///     while let Some(done) = batch.next().await {
    ///         assert!(done.is_ok(), "{done:?}");
    ///     }
    /// });
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[must_use = "dropping the batch cancels its reads"]
    pub fn submit(&self, reads: impl IntoIterator<Item = Read<'static>>) -> Batch {
        self.engine.submit(reads, &BatchOptions::new())
    }

    /// Submit reads with per-batch planner overrides.
    ///
    /// ```
    /// # let dir = tempfile::tempdir()?;
    /// # let path = dir.path().join("a"); std::fs::write(&path, [1u8; 64])?;
    /// # let client = karu::Client::builder().user_config_file(None).project_config_file(None).build()?;
    /// let object = client.locate(path.to_str().unwrap())?;
    /// let batch = client.submit_with(
    ///     [karu::Read::new(&object, 0, 8), karu::Read::new(&object, 8, 8)],
    ///     &karu::BatchOptions::new().max_gap(0),
    /// );
    /// assert_eq!(batch.stats().transfers, 2);
    /// assert!(batch.wait().iter().all(|c| c.is_ok()));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[must_use = "dropping the batch cancels its reads"]
    pub fn submit_with(
        &self,
        reads: impl IntoIterator<Item = Read<'static>>,
        options: &BatchOptions,
    ) -> Batch {
        self.engine.submit(reads, options)
    }

    /// Submit reads that may borrow their destinations for `'d` without a [`Scope`]: dropping
    /// the returned batch cancels its pending reads and waits until no transfer references a
    /// borrowed destination, as a scope's end would. This is what a foreign-language binding
    /// needs when the destinations belong to a caller that frees the batch explicitly (the C
    /// ABI's `karu_client_submit` with caller buffers, `karu_batch_free`); Rust code should
    /// use [`Client::scope`], which is safe.
    ///
    /// # Safety
    ///
    /// The returned batch must be dropped before `'d` ends, never leaked (with
    /// [`std::mem::forget`] or a reference cycle): until it is dropped, Karu's threads may
    /// write to the borrowed destinations. For foreign destinations ([`Read::from_raw_parts`]),
    /// each must stay valid for writes and untouched by anyone else until its read's
    /// completion has been taken (then it may be read) and until the batch has been dropped
    /// (then it may be freed or reused).
    ///
    /// ```
    /// # let dir = tempfile::tempdir()?;
    /// # let path = dir.path().join("a"); std::fs::write(&path, (0..100u8).collect::<Vec<_>>())?;
    /// # let client = karu::Client::builder().user_config_file(None).project_config_file(None).build()?;
    /// let object = client.locate(path.to_str().unwrap())?;
    /// let mut buf = [0u8; 4];
    /// // SAFETY: the batch is dropped at the end of this block, before `buf` is used again.
    /// let status = unsafe {
    ///     let batch = client.submit_unchecked(
    ///         [karu::Read::borrowed(&object, 10, &mut buf)],
    ///         &karu::BatchOptions::new(),
    ///     );
    ///     batch.wait()[0].status()
    /// };
    /// assert_eq!((status, buf), (karu::Status::Ok, [10, 11, 12, 13]));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[must_use = "dropping the batch cancels its reads and waits for its transfers"]
    pub unsafe fn submit_unchecked<'d>(
        &self,
        reads: impl IntoIterator<Item = Read<'d>>,
        options: &BatchOptions,
    ) -> ScopedBatch<'d> {
        // SAFETY: the caller upholds `Engine::submit_unchecked`'s contract, which is this
        // function's.
        unsafe { self.engine.submit_unchecked(reads, options) }
    }

    /// Run `f` with a [`Scope`] whose reads may borrow their destinations. When `f` returns,
    /// pending reads of the scope's batches are cancelled and the scope waits until no
    /// transfer references a borrowed buffer.
    ///
    /// ```
    /// # let dir = tempfile::tempdir()?;
    /// # let path = dir.path().join("a"); std::fs::write(&path, (0..100u8).collect::<Vec<_>>())?;
    /// # let client = karu::Client::builder().user_config_file(None).project_config_file(None).build()?;
    /// let object = client.locate(path.to_str().unwrap())?;
    /// let (mut a, mut b) = ([0u8; 4], [0u8; 2]);
    /// client.scope(|scope| {
    ///     let batch = scope.submit(
    ///         [karu::Read::borrowed(&object, 10, &mut a), karu::Read::borrowed(&object, 50, &mut b)],
    ///         &karu::BatchOptions::new(),
    ///     );
    ///     assert!(batch.wait().iter().all(|c| c.is_ok()));
    /// });
    /// assert_eq!((a, b), ([10, 11, 12, 13], [50, 51]));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn scope<'env, F, T>(&self, f: F) -> T
    where
        F: for<'scope> FnOnce(&'scope Scope<'env>) -> T,
    {
        self.engine.scope(f)
    }

    /// Read `length` bytes at `offset` (a one-shot batch of one read).
    ///
    /// ```
    /// # let dir = tempfile::tempdir()?;
    /// # let path = dir.path().join("a"); std::fs::write(&path, b"hello, world")?;
    /// # let client = karu::Client::builder().user_config_file(None).project_config_file(None).build()?;
    /// let object = client.locate(path.to_str().unwrap())?;
    /// assert_eq!(client.read(&object, 7, 5)?, b"world");
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn read(&self, locator: &Locator, offset: u64, length: u64) -> Result<Vec<u8>, Error> {
        let batch = self.submit([Read::new(locator, offset, length)]);
        exact(batch.wait().pop(), locator, offset, length)
    }

    /// [`Client::read`] as a future: executor-neutral (woken by the Karu thread that completes
    /// the read, so tokio, smol or `futures::executor::block_on` can poll it, and no runtime
    /// of the caller's is needed), never blocking the thread that polls it. It is `'static`
    /// and `Send` (it owns what it needs), so it can be spawned. The read starts when the
    /// future is first polled; dropping the future cancels it without waiting.
    ///
    /// There is no async `read_into`: a future lending a borrowed slice to Karu's threads
    /// could be forgotten (`mem::forget`) while they write to it. Owned buffers are the safe
    /// shape: [`Read::with_buffer`] in a batch hands the buffer back in its completion, and
    /// [`ObjectReader::read_at_async`](crate::ObjectReader::read_at_async) copies into a
    /// slice only once the bytes are complete.
    ///
    /// ```
    /// # let dir = tempfile::tempdir()?;
    /// # let path = dir.path().join("a"); std::fs::write(&path, b"hello, world")?;
    /// # let client = karu::Client::builder().user_config_file(None).project_config_file(None).build()?;
    /// let object = client.locate(path.to_str().unwrap())?;
    /// let bytes = futures::executor::block_on(client.read_async(&object, 7, 5))?;
    /// assert_eq!(bytes, b"world");
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn read_async(
        &self,
        locator: &Locator,
        offset: u64,
        length: u64,
    ) -> impl Future<Output = Result<Vec<u8>, Error>> + Send + 'static + use<> {
        let client = self.clone();
        let locator = locator.clone();
        async move {
            let mut batch = client.submit([Read::new(&locator, offset, length)]);
            exact(next_completion(&mut batch).await, &locator, offset, length)
        }
    }

    /// Fill `destination` from `offset`: exact bytes or an error, like a positional
    /// `read_exact_at`. On [`Status::RangeNotSatisfiable`] the error's
    /// [`Evidence::EndOfObject`] says how many bytes at
    /// the start of `destination` exist and were delivered.
    ///
    /// ```
    /// # let dir = tempfile::tempdir()?;
    /// # let path = dir.path().join("a"); std::fs::write(&path, b"hello, world")?;
    /// # let client = karu::Client::builder().user_config_file(None).project_config_file(None).build()?;
    /// let object = client.locate(path.to_str().unwrap())?;
    /// let mut buf = [0u8; 5];
    /// client.read_into(&object, 0, &mut buf)?;
    /// assert_eq!(&buf, b"hello");
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn read_into(
        &self,
        locator: &Locator,
        offset: u64,
        destination: &mut [u8],
    ) -> Result<(), Error> {
        let destination_len = destination.len() as u64;
        self.scope(|scope| {
            let batch = scope.submit(
                [Read::borrowed(locator, offset, destination)],
                &BatchOptions::new(),
            );
            let length = destination_len;
            exact(batch.wait().pop(), locator, offset, length).map(drop)
        })
    }

    /// The object's visible size (`None` for a local device or FIFO, which states none) and
    /// strong ETag (when it has one). Sizes are never cached.
    ///
    /// ```
    /// # let dir = tempfile::tempdir()?;
    /// # let path = dir.path().join("a"); std::fs::write(&path, [0u8; 1000])?;
    /// # let client = karu::Client::builder().user_config_file(None).project_config_file(None).build()?;
    /// let object = client.locate(path.to_str().unwrap())?;
    /// assert_eq!(client.stat(&object)?.size, Some(1000));
    /// assert_eq!(client.stat(&object.with_window(100, None)?)?.size, Some(900));
    /// // A device states no size.
    /// assert_eq!(client.stat(&client.locate("/dev/zero")?)?.size, None);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn stat(&self, locator: &Locator) -> Result<ObjectInfo, Error> {
        self.engine.stat(locator)
    }

    /// [`Client::stat`] as an executor-neutral future: a file worker reads a local file's
    /// metadata, an event loop sends the remote probe, and the future only waits to be woken.
    /// It starts when first polled; dropping it cancels the probe.
    ///
    /// ```
    /// # let dir = tempfile::tempdir()?;
    /// # let path = dir.path().join("a"); std::fs::write(&path, [0u8; 1000])?;
    /// # let client = karu::Client::builder().user_config_file(None).project_config_file(None).build()?;
    /// let object = client.locate(path.to_str().unwrap())?;
    /// let info = futures::executor::block_on(client.stat_async(&object))?;
    /// assert_eq!(info.size, Some(1000));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn stat_async(
        &self,
        locator: &Locator,
    ) -> impl Future<Output = Result<ObjectInfo, Error>> + Send + 'static + use<> {
        self.engine.stat_async(locator)
    }

    /// The first `head_len` and last `tail_len` bytes (each clamped to the size), the size
    /// and the ETag, for formats with a header and a footer.
    ///
    /// Remote objects: the head and a suffix range for the tail are requested together, one
    /// round trip; a tail alone (`head_len` 0) is one request, whose answer states the size.
    /// Where the service ignores suffix ranges (Azure), the tail follows the head, pinned to
    /// its ETag.
    ///
    /// ```
    /// # let dir = tempfile::tempdir()?;
    /// # let path = dir.path().join("a"); std::fs::write(&path, b"HEADER....body....FOOTER")?;
    /// # let client = karu::Client::builder().user_config_file(None).project_config_file(None).build()?;
    /// let object = client.locate(path.to_str().unwrap())?;
    /// let ends = client.read_ends(&object, 6, 6)?;
    /// assert_eq!((ends.head.as_slice(), ends.tail.as_slice(), ends.size), (&b"HEADER"[..], &b"FOOTER"[..], 24));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn read_ends(
        &self,
        locator: &Locator,
        head_len: u64,
        tail_len: u64,
    ) -> Result<Ends, Error> {
        self.engine.read_ends(locator, head_len, tail_len)
    }

    /// [`Client::read_ends`] as an executor-neutral future, completed from Karu's threads. It
    /// starts when first polled; dropping it cancels its requests.
    pub fn read_ends_async(
        &self,
        locator: &Locator,
        head_len: u64,
        tail_len: u64,
    ) -> impl Future<Output = Result<Ends, Error>> + Send + 'static + use<> {
        self.engine.read_ends_async(locator, head_len, tail_len)
    }

    /// [`Client::read_ends_async`] under an `If-Match` condition (a strong ETag, a list of
    /// them, or `*`, as [`Read::if_match`] takes): every request carries it and every answer
    /// is checked against it, so an object that does not match fails with
    /// [`Status::PreconditionFailed`] on its first answer, before any body is read. Remote
    /// objects only ([`Status::InvalidArgument`] for a local file, which has no versions).
    pub fn read_ends_if_match_async(
        &self,
        locator: &Locator,
        head_len: u64,
        tail_len: u64,
        if_match: Option<&str>,
    ) -> impl Future<Output = Result<Ends, Error>> + Send + 'static + use<> {
        self.engine
            .read_ends_if_match_async(locator, head_len, tail_len, if_match)
    }
}

/// The bytes of the completion of a read of `length` bytes at `offset` of `locator`, or its
/// error; a range error always says how many bytes exist ([`Evidence::EndOfObject`]), also
/// where the path that failed it did not.
pub(crate) fn exact(
    completion: Option<Completion>,
    locator: &Locator,
    offset: u64,
    length: u64,
) -> Result<Vec<u8>, Error> {
    let Some(completion) = completion else {
        return Err(Error::new(
            Status::Internal,
            "a read produced no completion",
        ));
    };
    let received = completion.bytes_received();
    match completion.into_result() {
        Err(error)
            if error.status() == Status::RangeNotSatisfiable
                && !matches!(error.evidence(), Some(Evidence::EndOfObject { .. })) =>
        {
            let start = locator.window().map_or(0, |w| w.start);
            Err(error.with_evidence(Evidence::EndOfObject {
                offset: start.saturating_add(offset),
                requested: length,
                received,
                size: None,
            }))
        }
        result => result,
    }
}

/// The next completion of `batch`, woken by the Karu thread that completes it.
pub(crate) async fn next_completion(batch: &mut Batch) -> Option<Completion> {
    std::future::poll_fn(|cx| Pin::new(&mut *batch).poll_next(cx)).await
}

impl fmt::Debug for Client {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Client")
            .field("engine", &self.engine)
            .field("registry", &self.registry)
            .finish()
    }
}
