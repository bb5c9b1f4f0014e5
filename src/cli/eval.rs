//! `krender fn eval` (on a ResourceList from stdin, `-`, or on a package
//! directory written back in place), `fn source` and `fn sink`: the
//! imperative commands the conformance chains pipe `fn render -o stdout` into.

use std::collections::{BTreeMap, BTreeSet};
use std::io::{Read, Write};
use std::path::Path;
use std::time::Instant;

use super::args::{EvalArgs, SinkArgs, SourceArgs};
use super::render::{absolute, output_mode, print_report};
use super::signals::Interrupts;
use crate::hydrate::printer::Printer;
use crate::hydrate::results::{FnResult, ResultItems, result_list_node};
use crate::hydrate::{Output, Report, bridge, select};
use crate::krm::resource;
use crate::pkg::kptfile::{self, DEFAULT_IMAGE_PREFIX, Selector};
use crate::pkg::reader::ReadError;
use crate::runtime::chain::{ChainOptions, exec_evaluator, image_evaluator};
use crate::runtime::config::{FunctionTable, Route};
use crate::runtime::container::ContainerAccess;
use crate::runtime::{Evaluator, FunctionTarget};
use crate::yaml::node::{Node, Style, tag};

/// The function `fn eval` runs: its display name, what to run, and which
/// resources it sees.
struct Function {
    name: String,
    image: String,
    exec: String,
    /// `--match-*` (at most one selector).
    selectors: Vec<Selector>,
    /// `--exclude-*` (at most one selector).
    exclude: Vec<Selector>,
}

/// kpt's `parseSelectors`: a selector when any of its flags is set.
fn selector(
    fields: [&str; 4],
    labels: &[String],
    annotations: &[String],
) -> Result<Vec<Selector>, String> {
    let pairs = |items: &[String]| -> Result<BTreeMap<String, String>, String> {
        items
            .iter()
            .map(|item| {
                item.split_once('=')
                    .map(|(key, value)| (key.to_owned(), value.to_owned()))
                    // kpt beta.56 panics here; krender says why instead.
                    .ok_or_else(|| format!("selector {item:?} must be KEY=VALUE"))
            })
            .collect()
    };
    let [api_version, kind, name, namespace] = fields;
    let selector = Selector {
        api_version: api_version.to_owned(),
        kind: kind.to_owned(),
        name: name.to_owned(),
        namespace: namespace.to_owned(),
        labels: pairs(labels)?,
        annotations: pairs(annotations)?,
    };
    Ok(if selector == Selector::default() {
        Vec::new()
    } else {
        vec![selector]
    })
}

/// The function table for the package `fn eval` runs on (the working
/// directory's for stdin).
fn config_path(args: &EvalArgs) -> std::path::PathBuf {
    super::config_path(args.dir.as_deref().filter(|dir| *dir != "-").map(Path::new))
}

/// kpt's refusal of the container-only flags for `--exec` functions.
const CONTAINER_ONLY: &str =
    "--mount, --as-current-user, --network and --env can only be used with container functions";

/// kpt's `--network`, `--as-current-user`, `--mount` and `-e` flags.
fn container_access(args: &EvalArgs) -> ContainerAccess {
    ContainerAccess {
        network: args.network,
        // SAFETY: getuid and getgid cannot fail and touch no memory.
        user: args.as_current_user.then(|| {
            format!("{}:{}", unsafe { libc::getuid() }, unsafe {
                libc::getgid()
            })
        }),
        mounts: args.mount.clone(),
        env: args.env.clone(),
    }
}

