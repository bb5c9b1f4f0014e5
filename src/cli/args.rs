//! Command-line arguments (clap derive), mirroring kpt's flags for the
//! commands krender implements.

use std::ffi::OsString;
use std::path::PathBuf;

use clap::{ArgAction, Args, Parser, Subcommand};

/// krender: kpt-compatible rendering of configuration packages.
#[derive(Debug, Parser)]
#[command(
    name = "krender",
    version,
    about,
    long_about = None,
    disable_help_subcommand = true,
    after_help = "Any other command (pkg, live, alpha, fn doc, ...) is handed to kpt, with the same arguments and streams."
)]
pub struct Cli {
    /// The command to run.
    #[command(subcommand)]
    pub command: Command,
    /// Cut the output of failing functions to 4 lines. A flag of the whole
    /// command, as in kpt: before or after the subcommand.
    #[arg(long = "truncate-output", global = true, action = ArgAction::Set, num_args = 0..=1,
          default_value_t = true, default_missing_value = "true", require_equals = true)]
    pub truncate_output: bool,
    /// kpt's klog flags, accepted and ignored as kpt's `fn` commands
    /// ignore them.
    #[arg(long = "kubeconfig", global = true, hide = true)]
    pub kubeconfig: Option<String>,
    /// See `kubeconfig`.
    #[arg(long = "log-flush-frequency", global = true, hide = true)]
    pub log_flush_frequency: Option<String>,
    /// See `kubeconfig`.
    #[arg(short = 'v', long = "v", global = true, hide = true)]
    pub verbosity: Option<String>,
    /// Errors in YAML, Kptfiles and render.toml: after kpt's text, the
    /// file:line:column and a snippet of the source (`auto`: on a terminal).
    #[arg(
        long = "diagnostics",
        global = true,
        value_enum,
        default_value = "auto"
    )]
    pub diagnostics: super::diagnostics::Diagnostics,
}

/// Top-level commands.
// Parsed once per process: the variants' size difference costs nothing.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Functions: render, eval, source, sink.
    Fn {
        /// The function command.
        #[command(subcommand)]
        command: FnCommand,
    },
    /// Short for `fn render`.
    Render(FnRenderArgs),
    /// Deckhand-style document layering.
    Layer {
        /// The layering command.
        #[command(subcommand)]
        command: LayerCommand,
    },
    /// The function-result cache (krender-only).
    Cache {
        /// The cache command.
        #[command(subcommand)]
        command: CacheCommand,
    },
    /// Render, then re-render incrementally whenever files change
    /// (krender-only).
    Watch(WatchArgs),
    /// Package revisions in a git repository: Draft → Proposed → Published.
    Rpkg(RpkgArgs),
    /// Serve functions to Porch over its function-runner gRPC protocol
    /// (krender-only).
    Serve(ServeArgs),
    /// Print krender's version and which kpt's output and flags it follows.
    Version,
    /// Print a shell completion script (krender-only).
    Completions {
        /// The shell.
        #[arg(value_enum)]
        shell: clap_complete::Shell,
    },
    /// Print the man page, in roff (krender-only): `krender man >
    /// krender.1`; with DIR, write a page for every command into it
    /// (`krender.1`, `krender-fn-render.1`, ...).
    Man {
        /// Where to write every command's page.
        dir: Option<PathBuf>,
    },
    /// Any other command (`pkg`, `live`, `alpha`, ...): handed to kpt.
    #[command(external_subcommand)]
    Kpt(Vec<OsString>),
}

/// `krender watch`: the render flags plus the debounce.
#[derive(Debug, Args)]
pub struct WatchArgs {
    /// The render flags (`-o stdout|unwrap` re-prints on each rebuild).
    #[command(flatten)]
    pub render: RenderArgs,
    /// Quiet time after the last change before rebuilding, in milliseconds.
    #[arg(long = "debounce-ms", default_value_t = 200)]
    pub debounce_ms: u64,
    /// For a layered document set: Pegleg's settings.
    #[command(flatten)]
    pub layer: LayerOptions,
}

