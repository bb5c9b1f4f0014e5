//! The hydrator's calls into the other layers: the package reader and
//! writer (`pkg::reader`, `pkg::writer`), the function round trip
//! (`krm::function_filter`) and the ResourceList encoding for `-o stdout`.
//! Keeping them in one file keeps the orchestrator independent of those
//! APIs' exact shapes.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use crate::runtime::{EvalError, Evaluator, FunctionTarget};
use crate::yaml::node::{Node, Style, tag};

/// A failure to read a package's resources, with kpt's message text.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct ReadFailure(pub(crate) String);

/// Reads the resources of one package directory (not its subpackages),
/// annotated as kpt's reader annotates them, plus the package-path annotation.
pub(crate) fn read_local_resources(pkg_dir: &Path) -> Result<Vec<Node>, ReadFailure> {
    let options = crate::pkg::reader::ReadOptions { package_path: Some(pkg_dir.display().to_string()) };
    crate::pkg::reader::read_package(pkg_dir, &options)
        .map(|read| read.resources)
        .map_err(|error| ReadFailure(error.to_string()))
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
}

/// Runs one function over `items` with kyaml's FunctionFilter round trip.
pub(crate) fn run_filter(
    evaluator: &dyn Evaluator,
    target: FunctionTarget<'_>,
    items: Vec<Node>,
    function_config: Option<&Node>,
    timeout: Duration,
) -> Result<FilterRun, EvalError> {
    let _ = (evaluator, target, items, function_config, timeout);
    Err(EvalError::System("the function round trip is not available yet".to_owned()))
}

/// The `-o stdout` text: one wrapped ResourceList keeping reader annotations.
pub(crate) fn resource_list_text(resources: &[Node]) -> String {
    let _ = resources;
    String::new()
}

/// Parses a ResourceList (`fn eval -`, `fn sink`) into its items, keeping
/// their annotations.
pub(crate) fn parse_resource_list(text: &str) -> Result<Vec<Node>, String> {
    let _ = text;
    Err("the ResourceList reader is not available yet".to_owned())
}

/// The `-o unwrap` text: the resources as a multi-document stream.
pub(crate) fn unwrap_text(resources: &[Node]) -> String {
    let _ = resources;
    String::new()
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
