//! The hydrator's calls into the other layers: the package reader and
//! writer (`pkg::reader`, `pkg::writer`), the function round trip
//! (`runtime::function_filter`) and the ResourceList encoding for `-o stdout`.
//! Keeping them in one file keeps the orchestrator independent of those
//! APIs' exact shapes.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use crate::krm::resource_list::{
    decode_function_output, encode_output_list, unwrap_output_list, write_output_list_owned,
};
use crate::runtime::function_filter::{FunctionCall, NativeMode, SettledList, run_evaluator_owned};
use crate::runtime::{EvalError, Evaluator, FunctionTarget};
use crate::yaml::node::{Node, Style, tag};

/// A failure to read a package's resources, with kpt's message text.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct ReadFailure(
    pub(crate) String,
    pub(crate) Option<crate::pkg::reader::SourceLocation>,
);

/// Reads the resources of one package directory (not its subpackages),
/// annotated as kpt's reader annotates them, plus the package-path annotation.
pub(crate) fn read_local_resources(pkg_dir: &Path) -> Result<Vec<Node>, ReadFailure> {
    let options = crate::pkg::reader::ReadOptions {
        package_path: Some(pkg_dir.display().to_string()),
    };
    crate::pkg::reader::read_package(pkg_dir, &options)
        .map(|read| read.resources)
        .map_err(|error| ReadFailure(error.to_string(), error.location().cloned()))
}

/// What a function round trip produced.
#[derive(Clone, Debug)]
pub(crate) struct FilterRun {
    /// The output resources, or why the output could not be used (parse
    /// errors, kind changes) as kpt words it.
    pub(crate) output: Result<Vec<Node>, String>,
    /// The `results` node of the output, if any.
    pub(crate) results: Option<Node>,
    /// The function's stderr.
    pub(crate) stderr: String,
    /// The function's exit code.
    pub(crate) exit_code: i32,
    /// What a settled native step knows of its output (see [`SettledList`]).
    pub(crate) settled: Option<SettledList>,
}

/// Runs one function over `items` with kyaml's FunctionFilter round trip
/// (`runtime::function_filter`). Mutators run inside kyaml's pipeline
/// (`call.in_pipeline`), validators do not. `known` is what the previous
/// step knew of `items`, its whole output handed on.
pub(crate) fn run_filter(
    evaluator: &dyn Evaluator,
    target: FunctionTarget<'_>,
    items: Vec<Node>,
    call: FunctionCall<'_>,
    timeout: Duration,
    known: Option<SettledList>,
    native: NativeMode,
) -> Result<FilterRun, EvalError> {
    let step = run_evaluator_owned(evaluator, target, items, call, timeout, known, native)?;
    Ok(FilterRun {
        output: step.output.map_err(|error| error.to_string()),
        results: step.results,
        stderr: String::from_utf8_lossy(&step.stderr).into_owned(),
        exit_code: step.exit_code,
        settled: step.settled,
    })
}

/// The `-o stdout` text: one wrapped ResourceList keeping reader annotations.
pub(crate) fn resource_list_text(resources: &[Node]) -> String {
    encode_output_list(resources)
}

/// [`resource_list_text`] on resources the caller gives up, written to
/// `out` (in pieces: see [`write_output_list_owned`]).
pub(crate) fn write_resource_list_owned(
    resources: Vec<Node>,
    out: &mut dyn std::io::Write,
) -> std::io::Result<()> {
    write_output_list_owned(resources, out)
}

/// Parses a ResourceList (`fn eval -`, `fn sink`) into its items, keeping
/// their annotations.
pub(crate) fn parse_resource_list(text: &str) -> Result<Vec<Node>, String> {
    decode_function_output(text)
        .map(|output| output.items)
        .map_err(|error| error.to_string())
}

/// The `-o unwrap` text: the resources as a multi-document stream.
pub(crate) fn unwrap_text(resources: &[Node]) -> String {
    unwrap_output_list(&encode_output_list(resources)).unwrap_or_default()
}

/// kpt's `NewConfigMap`: the functionConfig built from a step's `configMap`.
pub(crate) fn config_map_node(data: &BTreeMap<String, String>) -> Node {
    let mut root = Node::new_mapping();
    root.set("apiVersion", Node::new_string("v1"));
    root.set("kind", Node::new_string("ConfigMap"));
    let mut metadata = Node::new_mapping();
    metadata.set("name", Node::new_string("function-input"));
    root.set("metadata", metadata);
    let mut map = Node::new_mapping();
    map.style = Style::FLOW;
    for (key, value) in data {
        map.content.push(Node::new_string(key.as_str()));
        map.content.push(Node::new_scalar(tag::STR, value.as_str()));
    }
    root.set("data", map);
    root
}
