//! `krender fn eval -`, `fn source` and `fn sink`: the imperative commands
//! the conformance chains pipe `fn render -o stdout` into.

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::path::Path;
use std::time::Instant;

use super::args::{EvalArgs, SinkArgs, SourceArgs};
use super::render::{absolute, print_report};
use crate::hydrate::printer::Printer;
use crate::hydrate::results::{FnResult, ResultItems, result_list_node};
use crate::hydrate::{Report, bridge};
use crate::pkg::kptfile::{self, DEFAULT_IMAGE_PREFIX};
use crate::runtime::chain::{ChainOptions, image_evaluator};
use crate::runtime::exec::ExecEvaluator;
use crate::runtime::{Evaluator, FunctionTarget};

/// Runs `fn eval` and returns the exit code.
pub(super) fn run(args: &EvalArgs, out: &mut dyn Write, err: &mut dyn Write) -> i32 {
    if args.dir.as_deref() != Some("-") {
        print_report(
            &Report::Error("fn eval: only `-` (a ResourceList on stdin) is supported".to_owned()),
            err,
        );
        return 1;
    }
    let mut input = String::new();
    if let Err(error) = std::io::stdin().read_to_string(&mut input) {
        print_report(&Report::Error(error.to_string()), err);
        return 1;
    }
    let items = match bridge::parse_resource_list(&input) {
        Ok(items) => items,
        Err(message) => {
            print_report(&Report::Error(message), err);
            return 1;
        }
    };
    let mut data = BTreeMap::new();
    for pair in &args.config {
        let (key, value) = pair.split_once('=').unwrap_or((pair.as_str(), ""));
        data.insert(key.to_owned(), value.to_owned());
    }
    let config = (!data.is_empty()).then(|| bridge::config_map_node(&data));
    let prefix = args
        .image_prefix
        .clone()
        .unwrap_or_else(|| DEFAULT_IMAGE_PREFIX.to_owned());
    let image_runtime = crate::engine::cache::wrap_image_evaluator(
        image_evaluator(&ChainOptions {
            image_pull_policy: args.image_pull_policy.clone(),
        }),
        &args.cache.options(),
    );
    let exec_runtime = ExecEvaluator;
    let (name, evaluator, image, exec): (String, &dyn Evaluator, String, String) =
        match (&args.image, &args.exec) {
            (Some(image), None) => {
                let image = kptfile::with_default_tag(&kptfile::resolve_image(image, &prefix));
                (image.clone(), image_runtime.as_ref(), image, String::new())
            }
            (None, Some(exec)) if args.allow_exec => {
                (exec.clone(), &exec_runtime, String::new(), exec.clone())
            }
            (None, Some(_)) => {
                print_report(
                    &Report::Error(crate::hydrate::ALLOW_EXEC_MESSAGE.to_owned()),
                    err,
                );
                return 1;
            }
            _ => {
                print_report(
                    &Report::Error("must specify --image or --exec".to_owned()),
                    err,
                );
                return 1;
            }
        };
    let target = if image.is_empty() {
        FunctionTarget::Exec(&exec)
    } else {
        FunctionTarget::Image(&image)
    };
    let mut printer = Printer::new(err, args.truncate_output);
    printer.running(&name, None, None);
    let started = Instant::now();
    let run = bridge::run_filter(
        evaluator,
        target,
        items,
        config.as_ref(),
        true,
        crate::hydrate::RenderOptions::default().timeout,
    );
    let elapsed = started.elapsed();
    let mut fn_result = FnResult {
        image: image.clone(),
        exec: exec.clone(),
        ..FnResult::default()
    };
    let run = match run {
        Ok(run) => run,
        Err(error) => {
            printer.fail(&name, elapsed, &[]);
            print_report(&Report::Error(error.to_string()), err);
            return 1;
        }
    };
    let stderr = if image.is_empty() {
        run.stderr.clone()
    } else {
        crate::hydrate::trim_container_stderr(&run.stderr)
    };
    fn_result.stderr = stderr.clone();
    fn_result.exit_code = run.exit_code;
    fn_result.results = ResultItems::from_node(run.results.as_ref()).unwrap_or_default();
    let lines = fn_result.results.lines();
    let code = if run.exit_code != 0 {
        printer.fail(&name, elapsed, &lines);
        printer.exec_error(&stderr, run.exit_code);
        1
    } else {
        match &run.output {
            Ok(output) => {
                printer.pass(&name, elapsed, &lines, &stderr);
                let text = match args.output.as_deref() {
                    Some("unwrap") => bridge::unwrap_text(output),
                    _ => bridge::resource_list_text(output),
                };
                let _ = out.write_all(text.as_bytes());
                0
            }
            Err(message) => {
                printer.fail(&name, elapsed, &lines);
                print_report(&Report::Error(message.clone()), err);
                return 1;
            }
        }
    };
    if let Some(dir) = &args.results_dir {
        let node = result_list_node(i32::from(run.exit_code != 0), &[fn_result]);
        let text = crate::yaml::to_string(&node, crate::yaml::SeqIndent::Wide);
        let dir = absolute(dir);
        if std::fs::create_dir_all(&dir).is_ok() {
            let file = dir.join("results.yaml");
            if std::fs::write(&file, text).is_ok() {
                let _ = writeln!(err, "For complete results, see {}", file.display());
            }
        }
    }
    code
}

/// Runs `fn source DIR`: prints the package tree as a ResourceList.
pub(super) fn source(args: &SourceArgs, out: &mut dyn Write, err: &mut dyn Write) -> i32 {
    let root = absolute(args.dir.as_deref().unwrap_or(Path::new(".")));
    // Lifecycle (issue 8): recover an interrupted commit before reading.
    let _session = match super::rpkg::open_for_render(&root, false, err) {
        Ok(session) => session,
        Err(report) => {
            print_report(&report, err);
            return 1;
        }
    };
    match crate::hydrate::apply::source_resources(&root) {
        Ok(resources) => {
            let _ = out.write_all(bridge::resource_list_text(&resources).as_bytes());
            0
        }
        Err(message) => {
            print_report(&Report::Error(message), err);
            1
        }
    }
}

/// Runs `fn sink DIR`: writes a ResourceList from stdin into `DIR`.
pub(super) fn sink(args: &SinkArgs, err: &mut dyn Write) -> i32 {
    let mut input = String::new();
    if let Err(error) = std::io::stdin().read_to_string(&mut input) {
        print_report(&Report::Error(error.to_string()), err);
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
    let result = bridge::parse_resource_list(&input)
        .and_then(|items| crate::hydrate::apply::write_package(&dir, &items));
    match result {
        Ok(()) => 0,
        Err(message) => {
            print_report(&Report::Error(message), err);
            1
        }
    }
}