/// Where `image` runs when it is not a container, for the container-only
/// flags: in process (a builtin) or as a local executable (a render.toml
/// route). `None` for a container image.
enum NotAContainer {
    /// A builtin: kpt accepts the flags for every image, and so do we; none
    /// of them changes what a builtin does (it reads no host files, no
    /// environment, no network).
    Builtin(&'static str),
    /// A local executable: kpt's refusal for `--exec`, with how to run it
    /// in a container instead.
    Executable(String),
}

fn not_a_container(image: &str, config: &Path) -> Option<NotAContainer> {
    let table = FunctionTable::load(config).ok()?;
    match table.route(image) {
        Route::Container { .. } => None,
        Route::Builtin(builtin) => Some(NotAContainer::Builtin(builtin.name())),
        Route::Executable(path) => {
            let (name, _) = crate::runtime::builtin::split_image(image);
            Some(NotAContainer::Executable(format!(
                "{image}: render.toml runs it as {}; to run it in a container, add to render.toml:\n  [[function]]\n  image = \"{name}\"\n  container = [\"*\"]",
                path.display()
            )))
        }
    }
}

/// The container-only flags given, by kpt's names.
fn container_flags(access: &ContainerAccess) -> Vec<&'static str> {
    [
        ("--network", access.network),
        ("--as-current-user", access.user.is_some()),
        ("--mount", !access.mounts.is_empty()),
        ("--env", !access.env.is_empty()),
    ]
    .into_iter()
    .filter_map(|(flag, given)| given.then_some(flag))
    .collect()
}

/// Runs `fn eval` and returns the exit code: on a ResourceList from stdin
/// (`-`) or on the package tree at DIR, written back in place (or to `-o`).
pub(super) fn run(
    args: &EvalArgs,
    interrupts: &Interrupts,
    out: &mut dyn Write,
    err: &mut dyn Write,
) -> i32 {
    if let Some(report) = super::image_pull_policy_error(args.image_pull_policy.as_deref()) {
        super::render::print_report(&report, err);
        return 1;
    }
    // kpt's validateOptionalFlags, first of all.
    let flag_error = if args.include_meta_resources {
        Some(
            "--include-meta-resources is no longer necessary because meta resources are now included by default",
        )
    } else if args.save {
        match args.fn_type.as_deref().unwrap_or_default() {
            "" => Some("--type must be specified if saving functions to Kptfile (--save=true)"),
            "mutator" | "validator" => None,
            _ => Some("--type must be either `mutator` or `validator`"),
        }
    } else {
        None
    };
    if let Some(message) = flag_error {
        print_report(&Report::Command(message.to_owned()), err);
        return 1;
    }
    let prefix = args
        .image_prefix
        .clone()
        .unwrap_or_else(|| DEFAULT_IMAGE_PREFIX.to_owned());
    // As in kpt, an empty flag counts as unset and `--image` wins when both
    // are given.
    let image = args.image.as_ref().filter(|image| !image.is_empty());
    let exec = args.exec.as_ref().filter(|exec| !exec.is_empty());
    let access = container_access(args);
    if image.is_none() && exec.is_some() && access != ContainerAccess::default() {
        print_report(&Report::Command(CONTAINER_ONLY.to_owned()), err);
        return 1;
    }
    let function = match (image, exec) {
        (Some(image), _) => {
            let image = kptfile::with_default_tag(&kptfile::resolve_image(image, &prefix));
            Function {
                name: image.clone(),
                image,
                exec: String::new(),
                selectors: Vec::new(),
                exclude: Vec::new(),
            }
        }
        // As in kpt, `fn eval --exec` needs no `--allow-exec`: the command
        // line names the executable itself (render asks, because a
        // package's Kptfile does); the flag is accepted all the same.
        (None, Some(exec)) if let Err(message) = crate::runtime::exec::split_exec(exec) => {
            // kpt checks the command before it runs anything.
            print_report(&Report::Command(message), err);
            return 1;
        }
        (None, Some(exec)) => Function {
            name: exec.clone(),
            image: String::new(),
            exec: exec.clone(),
            selectors: Vec::new(),
            exclude: Vec::new(),
        },
        _ => {
            print_report(
                &Report::Command("must specify --image or --exec".to_owned()),
                err,
            );
            return 1;
        }
    };
    if let Some(report) = super::config_error(&config_path(args)) {
        print_report(&report, err);
        return 1;
    }
    if access != ContainerAccess::default() {
        match not_a_container(&function.image, &config_path(args)) {
            Some(NotAContainer::Executable(hint)) => {
                print_report(&Report::Command(format!("{CONTAINER_ONLY}\n{hint}")), err);
                return 1;
            }
            Some(NotAContainer::Builtin(name)) => tracing::info!(
                flags = %container_flags(&access).join(", "),
                "{name} runs in process: the container flags have no effect on it"
            ),
            None => {}
        }
    }
    let selection = selector(
        [
            &args.select.match_api_version,
            &args.select.match_kind,
            &args.select.match_name,
            &args.select.match_namespace,
        ],
        &args.select.match_labels,
        &args.select.match_annotations,
    )
    .and_then(|selectors| {
        let exclude = selector(
            [
                &args.exclude.exclude_api_version,
                &args.exclude.exclude_kind,
                &args.exclude.exclude_name,
                &args.exclude.exclude_namespace,
            ],
            &args.exclude.exclude_labels,
            &args.exclude.exclude_annotations,
        )?;
        Ok((selectors, exclude))
    });
    let function = match selection {
        Ok((selectors, exclude)) => Function {
            selectors,
            exclude,
            ..function
        },
        Err(message) => {
            print_report(&Report::Command(message), err);
            return 1;
        }
    };
    let config = match function_config(args) {
        Ok(config) => config,
        Err(message) => {
            print_report(&Report::Command(message), err);
            return 1;
        }
    };
    let dir = args.dir.as_deref().unwrap_or(".");
    let code = if dir == "-" {
        run_on_stdin(args, interrupts, &function, &config, out, err)
    } else {
        run_on_package(args, interrupts, dir, &function, &config, out, err)
    };
    // A package saves under its lock (in `run_on_package`); from stdin kpt
    // saves into the current directory's Kptfile.
    if code == 0 && args.save && dir == "-" {
        save_function(args, &function, &absolute(Path::new(".")), err);
    }
    code
}