/// `krender fn ...`
#[derive(Debug, Subcommand)]
pub enum FnCommand {
    /// Render a package in place: run the pipelines of every Kptfile.
    Render(FnRenderArgs),
    /// Run one function on a package or on a ResourceList from stdin.
    Eval(EvalArgs),
    /// Print a package as a ResourceList.
    Source(SourceArgs),
    /// Write a ResourceList from stdin into a directory.
    Sink(SinkArgs),
    /// List how every function of every pipeline in the tree will run
    /// (krender-only).
    Ls(LsArgs),
    /// Any other function command (`doc`, ...): handed to kpt.
    #[command(external_subcommand)]
    Kpt(Vec<OsString>),
}

/// `krender fn ls`.
#[derive(Debug, Args)]
pub struct LsArgs {
    /// Package to list (default: the current directory).
    pub pkg_path: Option<PathBuf>,
    /// Prefix for short image names.
    #[arg(long = "image-prefix", env = "KPT_IMAGE_PREFIX")]
    pub image_prefix: Option<String>,
}

/// `krender layer ...`
#[derive(Debug, Subcommand)]
pub enum LayerCommand {
    /// Render layered documents and print the concrete documents.
    Render {
        /// Files or directories holding the layered documents.
        #[arg(required = true)]
        paths: Vec<PathBuf>,
        /// Pegleg's settings.
        #[command(flatten)]
        options: LayerOptions,
    },
}

/// How a layered document set is rendered: Deckhand's defaults, or
/// Pegleg's settings.
#[derive(Clone, Copy, Debug, Args)]
pub struct LayerOptions {
    /// Pegleg's rendering: a substitution whose source document is
    /// missing is skipped, and a missing source value is written as
    /// null, each with Deckhand's warning, instead of failing.
    #[arg(long = "allow-missing-substitution-sources")]
    pub allow_missing_substitution_sources: bool,
    /// Deckhand without cleartext secrets (Pegleg's default): a document
    /// taking a value from a `storagePolicy: encrypted` source is output
    /// as encrypted, with those substitutions' paths replaced by their
    /// SHA-256 digests. The rendered data is not changed.
    #[arg(long = "redact-encrypted")]
    pub redact_encrypted: bool,
    /// Both Pegleg settings: `--allow-missing-substitution-sources
    /// --redact-encrypted`.
    #[arg(long)]
    pub pegleg: bool,
}

impl LayerOptions {
    /// The layering library's options.
    pub fn substitution(self) -> crate::layering::SubstitutionOptions {
        crate::layering::SubstitutionOptions {
            allow_missing_sources: self.allow_missing_substitution_sources || self.pegleg,
            redact_encrypted: self.redact_encrypted || self.pegleg,
        }
    }
}

/// `fn render`: kpt's flags, and two CI verbs kpt does not have.
#[derive(Debug, Args)]
pub struct FnRenderArgs {
    /// kpt's flags.
    #[command(flatten)]
    pub render: RenderArgs,
    /// Render without writing anything; print a unified diff of every file
    /// an in-place render would change and exit 1, or exit 0 when the tree
    /// is already rendered (krender-only).
    #[arg(long = "check", conflicts_with = "output")]
    pub check: bool,
    /// Write each step's input and output ResourceList and its results
    /// into DIR, per package (krender-only).
    #[arg(long = "trace", value_name = "DIR")]
    pub trace: Option<PathBuf>,
    /// Render only part K of N of the package tree into the remote cache,
    /// writing nothing; a final render without it then runs only what is
    /// above the cut (krender-only, CI matrices).
    #[arg(long = "shard", value_name = "K/N", conflicts_with_all = ["output", "check", "trace"])]
    pub shard: Option<crate::engine::shard::ShardSpec>,
    /// Compute every package's cache key and look each up (local cache,
    /// then the remote), running and writing nothing; print which packages
    /// would run and why, and where the rest would come from. `json` gives
    /// the same for scripts (krender-only).
    #[arg(
        long = "dry-run",
        value_name = "FORMAT",
        num_args = 0..=1,
        default_missing_value = "text",
        require_equals = true,
        conflicts_with_all = ["output", "check", "trace", "shard"]
    )]
    pub dry_run: Option<DryRunFormat>,
    /// Write a Chrome trace-event JSON of the render to this file (opens
    /// in Perfetto and chrome://tracing): the render's phases, and each
    /// package's turn on the worker that ran or looked it up
    /// (krender-only).
    #[arg(long = "timings", value_name = "FILE")]
    pub timings: Option<PathBuf>,
}

