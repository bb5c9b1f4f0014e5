//! `set-image` (old kpt Go SDK, family K): rewrites container images of Pods
//! and pod-template workloads (spec catalog-functions §10, partial: no
//! `additionalImageFields`).

use super::sdk::{FnResult, Outcome, ResourceList, replace_with_string};
use crate::yaml::node::Node;

/// Runs set-image on a parsed input.
pub(crate) fn run(input: ResourceList) -> Outcome {
    let Some(config) = input.function_config.as_ref() else {
        return Outcome::sdk(input, vec![FnResult::info("`FunctionConfig` is not given")]);
    };
    let image = match Image::from_function_config(config) {
        Ok(image) => image,
        Err(message) => {
            // The SDK's `ResultErrAndDie`: the error, then the termination
            // as a second result and as the process's error text.
            let terminated = format!("function is terminated: {message}");
            let results = vec![
                FnResult::error(message),
                FnResult::error(terminated.clone()),
            ];
            let mut outcome = Outcome::sdk_failure(input, results);
            outcome.stderr = format!("failed to evaluate function: {terminated}");
            return outcome;
        }
    };
    let mut input = input;
    let mut count = 0;
    for item in &mut input.items {
        let kind = item.get_str(&["kind"]).unwrap_or_default().to_owned();
        let path: &[&str] = match kind.as_str() {
            "Pod" => &["spec", "containers"],
            "Deployment" | "StatefulSet" | "ReplicaSet" | "DaemonSet" | "PodTemplate" => {
                &["spec", "template", "spec", "containers"]
            }
            _ => continue,
        };
        let Some(containers) = get_path_mut(item, path).filter(|c| c.is_sequence()) else {
            continue;
        };
        for container in &mut containers.content {
            let Some(slot) = container.get_mut("image").filter(|slot| slot.is_scalar()) else {
                continue;
            };
            if let Some(updated) = image.apply(&slot.value)
                && updated != slot.value
            {
                replace_with_string(slot, &updated);
                count += 1;
            }
        }
    }
    Outcome::sdk(
        input,
        vec![FnResult::info(format!(
            "summary: updated a total of {count} image(s)"
        ))],
    )
}

fn get_path_mut<'a>(node: &'a mut Node, path: &[&str]) -> Option<&'a mut Node> {
    path.iter()
        .try_fold(node, |current, key| current.get_mut(key))
}

/// The image rewrite: which image, and its new name, tag or digest.
struct Image {
    name: String,
    new_name: String,
    new_tag: String,
    digest: String,
}

impl Image {
    fn from_function_config(config: &Node) -> Result<Image, String> {
        let api_version = config.get_str(&["apiVersion"]).unwrap_or_default();
        let kind = config.get_str(&["kind"]).unwrap_or_default();
        let mut image = Image {
            name: String::new(),
            new_name: String::new(),
            new_tag: String::new(),
            digest: String::new(),
        };
        let source = if kind == "SetImage" && api_version == "fn.kpt.dev/v1alpha1" {
            config.get("image")
        } else {
            config.get("data")
        };
        let is_config_map = kind == "ConfigMap";
        if let Some(source) = source {
            for (key, value) in source.pairs() {
                let text = value.value.as_str().to_owned();
                match key.value.as_str() {
                    "name" => image.name = text,
                    "newName" => image.new_name = text,
                    "newTag" => image.new_tag = text,
                    "digest" => image.digest = text,
                    other if is_config_map => {
                        return Err(format!("ConfigMap has wrong field name {other}"));
                    }
                    _ => {}
                }
            }
        }
        if image.name.is_empty() {
            return Err("must specify `name`".to_owned());
        }
        if image.new_name.is_empty() && image.new_tag.is_empty() && image.digest.is_empty() {
            return Err("must specify one of `newName`, `newTag`, or `digest`".to_owned());
        }
        Ok(image)
    }

    /// The new value for `current`, or `None` when it is another image.
    /// `current` matches when it is the name, optionally followed by
    /// `:tag` and/or `@digest`.
    fn apply(&self, current: &str) -> Option<String> {
        let rest = current.strip_prefix(self.name.as_str())?;
        if !(rest.is_empty() || rest.starts_with(':') || rest.starts_with('@')) {
            return None;
        }
        let name = if self.new_name.is_empty() {
            self.name.as_str()
        } else {
            self.new_name.as_str()
        };
        // The source drops the separator when it keeps the old tag or
        // digest; krender keeps it (spec §10 asks to verify before copying).
        let suffix = if !self.new_tag.is_empty() {
            format!(":{}", self.new_tag)
        } else if !self.digest.is_empty() {
            format!("@{}", self.digest)
        } else {
            rest.to_owned()
        };
        Some(format!("{name}{suffix}"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn images_match_with_optional_tag_or_digest() {
        let image = Image {
            name: "nginx".to_owned(),
            new_name: String::new(),
            new_tag: "1.27".to_owned(),
            digest: String::new(),
        };
        assert_eq!(image.apply("nginx:1.2"), Some("nginx:1.27".to_owned()));
        assert_eq!(image.apply("nginx"), Some("nginx:1.27".to_owned()));
        assert_eq!(image.apply("nginx-exporter:1"), None);
        let renamed = Image {
            name: "nginx".to_owned(),
            new_name: "mirror/nginx".to_owned(),
            new_tag: String::new(),
            digest: String::new(),
        };
        assert_eq!(
            renamed.apply("nginx@sha256:ab"),
            Some("mirror/nginx@sha256:ab".to_owned())
        );
    }
}