/// kpt's `SaveFnToKptfile`: adds (or updates) the function in the Kptfile
/// of `pkg`, keeping the file's comments and field order, and says so.
fn save_function(args: &EvalArgs, function: &Function, pkg: &Path, err: &mut dyn Write) {
    let kind = args.fn_type.as_deref().unwrap_or("mutator");
    let path = pkg.join(kptfile::KPTFILE_NAME);
    let parsed = std::fs::read(&path).ok().and_then(|bytes| {
        let text = String::from_utf8_lossy(&bytes).into_owned();
        let kptfile = kptfile::Kptfile::parse(&text, pkg).ok()?;
        Some((text, kptfile))
    });
    let Some((text, kptfile)) = parsed else {
        let _ = err.write_all(b"function not added: Kptfile not exists\n");
        return;
    };
    let mut saved = kptfile::SavedFunction {
        image: function.image.clone(),
        exec: function.exec.clone(),
        selectors: function.selectors.clone(),
        exclude: function.exclude.clone(),
        ..kptfile::SavedFunction::default()
    };
    match &args.fn_config {
        // Relative to the package, not to the working directory.
        Some(config) => saved.config_path = relative_path(pkg, &absolute(config)),
        // `KEY=VALUE`s; a leading kind (checked before the run) is not saved.
        None => {
            for (key, value) in args.config.iter().filter_map(|item| item.split_once('=')) {
                saved.config_map.insert(key.to_owned(), value.to_owned());
            }
        }
    }
    let (mut node, replaced) = kptfile.with_saved_function(kind == "validator", &saved);
    if let Ok(Some(original)) = crate::yaml::parse_document(&text) {
        let synced = crate::krm::comments::copy_comments(&original, &mut node)
            .and_then(|()| crate::krm::order::sync_order(&original, &mut node));
        if let Err(error) = synced {
            let _ = writeln!(err, "function is not added to Kptfile: {error}");
            return;
        }
    }
    let mut changes = crate::pkg::commit::Changes::default();
    changes.write(
        kptfile::KPTFILE_NAME,
        crate::yaml::to_string(&node, crate::yaml::SeqIndent::Wide),
    );
    if let Err(error) = crate::pkg::commit::commit(pkg, &changes, super::durability()) {
        let _ = writeln!(err, "function is not added to Kptfile: {error}");
        return;
    }
    let verb = if replaced { "Updated" } else { "Added" };
    let _ = writeln!(err, "{verb} {:?} as {kind} in the Kptfile.", function.name);
}

/// `to` relative to `from` (both absolute), as Go's `filepath.Rel`.
fn relative_path(from: &Path, to: &Path) -> String {
    let from: Vec<_> = from.components().collect();
    let to: Vec<_> = to.components().collect();
    let common = from.iter().zip(&to).take_while(|(a, b)| a == b).count();
    let mut parts: Vec<String> = vec!["..".to_owned(); from.len() - common];
    parts.extend(
        to[common..]
            .iter()
            .map(|part| part.as_os_str().to_string_lossy().into_owned()),
    );
    if parts.is_empty() {
        ".".to_owned()
    } else {
        parts.join("/")
    }
}

