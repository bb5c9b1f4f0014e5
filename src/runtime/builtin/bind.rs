//! `bind` (kpt Go SDK `fn.AsMain` with a `ResourceListProcessorFunc`,
//! family K): renames the package's binding object to the name and
//! namespace of the function config, and every reference to it.
//!
//! As the catalog's Go source (`functions/go/bind/main.go`, its
//! `pkg/rename` and `pkg/meta`; kptdev/krm-functions-catalog and the older
//! GoogleContainerTools/kpt-functions-catalog have the same code): the
//! function config is the object to bind to. The binding object is the one
//! item annotated `config.kubernetes.io/local-config: binding` whose kind
//! matches the config's as the SDK's deprecated `IsGVK` matches (an empty
//! group, version or kind on either side matches anything). When its name
//! or namespace differ from the config's, it is renamed with
//! [`rename::rename`](super::rename::rename).
//!
//! Messages: without a function config the function fails (stderr
//! `failed to evaluate function: `data.object` should not be empty`, exit
//! 1); no or several binding objects, and every rename or reference error,
//! are one error result with exit code 0, edits made before the error
//! kept. Items are written sorted, as the SDK does.

use super::kube_object::{Gvk, go_string, name, namespace};
use super::rename::rename;
use super::sdk::{FnResult, LOCAL_CONFIG, Outcome, ResourceList};
use crate::yaml::node::Node;

/// Runs bind on a parsed input.
pub(crate) fn run(input: ResourceList) -> Outcome {
    // krender reads an empty `functionConfig: {}` as none; Go would bind to
    // an empty object there and fail with `name` is required instead.
    let Some(object) = input.function_config.clone() else {
        return Outcome::sdk_error(input, Vec::new(), "`data.object` should not be empty");
    };
    let mut input = input;
    let results = match transform(&object, &mut input.items) {
        Ok(()) => Vec::new(),
        Err(message) => vec![FnResult::error(message)],
    };
    Outcome::sdk(input, results)
}

/// `Bind.Transform`.
fn transform(object: &Node, items: &mut [Node]) -> Result<(), String> {
    let gvk = Gvk::of(object);
    let matches: Vec<usize> = items
        .iter()
        .enumerate()
        .filter(|(_, item)| {
            super::kube_object::annotation_text(item, LOCAL_CONFIG).as_deref() == Some("binding")
                && Gvk::of(item).is_like(&gvk.group, &gvk.version, &gvk.kind)
        })
        .map(|(index, _)| index)
        .collect();
    let of_kind = || {
        format!(
            "{}/{}",
            go_string(object.get("apiVersion")),
            go_string(object.get("kind"))
        )
    };
    let binding = match matches[..] {
        [] => {
            return Err(format!(
                "no match found for binding object of kind {}",
                of_kind()
            ));
        }
        [binding] => binding,
        _ => {
            return Err(format!(
                "multiple matches found for binding object of kind {}",
                of_kind()
            ));
        }
    };
    let (new_name, new_namespace) = (name(object), namespace(object));
    if name(&items[binding]) != new_name || namespace(&items[binding]) != new_namespace {
        rename(items, binding, &new_name, &new_namespace)?;
    }
    Ok(())
}
