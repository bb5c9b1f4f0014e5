//! Function results: decoding a function's `results` into kpt's result
//! model, the per-step records of `status.renderStatus`, the CLI lines
//! (`[info] apps/v1/Deployment/x spec.replicas: ...`) and the
//! `FunctionResultList` written to `--results-dir`.

use crate::pkg::gostruct::{self, GoField, GoStruct, GoType, GoValue, StructValue, field};
use crate::pkg::kptfile::{PIPELINE_STEP_RESULT, RESULT_ITEM};
use crate::yaml::node::Node;

const STRING: GoType = GoType::Str("string");

static RESOURCE_IDENTIFIER: GoStruct = GoStruct {
    name: "yaml.ResourceIdentifier",
    fields: &[
        field!("apiVersion", STRING),
        field!("kind", STRING),
        field!("name", STRING),
        field!("namespace", STRING),
    ],
};
static FIELD: GoStruct = GoStruct {
    name: "framework.Field",
    fields: &[
        field!("path", STRING),
        field!("currentValue", STRING),
        field!("proposedValue", STRING),
    ],
};
static FILE: GoStruct = GoStruct {
    name: "framework.File",
    fields: &[field!("path", STRING), field!("index", GoType::Int)],
};
/// kyaml's `framework.Result`: one structured result item of a function.
static FRAMEWORK_RESULT: GoStruct = GoStruct {
    name: "framework.Result",
    fields: &[
        field!("message", STRING),
        field!("severity", STRING),
        field!("resourceRef", GoType::Struct(&RESOURCE_IDENTIFIER), pointer),
        field!("field", GoType::Struct(&FIELD), pointer),
        field!("file", GoType::Struct(&FILE), pointer),
        field!("tags", GoType::StrMap),
    ],
};
static FRAMEWORK_RESULT_TYPE: GoType = GoType::Struct(&FRAMEWORK_RESULT);
static FN_RESULT: GoStruct = GoStruct {
    name: "v1.Result",
    fields: &[
        field!("image", STRING),
        field!("exec", STRING),
        field!("stderr", STRING),
        field!("exitCode", GoType::Int, required),
        field!(
            "results",
            GoType::List("[]framework.Result", &FRAMEWORK_RESULT_TYPE)
        ),
    ],
};
static FN_RESULT_TYPE: GoType = GoType::Struct(&FN_RESULT);
static RESULT_LIST_META: GoStruct = GoStruct {
    name: "v1.ObjectMeta",
    fields: &[field!("name", STRING)],
};
static RESULT_LIST: GoStruct = GoStruct {
    name: "v1.ResultList",
    fields: &[
        field!("apiVersion", STRING),
        field!("kind", STRING),
        field!("metadata", GoType::Struct(&RESULT_LIST_META)),
        field!("exitCode", GoType::Int, required),
        field!("items", GoType::List("[]v1.Result", &FN_RESULT_TYPE)),
    ],
};
static RESULT_SEQUENCE: GoStruct = GoStruct {
    name: "[]framework.Result",
    fields: &[field!(
        "results",
        GoType::List("[]framework.Result", &FRAMEWORK_RESULT_TYPE)
    )],
};

/// One function's structured result items, as decoded from its output.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ResultItems {
    items: Vec<StructValue>,
}

impl ResultItems {
    /// Decodes the `results` node of a function's output (a sequence, or a
    /// legacy `{name, items: [...]}` mapping whose items are uplifted).
    pub fn from_node(results: Option<&Node>) -> Result<ResultItems, String> {
        let Some(results) = results else {
            return Ok(ResultItems::default());
        };
        let mut results = results.root();
        if results.is_mapping()
            && let Some(items) = results
                .get("items")
                .filter(|items| !items.content.is_empty())
        {
            results = items;
        }
        if results.is_null() || (results.is_sequence() && results.content.is_empty()) {
            return Ok(ResultItems::default());
        }
        let mut wrapper = Node::new_mapping();
        wrapper.set("results", results.clone());
        let decoded = gostruct::decode_lenient(&wrapper, &RESULT_SEQUENCE)
            .map_err(|errors| errors.to_string())?;
        let items = match decoded.get(&RESULT_SEQUENCE, "results") {
            Some(GoValue::List(Some(items))) => items
                .iter()
                .map(|item| match item {
                    GoValue::Struct(Some(value)) => value.clone(),
                    _ => StructValue::default(),
                })
                .collect(),
            _ => Vec::new(),
        };
        Ok(ResultItems { items })
    }

    /// The items as one sequence node, the action cache's form of them
    /// ([`ResultItems::from_cached`] reads it back).
    pub(crate) fn to_node(&self) -> Node {
        let mut sequence = Node::new_sequence();
        sequence.content = self
            .items
            .iter()
            .map(|item| gostruct::marshal(item, &FRAMEWORK_RESULT))
            .collect();
        sequence
    }

    /// Reads back what [`ResultItems::to_node`] wrote.
    pub(crate) fn from_cached(node: &Node) -> ResultItems {
        let items = node
            .content
            .iter()
            .map(|item| gostruct::decode_lenient(item, &FRAMEWORK_RESULT).unwrap_or_default())
            .collect();
        ResultItems { items }
    }

    /// True when there are no items.
    pub fn is_empty(&self) -> bool {
        self.items.is_empty()
    }

    /// The CLI line of every item (`[info]: message`).
    pub fn lines(&self) -> Vec<String> {
        self.items.iter().map(cli_line).collect()
    }