/// kpt's eval functionConfig: the `--fn-config` file, or a ConfigMap named
/// `function-input` built from the `KEY=VALUE` arguments (always built,
/// with empty `data` when there are none). A leading argument without `=`
/// names the kind. Keys keep kpt's insertion order: metadata, data, kind,
/// apiVersion.
fn function_config(args: &EvalArgs) -> Result<Node, String> {
    if let Some(path) = &args.fn_config {
        if !args.config.is_empty() {
            return Err(
                "function arguments can only be specified without function config file".to_owned(),
            );
        }
        return read_fn_config(path);
    }
    let mut kind = "ConfigMap".to_owned();
    let mut data = Node::new_mapping();
    data.style = Style::FLOW;
    for (i, pair) in args.config.iter().enumerate() {
        match pair.split_once('=') {
            Some((key, value)) => {
                // Like kyaml's SetField: a repeated key replaces the value.
                let mut node = Node::new_scalar(tag::STR, value);
                if is_yaml11_non_string(value) {
                    node.style = Style::DOUBLE_QUOTED;
                }
                data.set(key, node);
            }
            None if i == 0 => kind = pair.clone(),
            None => return Err("args must have keys and values separated by =".to_owned()),
        }
    }
    let mut root = Node::new_mapping();
    let mut metadata = Node::new_mapping();
    metadata.set("name", Node::new_string("function-input"));
    root.set("metadata", metadata);
    root.set("data", data);
    root.set("kind", Node::new_string(kind));
    root.set("apiVersion", Node::new_string("v1"));
    Ok(root)
}

/// kyaml's `IsYaml1_1NonString`, which its `SetField` uses to double-quote
/// values a YAML 1.1 reader would not take as strings (`y`, `on`, and
/// everything YAML 1.2 reads as a number, bool or null).
fn is_yaml11_non_string(value: &str) -> bool {
    const OLD_BOOLS: [&str; 16] = [
        "y", "Y", "yes", "Yes", "YES", "n", "N", "no", "No", "NO", "on", "On", "ON", "off", "Off",
        "OFF",
    ];
    if value.is_empty() || value.contains('\n') {
        return false;
    }
    // Sexagesimal numbers (`1:20`) are not on kyaml's list; the encoder
    // single-quotes them as go-yaml does.
    OLD_BOOLS.contains(&value) || crate::yaml::resolve::is_non_string(value)
}

/// Reads `--fn-config`: its one resource, with the index and seqindent
/// annotations kyaml's byte reader adds (no path annotations).
fn read_fn_config(path: &Path) -> Result<Node, String> {
    let missing = || format!("missing function config file: {}", path.display());
    if !path.exists() {
        return Err(missing());
    }
    let absolute = absolute(path);
    let bytes = std::fs::read(&absolute).map_err(|error| error.to_string())?;
    let text = crate::pkg::reader::decode_text(&bytes)
        .map_err(|reason| format!("{}: MalformedYAMLError: yaml: {reason}", absolute.display()))?;
    let options = crate::pkg::reader::ReadOptions::default();
    let quoted = format!("{:?}", absolute.display().to_string());
    let mut resources = crate::pkg::reader::parse_file("", &absolute, &text, &options).map_err(
        |error| match error {
            ReadError::Malformed { source, .. } => {
                format!("failed to read functionConfig {quoted}: MalformedYAMLError: {source}")
            }
            other => format!("failed to read functionConfig {quoted}: {other}"),
        },
    )?;
    match resources.len() {
        1 => {}
        // kpt beta.56 panics on an empty file.
        0 => return Err(format!("functionConfig {quoted} holds no config")),
        count => {
            return Err(format!(
                "functionConfig {quoted} must not contain more than one config, got {count}"
            ));
        }
    }
    let mut node = resources.remove(0);
    resource::remove_annotation(&mut node, resource::LEGACY_PATH);
    resource::remove_annotation(&mut node, resource::PATH);
    Ok(node.root().clone())
}