/// How `fn render --dry-run` prints.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum DryRunFormat {
    /// A summary line and the packages that would run.
    Text,
    /// Every package, as JSON.
    Json,
}

/// Flags of `fn render` that `watch` shares.
#[derive(Debug, Args)]
pub struct RenderArgs {
    /// Package to render (default: the current directory).
    pub pkg_path: Option<PathBuf>,
    /// Directory to write the function results to.
    #[arg(long = "results-dir")]
    pub results_dir: Option<PathBuf>,
    /// Where to write the rendered resources: `stdout`, `unwrap` or a new directory.
    #[arg(short = 'o', long = "output")]
    pub output: Option<String>,
    /// Allow running local executables (`exec:` steps).
    #[arg(long = "allow-exec")]
    pub allow_exec: bool,
    /// Allow running wasm functions.
    #[arg(long = "allow-alpha-wasm")]
    pub allow_wasm: bool,
    /// Allow network access for container functions.
    #[arg(long = "allow-network")]
    pub allow_network: bool,
    /// Image pull policy for container functions: Always, IfNotPresent or Never.
    #[arg(long = "image-pull-policy")]
    pub image_pull_policy: Option<String>,
    /// `--truncate-output`, a flag of the whole command (see [`Cli`]).
    #[arg(skip = true)]
    pub truncate_output: bool,
    /// How errors are drawn (from `--diagnostics`, see [`Cli`]).
    #[arg(skip)]
    pub diagnostics: super::diagnostics::Style,
    /// Prefix for short image names.
    #[arg(long = "image-prefix", env = "KPT_IMAGE_PREFIX")]
    pub image_prefix: Option<String>,
    /// The persistent function-result cache.
    #[command(flatten)]
    pub cache: CacheArgs,
    /// No progress bar (krender-only; one is drawn only on a terminal).
    #[arg(long = "quiet", short = 'q')]
    pub quiet: bool,
    /// Pipelines run in parallel (krender-only; default: one per core).
    #[arg(long = "jobs", short = 'j')]
    pub jobs: Option<usize>,
    /// Write a JSON summary of the render (what ran, what was written,
    /// phase times) to this file (krender-only).
    #[arg(long = "stats", value_name = "FILE")]
    pub stats: Option<PathBuf>,
}

/// Flags of `fn eval`.
#[derive(Debug, Args)]
pub struct EvalArgs {
    /// Package directory (default: the current directory), or `-` to read
    /// a ResourceList from stdin.
    pub dir: Option<String>,
    /// The function image.
    #[arg(short = 'i', long = "image")]
    pub image: Option<String>,
    /// A local executable to run as the function.
    #[arg(long = "exec")]
    pub exec: Option<String>,
    /// Directory to write the function results to.
    #[arg(long = "results-dir")]
    pub results_dir: Option<PathBuf>,
    /// Where to write the resources: `stdout`, `unwrap` or a directory.
    #[arg(short = 'o', long = "output")]
    pub output: Option<String>,
    /// Accepted for symmetry with `fn render`: as in kpt, `--exec` runs
    /// without it.
    #[arg(long = "allow-exec")]
    pub allow_exec: bool,
    /// Image pull policy for container functions.
    #[arg(long = "image-pull-policy")]
    pub image_pull_policy: Option<String>,
    /// `--truncate-output`, a flag of the whole command (see [`Cli`]).
    #[arg(skip = true)]
    pub truncate_output: bool,
    /// Prefix for short image names.
    #[arg(long = "image-prefix", env = "KPT_IMAGE_PREFIX")]
    pub image_prefix: Option<String>,
    /// The persistent function-result cache.
    #[command(flatten)]
    pub cache: CacheArgs,
    /// File holding the function's `functionConfig` (instead of `KEY=VALUE`s).
    #[arg(long = "fn-config")]
    pub fn_config: Option<PathBuf>,
    /// Removed in kpt (meta resources such as the Kptfile are always read):
    /// an error, with kpt's text.
    #[arg(short = 'm', long = "include-meta-resources", hide = true)]
    pub include_meta_resources: bool,
    /// Save the function and its arguments to the package's Kptfile.
    #[arg(short = 's', long = "save")]
    pub save: bool,
    /// `mutator` or `validator`: where `--save` puts the function.
    #[arg(short = 't', long = "type")]
    pub fn_type: Option<String>,
    /// Which resources the function sees (kpt's `--match-*` flags).
    #[command(flatten)]
    pub select: SelectArgs,
    /// Which resources the function does not see (kpt's `--exclude-*` flags).
    #[command(flatten)]
    pub exclude: ExcludeArgs,
    /// Environment variables for a container function: `KEY=VALUE`, or
    /// `KEY` to pass this process's value.
    #[arg(short = 'e', long = "env")]
    pub env: Vec<String>,
    /// Storage to mount into a container function (the engine's `--mount`
    /// syntax).
    #[arg(long = "mount")]
    pub mount: Vec<String>,
    /// Give a container function the host network.
    #[arg(long = "network")]
    pub network: bool,
    /// Run a container function as this process's uid and gid instead of
    /// `nobody`.
    #[arg(long = "as-current-user")]
    pub as_current_user: bool,
    /// kpt's catalog search words; with `--image` or `--exec` kpt ignores
    /// them, and so does krender.
    #[arg(short = 'k', long = "keywords", hide = true)]
    pub keywords: Vec<String>,
    /// Accepted as kpt accepts it; catalog `wasm/` images run as builtins,
    /// other WASM modules are not supported.
    #[arg(long = "allow-alpha-wasm")]
    pub allow_alpha_wasm: bool,
    /// `KEY=VALUE` pairs for the function's ConfigMap (a leading bare word
    /// is its kind).
    #[arg(last = true)]
    pub config: Vec<String>,
}