    /// The items as kpt's status `ResultItem`s (all, then the error ones).
    fn status_items(&self, errors_only: bool) -> Vec<GoValue> {
        self.items
            .iter()
            .filter(|item| !errors_only || item.str(&FRAMEWORK_RESULT, "severity") == "error")
            .map(|item| {
                let node = gostruct::marshal(item, &FRAMEWORK_RESULT);
                let value = gostruct::decode_lenient(&node, &RESULT_ITEM).unwrap_or_default();
                GoValue::Struct(Some(value))
            })
            .collect()
    }
}

fn cli_line(item: &StructValue) -> String {
    let severity = match item.str(&FRAMEWORK_RESULT, "severity") {
        "" => "info",
        other => other,
    };
    let mut line = format!("[{severity}]");
    if let Some(GoValue::Struct(Some(reference))) = item.get(&FRAMEWORK_RESULT, "resourceRef") {
        let parts: Vec<&str> = ["apiVersion", "kind", "namespace", "name"]
            .iter()
            .map(|key| reference.str(&RESOURCE_IDENTIFIER, key))
            .filter(|part| !part.is_empty())
            .collect();
        if !parts.is_empty() {
            line.push(' ');
            line.push_str(&parts.join("/"));
        }
    }
    if let Some(GoValue::Struct(Some(field))) = item.get(&FRAMEWORK_RESULT, "field") {
        let path = field.str(&FIELD, "path");
        if !path.is_empty() {
            line.push(' ');
            line.push_str(path);
        }
    }
    line.push_str(": ");
    line.push_str(item.str(&FRAMEWORK_RESULT, "message"));
    line
}

/// What one function call left in kpt's `fnResults` list.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FnResult {
    /// The expanded image, if an image step.
    pub image: String,
    /// The exec command, if an exec step.
    pub exec: String,
    /// The function's stderr.
    pub stderr: String,
    /// Its exit code.
    pub exit_code: i32,
    /// Its structured results.
    pub results: ResultItems,
}

/// One entry of `status.renderStatus.mutationSteps` / `validationSteps`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct StepRecord {
    /// `name:` of the step.
    pub name: String,
    /// The image as written in the Kptfile step (after expansion).
    pub image: String,
    /// The exec command.
    pub exec: String,
    /// Why the function could not run, if it did not.
    pub execution_error: String,
    /// The function's stderr.
    pub stderr: String,
    /// Exit code.
    pub exit_code: i32,
    /// Structured results.
    pub results: ResultItems,
}

impl StepRecord {
    /// The step's name in `errorSummary`.
    pub fn display_name(&self) -> &str {
        if !self.name.is_empty() {
            &self.name
        } else if !self.image.is_empty() {
            &self.image
        } else {
            &self.exec
        }
    }

    pub(crate) fn to_value(&self) -> StructValue {
        let mut value = StructValue::default();
        let s = &PIPELINE_STEP_RESULT;
        value.set(s, "name", GoValue::Str(self.name.clone()));
        value.set(s, "image", GoValue::Str(self.image.clone()));
        value.set(s, "exec", GoValue::Str(self.exec.clone()));
        value.set(
            s,
            "executionError",
            GoValue::Str(self.execution_error.clone()),
        );
        value.set(s, "stderr", GoValue::Str(self.stderr.clone()));
        value.set(s, "exitCode", GoValue::Int(i64::from(self.exit_code)));
        value.set(
            s,
            "results",
            GoValue::List(Some(self.results.status_items(false))),
        );
        value.set(
            s,
            "errorResults",
            GoValue::List(Some(self.results.status_items(true))),
        );
        value
    }
}

/// Builds the `FunctionResultList` document written to `--results-dir`.
pub fn result_list_node(exit_code: i32, results: &[FnResult]) -> Node {
    let mut value = StructValue::default();
    value.set(
        &RESULT_LIST,
        "apiVersion",
        GoValue::Str("kpt.dev/v1".to_owned()),
    );
    value.set(
        &RESULT_LIST,
        "kind",
        GoValue::Str("FunctionResultList".to_owned()),
    );
    let mut meta = StructValue::default();
    meta.set(
        &RESULT_LIST_META,
        "name",
        GoValue::Str("fnresults".to_owned()),
    );
    value.set(&RESULT_LIST, "metadata", GoValue::Struct(Some(meta)));
    value.set(&RESULT_LIST, "exitCode", GoValue::Int(i64::from(exit_code)));
    let items = results
        .iter()
        .map(|result| {
            let mut item = StructValue::default();
            item.set(&FN_RESULT, "image", GoValue::Str(result.image.clone()));
            item.set(&FN_RESULT, "exec", GoValue::Str(result.exec.clone()));
            item.set(&FN_RESULT, "stderr", GoValue::Str(result.stderr.clone()));
            item.set(
                &FN_RESULT,
                "exitCode",
                GoValue::Int(i64::from(result.exit_code)),
            );
            let inner = result
                .results
                .items
                .iter()
                .map(|i| GoValue::Struct(Some(i.clone())))
                .collect();
            item.set(&FN_RESULT, "results", GoValue::List(Some(inner)));
            GoValue::Struct(Some(item))
        })
        .collect();
    value.set(&RESULT_LIST, "items", GoValue::List(Some(items)));
    gostruct::marshal(&value, &RESULT_LIST)
}