/// The resources of one file, annotated as the package reader does.
fn read_single_file(path: &Path, name: &str) -> Result<Vec<Node>, String> {
    let bytes = std::fs::read(path).map_err(|error| format!("{}: {error}", path.display()))?;
    let text = crate::pkg::reader::decode_text(&bytes)
        .map_err(|reason| format!("{}: MalformedYAMLError: yaml: {reason}", path.display()))?;
    let options = crate::pkg::reader::ReadOptions::default();
    crate::pkg::reader::parse_file(name, path, &text, &options).map_err(|error| error.to_string())
}

/// What running the function produced.
enum Ran {
    /// The function ran and its output is usable.
    Output(Vec<Node>),
    /// It failed; the progress lines and messages are printed.
    Failed,
    /// A signal stopped it (the exit code); nothing may be written.
    Interrupted(i32),
}

/// Runs the function on `items`, printing kpt's progress lines, and saves
/// `--results-dir`.
fn run_function(
    args: &EvalArgs,
    interrupts: &Interrupts,
    function: &Function,
    config: &Node,
    items: Vec<Node>,
    err: &mut dyn Write,
) -> Ran {
    let chain_options = ChainOptions {
        image_pull_policy: args.image_pull_policy.clone(),
        cancel: interrupts.cancel().clone(),
        config: config_path(args),
        access: container_access(args),
        runtime: super::container_runtime(),
    };
    let remote = match args.cache.options().resolved_dir() {
        Some(_) => match super::cache::open_remote(&args.cache, &chain_options.config) {
            Ok(remote) => remote,
            Err(report) => {
                print_report(&report, err);
                return Ran::Failed;
            }
        },
        None => None,
    };
    let image_runtime = crate::engine::cache::wrap_image_evaluator(
        image_evaluator(&chain_options),
        &args.cache.options(),
        &chain_options.config,
        remote.clone(),
    );
    let exec_runtime = exec_evaluator(&chain_options);
    let (evaluator, target): (&dyn Evaluator, FunctionTarget<'_>) = if function.image.is_empty() {
        (&exec_runtime, FunctionTarget::Exec(&function.exec))
    } else {
        (
            image_runtime.as_ref(),
            FunctionTarget::Image(&function.image),
        )
    };
    // A selective run sees only the selected resources, tagged with kpt's
    // temporary ids so its output can be merged back (as render's steps).
    let selective = !function.selectors.is_empty() || !function.exclude.is_empty();
    let mut items = items;
    let (input, selected, selected_ids) = if selective {
        select::set_resource_ids(&mut items);
        let selected = select::pick(&items, &function.selectors, &function.exclude);
        let ids = select::resource_ids(&selected);
        (items, selected, ids)
    } else {
        (Vec::new(), items, Vec::new())
    };
    let mut printer = Printer::new(err, args.truncate_output);
    printer.running(&function.name, selective.then_some(selected.len()), None);
    let started = Instant::now();
    // kpt's function runner checks its input and its output are KRM.
    let run = match crate::hydrate::check_all_krm(&selected) {
        Err(message) => Err(format!(
            "input resource list must contain only KRM resources: {message}"
        )),
        Ok(()) => bridge::run_filter(
            evaluator,
            target,
            selected,
            crate::runtime::function_filter::FunctionCall {
                function_config: Some(config),
                in_pipeline: true,
            },
            crate::hydrate::RenderOptions::default().timeout,
            None,
            super::native_mode(),
        )
        .map_err(|failure| failure.to_string()),
    };
    let elapsed = started.elapsed();
    if let Some(warning) = remote.as_deref().and_then(super::cache::remote_warning) {
        printer.text(&format!("{warning}\n"));
    }
    if let Some(code) = interrupts.exit_code() {
        let _ = writeln!(err, "{}", interrupts.message("fn eval"));
        return Ran::Interrupted(code);
    }
    let mut fn_result = FnResult {
        image: function.image.clone(),
        exec: function.exec.clone(),
        ..FnResult::default()
    };
    // kpt prints the results line before the error of a function that
    // could not run or whose output is unusable, and records exit code 1.
    let mut error = None;
    let ran = match run {
        Err(message) => {
            printer.fail(&function.name, elapsed, &[]);
            fn_result.exit_code = 1;
            error = Some(message);
            Ran::Failed
        }
        Ok(run) => {
            let stderr = if function.image.is_empty() {
                run.stderr.clone()
            } else {
                crate::hydrate::trim_container_stderr(&run.stderr)
            };
            fn_result.stderr = stderr.clone();
            fn_result.exit_code = run.exit_code;
            fn_result.results = ResultItems::from_node(run.results.as_ref()).unwrap_or_default();
            let lines = fn_result.results.lines();
            if run.exit_code != 0 {
                printer.fail(&function.name, elapsed, &lines);
                printer.exec_error(&stderr, run.exit_code);
                Ran::Failed
            } else {
                let output = run.output.and_then(|output| {
                    crate::hydrate::check_all_krm(&output)
                        .map(|()| output)
                        .map_err(|message| {
                            format!(
                                "output resource list must contain only KRM resources: {message}"
                            )
                        })
                });
                match output {
                    Ok(output) => {
                        printer.pass(&function.name, elapsed, &lines, &stderr);
                        if selective {
                            let mut merged = select::merge_with_input(output, input, &selected_ids);
                            select::delete_resource_ids(&mut merged);
                            Ran::Output(merged)
                        } else {
                            Ran::Output(output)
                        }
                    }
                    Err(message) => {
                        printer.fail(&function.name, elapsed, &lines);
                        fn_result.exit_code = 1;
                        error = Some(message);
                        Ran::Failed
                    }
                }
            }
        }
    };
    if let Some(dir) = &args.results_dir {
        let node = result_list_node(i32::from(fn_result.exit_code != 0), &[fn_result]);
        let text = crate::yaml::to_string(&node, crate::yaml::SeqIndent::Wide);
        // kpt names the file under the directory as given, after a blank line.
        if std::fs::create_dir_all(absolute(dir)).is_ok() {
            let file = dir.join("results.yaml");
            if std::fs::write(absolute(&file), text).is_ok() {
                let _ = writeln!(err, "\nFor complete results, see {}", file.display());
            }
        }
    }
    if let Some(message) = error {
        print_report(&Report::Command(message), err);
    }
    ran
}