/// `fn eval`'s `--match-*` flags: one selector, all fields must match.
#[derive(Debug, Args)]
pub struct SelectArgs {
    /// Select resources with this apiVersion.
    #[arg(long = "match-api-version", default_value = "")]
    pub match_api_version: String,
    /// Select resources of this kind.
    #[arg(long = "match-kind", default_value = "")]
    pub match_kind: String,
    /// Select resources with this name.
    #[arg(long = "match-name", default_value = "")]
    pub match_name: String,
    /// Select resources in this namespace.
    #[arg(long = "match-namespace", default_value = "")]
    pub match_namespace: String,
    /// Select resources with these labels (`KEY=VALUE`, repeatable).
    #[arg(long = "match-labels")]
    pub match_labels: Vec<String>,
    /// Select resources with these annotations (`KEY=VALUE`, repeatable).
    #[arg(long = "match-annotations")]
    pub match_annotations: Vec<String>,
}

/// `fn eval`'s `--exclude-*` flags: one selector, all fields must match.
#[derive(Debug, Args)]
pub struct ExcludeArgs {
    /// Exclude resources with this apiVersion.
    #[arg(long = "exclude-api-version", default_value = "")]
    pub exclude_api_version: String,
    /// Exclude resources of this kind.
    #[arg(long = "exclude-kind", default_value = "")]
    pub exclude_kind: String,
    /// Exclude resources with this name.
    #[arg(long = "exclude-name", default_value = "")]
    pub exclude_name: String,
    /// Exclude resources in this namespace.
    #[arg(long = "exclude-namespace", default_value = "")]
    pub exclude_namespace: String,
    /// Exclude resources with these labels (`KEY=VALUE`, repeatable).
    #[arg(long = "exclude-labels")]
    pub exclude_labels: Vec<String>,
    /// Exclude resources with these annotations (`KEY=VALUE`, repeatable).
    #[arg(long = "exclude-annotations")]
    pub exclude_annotations: Vec<String>,
}

/// Flags of `fn source`.
#[derive(Debug, Args)]
pub struct SourceArgs {
    /// Package directory (default: the current directory).
    pub dir: Option<PathBuf>,
    /// File holding the `functionConfig` of the list written.
    #[arg(long = "fn-config")]
    pub fn_config: Option<PathBuf>,
    /// `stdout` (a ResourceList, the default) or `unwrap` (the resources
    /// alone, as a multi-document stream).
    #[arg(short = 'o', long = "output")]
    pub output: Option<String>,
    /// Removed in kpt (meta resources are always read): kpt's error.
    #[arg(long = "include-meta-resources", hide = true)]
    pub include_meta_resources: bool,
}

