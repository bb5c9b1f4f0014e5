//! `krender fn ls [PKG]` (krender-only): how every function of every
//! pipeline in a package tree will run — in process, as a local program or
//! in a container — and whether its results are cached.

use std::io::Write;
use std::path::Path;

use super::args::LsArgs;
use super::render::{print_report, resolve_package_path};
use crate::hydrate::Report;
use crate::pkg::kptfile::{self, DEFAULT_IMAGE_PREFIX, Function};
use crate::pkg::tree;
use crate::runtime::chain::{ChainOptions, image_evaluator};
use crate::runtime::config::FunctionTable;
use crate::runtime::container::NO_ENGINE;
use crate::runtime::{Evaluator, Executor, FunctionTarget};

/// One function of one pipeline, as printed.
struct Row {
    package: String,
    kind: &'static str,
    function: String,
    runs_as: String,
    cached: &'static str,
}

/// Runs `fn ls` and returns the exit code.
pub(super) fn run(args: &LsArgs, out: &mut dyn Write, err: &mut dyn Write) -> i32 {
    let root = resolve_package_path(args.pkg_path.as_deref().unwrap_or(Path::new(".")));
    let config = super::config_path(Some(&root));
    let table = match FunctionTable::load(&config) {
        Ok(table) => table,
        Err(error) => {
            print_report(&Report::Command(error.to_string()), err);
            return 1;
        }
    };
    let options = ChainOptions {
        config: config.clone(),
        runtime: super::container_runtime(),
        ..ChainOptions::default()
    };
    let images = image_evaluator(&options);
    let prefix = args
        .image_prefix
        .clone()
        .unwrap_or_else(|| DEFAULT_IMAGE_PREFIX.to_owned());
    let mut rows = Vec::new();
    let mut engines = Engines::new();
    let mut code = 0;
    let mut pending = vec![root.clone()];
    while let Some(pkg) = pending.pop() {
        let kptfile = match crate::hydrate::load_root(&pkg) {
            Ok(kptfile) => kptfile,
            Err(error) => {
                print_report(&Report::kptfile(&error), err);
                code = 1;
                continue;
            }
        };
        let package = tree::display_path(&root, &pkg);
        let pipeline = &kptfile.pipeline;
        let functions = pipeline
            .mutators
            .iter()
            .map(|function| ("mutator", function))
            .chain(
                pipeline
                    .validators
                    .iter()
                    .map(|function| ("validator", function)),
            );
        for (kind, function) in functions {
            rows.push(row(
                &package,
                kind,
                function,
                &prefix,
                images.as_ref(),
                &table,
                &mut engines,
            ));
        }
        match tree::direct_subpackages(&pkg) {
            // Popped from the end: pushed in reverse to list in walk order.
            Ok(subpackages) => pending.extend(subpackages.into_iter().rev()),
            Err(error) => {
                let _ = writeln!(err, "error: cannot list {}: {error}", pkg.display());
                code = 1;
            }
        }
    }
    print_rows(&rows, &config, out);
    code
}

/// Whether each container engine answers, asked once per engine (kpt's
/// check before a render's first container step).
type Engines = std::collections::HashMap<String, Result<(), String>>;

fn row(
    package: &str,
    kind: &'static str,
    function: &Function,
    prefix: &str,
    images: &dyn Evaluator,
    table: &FunctionTable,
    engines: &mut Engines,
) -> Row {
    if function.image.is_empty() {
        let pure = table.exec_is_pure(&function.exec);
        return Row {
            package: package.to_owned(),
            kind,
            function: format!("exec: {}", function.exec),
            runs_as: "executable (needs --allow-exec)".to_owned(),
            cached: if pure { "yes" } else { "no" },
        };
    }
    let image = kptfile::with_default_tag(&kptfile::resolve_image(&function.image, prefix));
    let executor = images.executor(FunctionTarget::Image(&image));
    let (runs_as, cached) = match executor {
        Some(Executor::Builtin(name)) => (format!("builtin {name}"), "yes"),
        Some(Executor::Executable(path)) => (
            format!("executable {path}"),
            if table.image_is_pure(&image) {
                "yes"
            } else {
                "no"
            },
        ),
        Some(Executor::Container { engine, .. }) if engine == NO_ENGINE => (
            "container (no engine on PATH)".to_owned(),
            if table.image_is_pure(&image) {
                "yes"
            } else {
                "no"
            },
        ),
        Some(Executor::Container { engine, .. }) => (
            match engines
                .entry(engine.clone())
                .or_insert_with(|| crate::runtime::container::check_engine(&engine))
            {
                Ok(()) => format!("container via {engine}"),
                // kpt's advice is the line after the engine's error.
                Err(error) => format!(
                    "container via {engine}, which does not answer ({})",
                    error.lines().nth(1).unwrap_or(error.as_str())
                ),
            },
            if table.image_is_pure(&image) {
                "yes"
            } else {
                "no"
            },
        ),
        None => ("unknown".to_owned(), "no"),
    };
    let runs_as = match crate::runtime::builtin::suggestion(&image) {
        Some(meant) => format!("{runs_as} (did you mean {}?)", meant.name()),
        None if crate::runtime::builtin::refused_tag(&image).is_some() => {
            format!("{runs_as} (the builtin does not implement this tag)")
        }
        None => runs_as,
    };
    Row {
        package: package.to_owned(),
        kind,
        function: image,
        runs_as,
        cached,
    }
}

fn print_rows(rows: &[Row], config: &Path, out: &mut dyn Write) {
    let header = Row {
        package: "PACKAGE".to_owned(),
        kind: "KIND",
        function: "FUNCTION".to_owned(),
        runs_as: "RUNS AS".to_owned(),
        cached: "CACHED",
    };
    let all: Vec<&Row> = std::iter::once(&header).chain(rows).collect();
    let width = |field: fn(&Row) -> usize| all.iter().map(|row| field(row)).max().unwrap_or(0);
    let package = width(|row| row.package.chars().count());
    let kind = width(|row| row.kind.len());
    let function = width(|row| row.function.chars().count());
    let runs_as = width(|row| row.runs_as.chars().count());
    for row in all {
        let _ = writeln!(
            out,
            "{:package$}  {:kind$}  {:function$}  {:runs_as$}  {}",
            row.package, row.kind, row.function, row.runs_as, row.cached
        );
    }
    let table = if config.is_file() {
        config.display().to_string()
    } else {
        "none (the defaults)".to_owned()
    };
    let _ = writeln!(out, "\nfunction table: {table}");
}