/// `fn eval -`: a ResourceList on stdin, the output list on stdout.
fn run_on_stdin(
    args: &EvalArgs,
    interrupts: &Interrupts,
    function: &Function,
    config: &Node,
    out: &mut dyn Write,
    err: &mut dyn Write,
) -> i32 {
    let mut input = String::new();
    if let Err(error) = std::io::stdin().read_to_string(&mut input) {
        print_report(&Report::Command(error.to_string()), err);
        return 1;
    }
    let mut items = match bridge::parse_resource_list(&input) {
        Ok(items) => items,
        Err(message) => {
            print_report(&Report::Command(message), err);
            return 1;
        }
    };
    add_stream_seq_indent(&input, &mut items);
    match run_function(args, interrupts, function, config, items, err) {
        Ran::Output(output) => {
            let text = match args.output.as_deref() {
                Some("unwrap") => bridge::unwrap_text(&output),
                _ => bridge::resource_list_text(&output),
            };
            let _ = out.write_all(text.as_bytes());
            0
        }
        Ran::Failed => 1,
        Ran::Interrupted(code) => code,
    }
}

/// kpt reads a plain multi-document stream on stdin with kyaml's
/// `PreserveSeqIndent`: each resource also gets the seqindent annotation
/// of its own document. A ResourceList (or List) is taken as it is.
fn add_stream_seq_indent(text: &str, items: &mut [Node]) {
    let normalized = text.replace("\r\n", "\n");
    let Ok(pieces) = crate::pkg::reader::split_documents(&normalized, Path::new("-")) else {
        return;
    };
    let mut indents = Vec::new();
    for piece in pieces {
        let Ok(Some(document)) = crate::yaml::parse_document(piece) else {
            continue;
        };
        if document.content.is_empty() || document.root().is_null() {
            continue;
        }
        if matches!(resource::kind(&document), Some("ResourceList" | "List")) {
            return;
        }
        indents.push(crate::pkg::reader::derive_seq_indent(piece));
    }
    // Only when every document became one item, so indents line up.
    if indents.len() != items.len() {
        return;
    }
    for (node, indent) in items.iter_mut().zip(indents) {
        if resource::annotation(node, resource::SEQ_INDENT).is_none() {
            resource::set_annotation(
                node,
                resource::SEQ_INDENT,
                indent.as_str(),
                Style::SINGLE_QUOTED,
            );
        }
    }
}