/// Flags of `fn sink`.
#[derive(Debug, Args)]
pub struct SinkArgs {
    /// Directory to write to.
    pub dir: PathBuf,
}

/// Cache flags shared by `fn render` and `fn eval` (krender-only).
#[derive(Debug, Args)]
pub struct CacheArgs {
    /// Directory of the function-result cache (default: the user cache dir).
    #[arg(long = "cache-dir", env = "KRENDER_CACHE_DIR")]
    pub cache_dir: Option<PathBuf>,
    /// Run every function even when a cached result exists.
    #[arg(long = "no-cache")]
    pub no_cache: bool,
    /// A cache shared between machines, by URL: `redis://host:port[/db]`,
    /// `file:///shared/mount`, `http(s)://` (WebDAV, bazel-remote's
    /// layout), `s3://bucket/path`, `gs://`, `azblob://` (krender-only;
    /// also `[cache] remote` in render.toml).
    #[arg(
        long = "remote-cache",
        env = "KRENDER_REMOTE_CACHE",
        value_name = "URL"
    )]
    pub remote_cache: Option<String>,
    /// `read` (only fetch: pull requests) or `read-write` (also push).
    #[arg(
        long = "remote-cache-mode",
        env = "KRENDER_REMOTE_CACHE_MODE",
        value_enum
    )]
    pub remote_cache_mode: Option<RemoteCacheMode>,
}

/// `--remote-cache-mode`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum RemoteCacheMode {
    /// Only fetch.
    Read,
    /// Fetch, and push what ran here.
    ReadWrite,
}

impl CacheArgs {
    /// The engine's view of these flags.
    pub fn options(&self) -> crate::engine::cache::CacheOptions {
        crate::engine::cache::CacheOptions {
            dir: self.cache_dir.clone().or_else(default_cache_dir),
            disabled: self.no_cache,
        }
    }
}

/// `krender cache ...`
#[derive(Debug, Subcommand)]
pub enum CacheCommand {
    /// Print the number and size of the cached entries.
    Stats(CacheDirArgs),
    /// Remove every cached entry.
    Clear(CacheDirArgs),
    /// Remove the entries written more than `--max-age-days` ago.
    Prune(PruneArgs),
}

/// `krender cache prune`.
#[derive(Debug, Args)]
pub struct PruneArgs {
    /// The cache directory.
    #[command(flatten)]
    pub dir: CacheDirArgs,
    /// Entries older than this many days are removed.
    #[arg(long = "max-age-days", default_value_t = 30)]
    pub max_age_days: u64,
}

/// The cache directory flag of `krender cache`.
#[derive(Debug, Args)]
pub struct CacheDirArgs {
    /// Directory of the function-result cache (default: the user cache dir).
    #[arg(long = "cache-dir", env = "KRENDER_CACHE_DIR")]
    pub cache_dir: Option<PathBuf>,
}

/// `krender serve`: Porch's function runner.
#[derive(Debug, Args)]
pub struct ServeArgs {
    /// The TCP port (Porch's function runner listens on 9445).
    #[arg(long, default_value_t = 9445, env = "KRENDER_SERVE_PORT")]
    pub port: u16,
    /// The address to listen on (all interfaces, as Porch's runner).
    #[arg(long, default_value = "0.0.0.0", env = "KRENDER_SERVE_HOST")]
    pub host: String,
    /// A directory of Porch `FunctionConfig` files
    /// (config.porch.kpt.dev/v1alpha1), re-read when it changes.
    #[arg(long = "config", value_name = "DIR", env = "KRENDER_SERVE_CONFIG")]
    pub config: Option<PathBuf>,
    /// The longest a call may run, in seconds (a shorter gRPC deadline wins).
    #[arg(
        long = "timeout-seconds",
        default_value_t = 300,
        env = "KRENDER_SERVE_TIMEOUT_SECONDS"
    )]
    pub timeout_seconds: u64,
    /// Functions running at once (default: twice the cores); further calls
    /// wait for a slot.
    #[arg(long = "max-concurrent", env = "KRENDER_SERVE_MAX_CONCURRENT")]
    pub max_concurrent: Option<usize>,
    /// Calls waiting for a slot before new ones are refused with
    /// RESOURCE_EXHAUSTED.
    #[arg(
        long = "max-queued",
        default_value_t = 1024,
        env = "KRENDER_SERVE_MAX_QUEUED"
    )]
    pub max_queued: usize,
    /// The largest request or response message, in bytes (Porch's
    /// `--max-request-body-size`; default 6 MiB).
    #[arg(long = "max-request-body-size", default_value_t = crate::serve::DEFAULT_MAX_MESSAGE_BYTES, env = "KRENDER_SERVE_MAX_REQUEST_BYTES")]
    pub max_request_bytes: usize,
    /// The function-result cache flags.
    #[command(flatten)]
    pub cache: CacheArgs,
}

