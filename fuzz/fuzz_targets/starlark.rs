//! Fuzz target: the Starlark builtin given arbitrary resources (deep,
//! aliased, odd scalars) answers with a ResourceList or an error, never a
//! crash; its input goes through the conversion to starlark values and
//! back.

#![no_main]

use krender::runtime::builtin::BuiltinEvaluator;
use krender::runtime::{Evaluator, FunctionRequest, FunctionTarget};
use libfuzzer_sys::fuzz_target;

const CONFIG: &str = "functionConfig:\n  apiVersion: v1\n  kind: ConfigMap\n  metadata:\n    name: fuzz\n  data:\n    source: |\n      for r in ctx.resource_list['items']:\n        r['seen'] = True\n";

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let Ok(documents) = krender::yaml::parse_documents(text) else {
        return;
    };
    let mut list = String::from("apiVersion: config.kubernetes.io/v1\nkind: ResourceList\nitems:\n");
    for document in &documents {
        let item = krender::yaml::to_string(document, krender::yaml::SeqIndent::Compact);
        for (index, line) in item.lines().enumerate() {
            list.push_str(if index == 0 { "- " } else { "  " });
            list.push_str(line);
            list.push('\n');
        }
    }
    list.push_str(CONFIG);
    let request = FunctionRequest {
        target: FunctionTarget::Image("ghcr.io/kptdev/krm-functions-catalog/starlark:latest"),
        input: list.as_bytes(),
        timeout: std::time::Duration::from_secs(10),
    };
    let _ = BuiltinEvaluator::default().evaluate(&request);
});