/// `fn eval DIR`: the whole package tree (subpackages and Kptfiles
/// included, `.krmignore` honoured) is the function's input, read as
/// `fn source` reads it; the output goes back into DIR as one atomic
/// commit — files whose resources all went away are deleted, resources
/// without a path get kyaml's default — or to `-o stdout|unwrap|DIR`.
/// A failing function changes nothing.
fn run_on_package(
    args: &EvalArgs,
    interrupts: &Interrupts,
    dir: &str,
    function: &Function,
    config: &Node,
    out: &mut dyn Write,
    err: &mut dyn Write,
) -> i32 {
    let given = absolute(Path::new(dir));
    let Ok(metadata) = std::fs::symlink_metadata(&given) else {
        let message = super::render::missing_path_error(Path::new(dir))
            .unwrap_or_else(|| format!("lstat {dir}: no such file or directory"));
        print_report(&Report::Command(message), err);
        return 1;
    };
    // kyaml's reader also takes a single file: it is the whole input, its
    // path annotation is its base name, and it is written back beside itself.
    let single_file = metadata.is_file().then(|| {
        given
            .file_name()
            .map(|name| name.to_string_lossy().into_owned())
            .unwrap_or_default()
    });
    let root = match &single_file {
        Some(_) => given
            .parent()
            .map_or_else(|| given.clone(), Path::to_path_buf),
        None => given.clone(),
    };
    let output = output_mode(args.output.as_deref());
    // Lifecycle (issue 8): lock the package (exclusively when writing it
    // back or saving the function into its Kptfile) and recover interrupted
    // commits before reading it; the lock is released when `_session` drops.
    let exclusive = output == Output::InPlace || args.save;
    let _session = match super::rpkg::open_for_render(&root, exclusive, err) {
        Ok(session) => session,
        Err(report) => {
            print_report(&report, err);
            return 1;
        }
    };
    let read = match &single_file {
        Some(name) => read_single_file(&given, name),
        None => crate::hydrate::apply::source_resources(&root),
    };
    let items = match read {
        Ok(items) => items,
        Err(message) => {
            print_report(&Report::Command(message), err);
            return 1;
        }
    };
    // The files that held resources: those the writer deletes when the
    // function removed all of their resources.
    let files_read: Vec<String> = items
        .iter()
        .filter_map(|node| resource::annotation(node, resource::PATH))
        .map(str::to_owned)
        .collect::<BTreeSet<_>>()
        .into_iter()
        .collect();
    let resources = match run_function(args, interrupts, function, config, items, err) {
        Ran::Output(resources) => resources,
        Ran::Failed => return 1,
        Ran::Interrupted(code) => return code,
    };
    let written = match &output {
        // `--check` is a flag of `fn render` only.
        Output::InPlace | Output::Check => {
            crate::pkg::writer::plan_package(&root, &resources, &files_read)
                .map_err(|error| error.to_string())
                .and_then(|changes| {
                    crate::pkg::commit::commit(&root, &changes, super::durability())
                        .map(|_| ())
                        .map_err(|error| error.to_string())
                })
        }
        Output::Stdout => {
            let _ = out.write_all(bridge::resource_list_text(&resources).as_bytes());
            Ok(())
        }
        Output::Unwrap => {
            let _ = out.write_all(bridge::unwrap_text(&resources).as_bytes());
            Ok(())
        }
        // kpt checks the directory only once the function has run.
        Output::Dir(target) if target.exists() => Err(format!(
            "directory {:?} already exists, please delete the directory and retry",
            args.output.as_deref().unwrap_or_default()
        )),
        Output::Dir(target) => {
            crate::pkg::writer::write_new_dir(target, &resources, super::durability())
                .map_err(|error| error.to_string())
        }
    };
    match written {
        Ok(()) => {
            if args.save {
                save_function(args, function, &given, err);
            }
            0
        }
        Err(message) => {
            print_report(&Report::Command(message), err);
            1
        }
    }
}