/// `krender rpkg ...`: package revisions with Porch's lifecycle in git.
#[derive(Debug, Args)]
pub struct RpkgArgs {
    /// The git repository holding the packages (default: the current directory).
    #[arg(long = "repo", global = true, default_value = ".")]
    pub repo: PathBuf,
    /// The rpkg command.
    #[command(subcommand)]
    pub command: RpkgCommand,
}

/// The lifecycle commands.
#[derive(Debug, Subcommand)]
pub enum RpkgCommand {
    /// Create a new package as a Draft (creating the repository if needed).
    Init {
        /// Package name.
        package: String,
        /// Workspace of the first draft.
        #[arg(long = "workspace")]
        workspace: String,
        /// Description written into the Kptfile.
        #[arg(long = "description", default_value = "sample description")]
        description: String,
    },
    /// Create a new package as a Draft holding the files of an existing revision.
    Clone {
        /// Source revision: `<package>/v<N>` or `<package>/<workspace>`.
        source: String,
        /// New package name.
        package: String,
        /// Workspace of the new draft.
        #[arg(long = "workspace")]
        workspace: String,
    },
    /// Start a new Draft of a package from its latest published revision.
    Draft {
        /// Package name.
        package: String,
        /// Workspace of the new draft.
        #[arg(long = "workspace")]
        workspace: String,
    },
    /// Render a Draft and propose it (Draft → Proposed).
    Propose(RevisionArgs),
    /// Publish a proposed revision as `<package>/v<N>` (Proposed → Published).
    Approve(RevisionArgs),
    /// Send a proposal back (Proposed → Draft, DeletionProposed → Published).
    Reject(RevisionArgs),
    /// Propose deleting a published revision (Published → DeletionProposed).
    ProposeDelete(RevisionArgs),
    /// Delete a Draft, a Proposed revision, or a DeletionProposed revision.
    Delete(RevisionArgs),
    /// List package revisions.
    List {
        /// Only this package.
        package: Option<String>,
    },
    /// Write a revision's files into a new directory, to edit a Draft.
    Pull {
        /// Revision: `<package>/v<N>` or `<package>/<workspace>`.
        revision: String,
        /// Directory to create.
        dir: PathBuf,
    },
    /// Commit a pulled directory back into its Draft.
    Push {
        /// Directory written by `rpkg pull`.
        dir: PathBuf,
        /// Commit the draft must still be at (default: the one pulled).
        #[arg(long = "commit")]
        commit: Option<String>,
        /// Commit message.
        #[arg(short = 'm', long = "message")]
        message: Option<String>,
    },
}

/// A revision and the commit it is expected to be at.
#[derive(Debug, Args)]
pub struct RevisionArgs {
    /// Revision: `<package>/v<N>` or `<package>/<workspace>`.
    pub revision: String,
    /// Commit id the revision must still be at (optimistic locking).
    #[arg(long = "commit")]
    pub commit: Option<String>,
}

/// The default cache directory: `$XDG_CACHE_HOME/krender`, else
/// `$HOME/.cache/krender`; `None` when neither variable is set.
pub(super) fn default_cache_dir() -> Option<PathBuf> {
    if let Some(xdg) = std::env::var_os("XDG_CACHE_HOME").filter(|dir| !dir.is_empty()) {
        return Some(PathBuf::from(xdg).join("krender"));
    }
    std::env::var_os("HOME")
        .filter(|home| !home.is_empty())
        .map(|home| PathBuf::from(home).join(".cache").join("krender"))
}