/// Runs `fn source DIR`: prints the package tree as a ResourceList.
pub(super) fn source(args: &SourceArgs, out: &mut dyn Write, err: &mut dyn Write) -> i32 {
    if args.include_meta_resources {
        let message = "--include-meta-resources is no longer necessary because meta resources are now included by default";
        print_report(&Report::Command(message.to_owned()), err);
        return 1;
    }
    let unwrap = match args.output.as_deref() {
        None | Some("stdout") => false,
        Some("unwrap") => true,
        Some(other) => {
            let message = format!(
                "invalid input for --output flag {}, must be \"stdout\" or \"unwrap\"",
                crate::runtime::builtin::sdk::go_quote(other)
            );
            print_report(&Report::Command(message), err);
            return 1;
        }
    };
    let root = absolute(args.dir.as_deref().unwrap_or(Path::new(".")));
    // kpt resolves the absolute path first (see `missing_path_error`).
    if let Some(message) = super::render::missing_path_error(&root) {
        print_report(&Report::Command(message), err);
        return 1;
    }
    // Lifecycle (issue 8): recover an interrupted commit before reading.
    let _session = match super::rpkg::open_for_render(&root, false, err) {
        Ok(session) => session,
        Err(report) => {
            print_report(&report, err);
            return 1;
        }
    };
    let function_config = match args.fn_config.as_deref().map(source_fn_config).transpose() {
        Ok(config) => config,
        Err(message) => {
            print_report(&Report::Command(message), err);
            return 1;
        }
    };
    match crate::hydrate::apply::source_resources(&root) {
        Ok(resources) => {
            let text = if unwrap {
                bridge::unwrap_text(&resources)
            } else {
                crate::krm::resource_list::encode_function_input(
                    &resources,
                    function_config.as_ref(),
                )
            };
            let _ = out.write_all(text.as_bytes());
            0
        }
        Err(message) => {
            print_report(&Report::Command(message), err);
            1
        }
    }
}

/// `fn source --fn-config FILE`: the file's one resource, annotated as kpt's
/// package reader annotates a package of that one file (its path is the
/// file's name).
fn source_fn_config(path: &Path) -> Result<Node, String> {
    let absolute = absolute(path);
    if std::fs::symlink_metadata(&absolute).is_err() {
        return Err(format!(
            "evalsymlink failure on '{}' : lstat {}: no such file or directory",
            path.display(),
            absolute.display()
        ));
    }
    let bytes =
        std::fs::read(&absolute).map_err(|error| format!("{}: {error}", absolute.display()))?;
    let text = crate::pkg::reader::decode_text(&bytes)
        .map_err(|reason| format!("{}: MalformedYAMLError: yaml: {reason}", absolute.display()))?;
    let name = absolute
        .file_name()
        .map(|name| name.to_string_lossy().into_owned())
        .unwrap_or_default();
    let options = crate::pkg::reader::ReadOptions::default();
    let mut resources = crate::pkg::reader::parse_file(&name, &absolute, &text, &options)
        .map_err(|error| error.to_string())?;
    if resources.len() != 1 {
        return Err(format!(
            "expected exactly 1 functionConfig, found {}",
            resources.len()
        ));
    }
    Ok(resources.remove(0))
}

/// Runs `fn sink DIR`: writes a ResourceList from stdin into `DIR`.
pub(super) fn sink(args: &SinkArgs, err: &mut dyn Write) -> i32 {
    let mut input = String::new();
    if let Err(error) = std::io::stdin().read_to_string(&mut input) {
        print_report(&Report::Command(error.to_string()), err);
        return 1;
    }
    let dir = absolute(&args.dir);
    // Lifecycle (issue 8): an existing package is locked and recovered first.
    let _session = match super::rpkg::open_for_render(&dir, true, err) {
        Ok(session) => session,
        Err(report) => {
            print_report(&report, err);
            return 1;
        }
    };
    // kpt creates DIR even when the stream holds no resources.
    let result = bridge::parse_resource_list(&input).and_then(|items| {
        std::fs::create_dir_all(&dir).map_err(|error| format!("{}: {error}", dir.display()))?;
        crate::hydrate::apply::write_package(&dir, &items, super::durability())
    });
    match result {
        Ok(()) => 0,
        Err(message) => {
            print_report(&Report::Command(message), err);
            1
        }
    }
}
