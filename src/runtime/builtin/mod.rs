//! In-process replacements for the common catalog functions
//! (`ghcr.io/kptdev/krm-functions-catalog/<name>`), each behaving like its
//! container image at the byte level: it parses the ResourceList kpt wrote,
//! edits the node tree with the function's own conventions, and writes the
//! output list as the function's SDK would (`sdk`).
//!
//! One module per function; this module maps image names to them and
//! implements [`Evaluator`] for the chain in `runtime::chain`.

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::time::{Duration, Instant};

use super::{EvalError, Evaluator, Executor, FunctionRequest, FunctionResponse, FunctionTarget};
use crate::yaml::node::Node;

pub(crate) mod annotate_apply_time_mutations;
pub(crate) mod apply_replacements;
pub(crate) mod apply_setters;
pub(crate) mod bind;
pub(crate) mod create_setters;
pub(crate) mod delete_annotations;
pub(crate) mod enable_gcp_services;
pub(crate) mod ensure_name_substring;
pub(crate) mod fix;
pub(crate) mod format;
pub(crate) mod gatekeeper;
pub(crate) mod generate_folders;
pub(crate) mod generate_kpt_pkg_docs;
pub(crate) mod goyaml;
pub(crate) mod jsonschema;
pub(crate) mod jsyaml;
pub(crate) mod kube_object;
pub(crate) mod kubeconform;
pub(crate) mod kubeval;
pub(crate) mod list_setters;
pub(crate) mod openapi;
pub(crate) mod partial;
pub(crate) mod per_item;
pub(crate) mod remove_local_config_resources;
pub(crate) mod rename;
pub(crate) mod sdk;
pub(crate) mod search_replace;
pub(crate) mod set_annotations;
pub(crate) mod set_enforcement_action;
pub(crate) mod set_gcp_resource_ids;
pub(crate) mod set_image;
pub(crate) mod set_labels;
pub(crate) mod set_name_prefix;
pub(crate) mod set_namespace;
pub(crate) mod set_project_id;
pub(crate) mod starlark;
pub(crate) mod upsert_resource;

pub use sdk::NativeOutcome;
use sdk::{Outcome, ResourceList};

/// kpt's default image prefix for catalog functions.
pub const DEFAULT_IMAGE_PREFIX: &str = "ghcr.io/kptdev/krm-functions-catalog/";

/// Older prefixes under which the same catalog functions were published.
const LEGACY_IMAGE_PREFIXES: &[&str] = &["gcr.io/kpt-fn/", "ghcr.io/gcr.io/kpt-fn/"];

/// The catalog's name for an image name (no tag): the name under the
/// default or a legacy catalog prefix, or a bare name; `None` for any other
/// registry's image. The catalog's `wasm/` builds keep that prefix.
pub fn catalog_name(name: &str) -> Option<&str> {
    let bare = std::iter::once(DEFAULT_IMAGE_PREFIX)
        .chain(LEGACY_IMAGE_PREFIXES.iter().copied())
        .find_map(|prefix| name.strip_prefix(prefix))
        .unwrap_or(name);
    let function = bare.strip_prefix("wasm/").unwrap_or(bare);
    (!function.is_empty() && !function.contains('/')).then_some(bare)
}

/// Why `image`'s builtin does not serve its tag, as the error line a user
/// sees: the catalog changed the function between minor versions and the
/// builtin follows another one (see [`Builtin::for_image`]). `None` when the
/// image has no builtin, or its tag is served.
pub fn refused_tag(image: &str) -> Option<String> {
    let builtin = Builtin::named_by(image)?;
    let (_, rest) = split_image(image);
    let tag = rest.strip_prefix(':')?;
    let tag = tag.split('@').next().unwrap_or(tag);
    let mut numbers = tag.strip_prefix('v')?.split('.');
    let version: (u32, u32) = (numbers.next()?.parse().ok()?, numbers.next()?.parse().ok()?);
    let (_, why) = builtin
        .other_versions()
        .iter()
        .find(|(minor, _)| *minor == version)?;
    Some(format!(
        "builtin {} does not implement tag {tag} ({why}); map it in render.toml to an executable or a container image",
        builtin.name()
    ))
}

/// The builtin a misspelled catalog image most likely meant: one whose
/// name is within two edits of the image's catalog name, when the image is
/// not itself a builtin's.
pub fn suggestion(image: &str) -> Option<Builtin> {
    if Builtin::named_by(image).is_some() {
        return None;
    }
    let (name, _) = split_image(image);
    let bare = catalog_name(name)?;
    let bare = bare.strip_prefix("wasm/").unwrap_or(bare);
    Builtin::ALL
        .into_iter()
        .map(|builtin| (strsim::levenshtein(bare, builtin.name()), builtin))
        .filter(|(distance, _)| *distance <= 2)
        .min()
        .map(|(_, builtin)| builtin)
}

/// A builtin catalog function.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Builtin {
    /// `set-namespace`
    SetNamespace,
    /// `set-labels`
    SetLabels,
    /// `set-annotations`
    SetAnnotations,
    /// `starlark`
    Starlark,
    /// `search-replace`
    SearchReplace,
    /// `apply-replacements`
    ApplyReplacements,
    /// `apply-setters`
    ApplySetters,
    /// `no-op`
    NoOp,
    /// `drop-comments`
    DropComments,
    /// `set-image`
    SetImage,
    /// `kubeconform`
    Kubeconform,
    /// `gatekeeper`
    Gatekeeper,
    /// `remove-local-config-resources`
    RemoveLocalConfigResources,
    /// `set-enforcement-action`
    SetEnforcementAction,
    /// `list-setters`
    ListSetters,
    /// `create-setters`
    CreateSetters,
    /// `upsert-resource`
    UpsertResource,
    /// `set-gcp-resource-ids`
    SetGcpResourceIds,
    /// `set-project-id`
    SetProjectId,
    /// `delete-annotations`
    DeleteAnnotations,
    /// `annotate-apply-time-mutations`
    AnnotateApplyTimeMutations,
    /// `kubeval`
    Kubeval,
    /// `enable-gcp-services`
    EnableGcpServices,
    /// `generate-folders`
    GenerateFolders,
    /// `ensure-name-substring`
    EnsureNameSubstring,
    /// `generate-kpt-pkg-docs`
    GenerateKptPkgDocs,
    /// `format`
    Format,
    /// `fix`
    Fix,
    /// `bind`
    Bind,
    /// `set-name-prefix`
    SetNamePrefix,
}

impl Builtin {
    /// Every builtin, in a fixed order.
    pub const ALL: [Builtin; 30] = [
        Builtin::SetNamespace,
        Builtin::SetLabels,
        Builtin::SetAnnotations,
        Builtin::Starlark,
        Builtin::SearchReplace,
        Builtin::ApplyReplacements,
        Builtin::ApplySetters,
        Builtin::NoOp,
        Builtin::DropComments,
        Builtin::SetImage,
        Builtin::Kubeconform,
        Builtin::Gatekeeper,
        Builtin::RemoveLocalConfigResources,
        Builtin::SetEnforcementAction,
        Builtin::ListSetters,
        Builtin::CreateSetters,
        Builtin::UpsertResource,
        Builtin::SetGcpResourceIds,
        Builtin::SetProjectId,
        Builtin::DeleteAnnotations,
        Builtin::AnnotateApplyTimeMutations,
        Builtin::Kubeval,
        Builtin::EnableGcpServices,
        Builtin::GenerateFolders,
        Builtin::EnsureNameSubstring,
        Builtin::GenerateKptPkgDocs,
        Builtin::Format,
        Builtin::Fix,
        Builtin::Bind,
        Builtin::SetNamePrefix,
    ];

    /// The catalog name (the image name without prefix and tag).
    pub fn name(self) -> &'static str {
        match self {
            Builtin::SetNamespace => "set-namespace",
            Builtin::SetLabels => "set-labels",
            Builtin::SetAnnotations => "set-annotations",
            Builtin::Starlark => "starlark",
            Builtin::SearchReplace => "search-replace",
            Builtin::ApplyReplacements => "apply-replacements",
            Builtin::ApplySetters => "apply-setters",
            Builtin::NoOp => "no-op",
            Builtin::DropComments => "drop-comments",
            Builtin::SetImage => "set-image",
            Builtin::Kubeconform => "kubeconform",
            Builtin::Gatekeeper => "gatekeeper",
            Builtin::RemoveLocalConfigResources => "remove-local-config-resources",
            Builtin::SetEnforcementAction => "set-enforcement-action",
            Builtin::ListSetters => "list-setters",
            Builtin::CreateSetters => "create-setters",
            Builtin::UpsertResource => "upsert-resource",
            Builtin::SetGcpResourceIds => "set-gcp-resource-ids",
            Builtin::SetProjectId => "set-project-id",
            Builtin::DeleteAnnotations => "delete-annotations",
            Builtin::AnnotateApplyTimeMutations => "annotate-apply-time-mutations",
            Builtin::Kubeval => "kubeval",
            Builtin::EnableGcpServices => "enable-gcp-services",
            Builtin::GenerateFolders => "generate-folders",
            Builtin::EnsureNameSubstring => "ensure-name-substring",
            Builtin::GenerateKptPkgDocs => "generate-kpt-pkg-docs",
            Builtin::Format => "format",
            Builtin::Fix => "fix",
            Builtin::Bind => "bind",
            Builtin::SetNamePrefix => "set-name-prefix",
        }
    }

    /// The builtin for a catalog name (no prefix, no tag).
    pub fn from_name(name: &str) -> Option<Builtin> {
        Builtin::ALL
            .into_iter()
            .find(|builtin| builtin.name() == name)
    }

    /// The builtin implementing `image`, if any: the image must be a catalog
    /// image (default or legacy prefix, or a bare name; the catalog's `wasm/`
    /// builds too) whose tag the builtin serves ([`refused_tag`]): no tag,
    /// `latest`, a digest, or a version whose behaviour it follows.
    pub fn for_image(image: &str) -> Option<Builtin> {
        Builtin::named_by(image).filter(|_| refused_tag(image).is_none())
    }

    /// The builtin of `image`'s catalog name, whatever its tag.
    fn named_by(image: &str) -> Option<Builtin> {
        let (name, _) = split_image(image);
        // The catalog also publishes wasm builds of the same functions
        // (`wasm/set-namespace`); they behave like the container images.
        let bare = catalog_name(name)?;
        Builtin::from_name(bare.strip_prefix("wasm/").unwrap_or(bare))
    }

    /// The catalog's minor versions (`(major, minor)`) whose behaviour this
    /// builtin does not follow, and how they differ. Builtins follow the
    /// newest line; older minors that changed behaviour are listed here (the
    /// catalog declares every minor bump before 1.0 breaking). A minor newer
    /// than any known is served: it cannot be told apart from one that only
    /// fixed bugs.
    fn other_versions(self) -> &'static [((u32, u32), &'static str)] {
        match self {
            Builtin::SetNamespace => &[
                (
                    (0, 1),
                    "v0.1 adds or replaces the namespace of every namespaced resource and ignores depends-on annotations",
                ),
                (
                    (0, 2),
                    "v0.2 adds or replaces the namespace of every namespaced resource",
                ),
                (
                    (0, 3),
                    "v0.3 only replaces existing namespaces, with other modes and messages",
                ),
            ],
            Builtin::SetLabels => &[(
                (0, 1),
                "v0.1 takes additionalLabelFields and reports one result per field",
            )],
            Builtin::Starlark => &[
                (
                    (0, 1),
                    "v0.1 runs only StarlarkRun sources and drops StarlarkRun items",
                ),
                ((0, 2), "v0.2 cannot load() libraries"),
            ],
            Builtin::Kubeval => &[
                ((0, 1), "v0.1 is the kubeval library, with other messages"),
                ((0, 2), "v0.2 is the kubeval library, with other messages"),
            ],
            Builtin::Gatekeeper => &[((0, 1), "v0.1 runs an older Gatekeeper engine")],
            Builtin::EnsureNameSubstring => {
                &[((0, 1), "v0.1 leaves depends-on annotations unchanged")]
            }
            Builtin::SetProjectId => &[(
                (0, 1),
                "v0.1 adds apply-setters:v0.1 and reads only the root Kptfile",
            )],
            Builtin::Fix => &[(
                (0, 1),
                "v0.1 migrates to kpt.dev/v1alpha2 with the setters inline in a configMap",
            )],
            _ => &[],
        }
    }

    /// Runs the function on a parsed input.
    fn run(self, input: ResourceList, deadline: Option<Instant>) -> Outcome {
        match self {
            Builtin::SetNamespace => set_namespace::run(input),
            Builtin::SetLabels => set_labels::run(input),
            Builtin::SetAnnotations => set_annotations::run(input),
            Builtin::Starlark => starlark::run(
                input,
                starlark::Limits {
                    deadline,
                    ..starlark::Limits::default()
                },
            ),
            Builtin::SearchReplace => search_replace::run(input),
            Builtin::ApplyReplacements => apply_replacements::run(input),
            Builtin::ApplySetters => apply_setters::run(input),
            Builtin::SetImage => set_image::run(input),
            Builtin::Kubeconform => kubeconform::run(input),
            Builtin::Gatekeeper => gatekeeper::run(input),
            Builtin::RemoveLocalConfigResources => remove_local_config_resources::run(input),
            Builtin::SetEnforcementAction => set_enforcement_action::run(input),
            Builtin::ListSetters => list_setters::run(input),
            Builtin::CreateSetters => create_setters::run(input),
            Builtin::UpsertResource => upsert_resource::run(input),
            Builtin::SetGcpResourceIds => set_gcp_resource_ids::run(input),
            Builtin::SetProjectId => set_project_id::run(input),
            Builtin::DeleteAnnotations => delete_annotations::run(input),
            Builtin::AnnotateApplyTimeMutations => annotate_apply_time_mutations::run(input),
            Builtin::Kubeval => kubeval::run(input),
            Builtin::EnableGcpServices => enable_gcp_services::run(input),
            Builtin::GenerateFolders => generate_folders::run(input),
            Builtin::EnsureNameSubstring => ensure_name_substring::run(input),
            Builtin::GenerateKptPkgDocs => generate_kpt_pkg_docs::run(input),
            Builtin::Format => format::run(input),
            Builtin::Fix => fix::run(input),
            Builtin::Bind => bind::run(input),
            Builtin::SetNamePrefix => set_name_prefix::run(input),
            // no-op writes its input back unchanged; drop-comments strips
            // comments, which the orchestrator copies back from its input, so
            // for kpt both are the identity (spec §8).
            Builtin::NoOp | Builtin::DropComments => Outcome::kyaml(input, Vec::new()),
        }
    }

    /// True for builtins whose result depends only on the nodes they are
    /// given, so the hydrator may hand them nodes instead of wire bytes
    /// ([`Builtin::run_native`]). Starlark stays on the wire: it runs user
    /// code, has a deadline, and is worth caching.
    pub fn runs_native(self) -> bool {
        !matches!(self, Builtin::Starlark)
    }

    /// True for native builtins whose edits leave nothing for the host's
    /// comment and key-order restore to do: they set scalar values keeping
    /// the replaced node's comments (`sdk::replace_with_string`), append
    /// new keys, and never move, drop or rebuild a subtree. (apply-setters
    /// is not one: an array setter rebuilds the sequence, and the restore
    /// copies comments back onto elements whose text did not change.) The hydrator then
    /// hands them the resources themselves instead of copies.
    /// `tests/cases/native.rs` checks this against the wire on every
    /// shared and fixture package.
    pub fn edits_in_place(self) -> bool {
        matches!(
            self,
            Builtin::SetNamespace
                | Builtin::SetLabels
                | Builtin::SetAnnotations
                | Builtin::SetImage
                | Builtin::Kubeconform
                | Builtin::Gatekeeper
                | Builtin::NoOp
                | Builtin::DropComments
        )
    }

    /// True for builtins that edit resources in place ([`Builtin::edits_in_place`])
    /// and never read, write or copy an annotation the host uses for its
    /// bookkeeping (path, index, their legacy forms, the ids and the
    /// migration id): what they do to a resource does not depend on those
    /// annotations, and leaves them as they were. The host may then skip
    /// adding and removing its per-call ids around them (see
    /// `runtime::function_filter`). set-annotations is not one (it may write
    /// any annotation), nor are the validators (their policies and messages
    /// see whole resources).
    pub fn ignores_bookkeeping(self) -> bool {
        matches!(
            self,
            Builtin::SetNamespace | Builtin::SetLabels | Builtin::SetImage | Builtin::NoOp
        )
    }

    /// Runs the function on `items` (the root mappings the host would write
    /// to the wire, ids included) and returns what the host would read back
    /// from its output: the items in output order, the parsed `results`,
    /// stderr and the exit code. The function config (small) still takes
    /// the round trip, so the function reads it exactly as on the wire.
    pub fn run_native(
        self,
        items: Vec<Node>,
        function_config: Option<&Node>,
        timeout: Duration,
    ) -> Result<NativeOutcome, EvalError> {
        let started = Instant::now();
        // The config as the function would read it from the wire.
        let function_config = self.wire_config(function_config)?;
        let input = ResourceList {
            items,
            function_config,
        };
        let outcome = catch_unwind(AssertUnwindSafe(|| self.run(input, None)))
            .map_err(|_| EvalError::ExecutionFailed(format!("builtin {} panicked", self.name())))?;
        if started.elapsed() > timeout {
            return Err(EvalError::TimedOut(timeout));
        }
        Ok(outcome.into_native())
    }

    /// Runs the function on the ResourceList bytes kpt would write to the
    /// image's stdin and returns what the image would write. Long-running
    /// functions (starlark) stop at `deadline`.
    pub fn evaluate_bytes(self, input: &[u8], deadline: Option<Instant>) -> FunctionResponse {
        let input = match ResourceList::parse(input) {
            Ok(input) => input,
            Err(message) => {
                return FunctionResponse {
                    stdout: Vec::new(),
                    stderr: format!("failed to evaluate function: {message}").into_bytes(),
                    exit_code: 1,
                };
            }
        };
        self.run(input, deadline).into_response()
    }
}

/// Splits `name[:tag][@digest]` into the name and the rest (tag or digest
/// including its separator, or empty). A `:` inside the registry host part
/// (`host:5000/x`) is not a tag separator.
pub fn split_image(image: &str) -> (&str, &str) {
    let without_digest_end = image.find('@').unwrap_or(image.len());
    let last_slash = image[..without_digest_end].rfind('/').map_or(0, |i| i + 1);
    let tag_start = image[last_slash..without_digest_end]
        .find(':')
        .map(|i| i + last_slash)
        .unwrap_or(without_digest_end);
    image.split_at(tag_start)
}

/// The evaluator running builtin catalog functions in process.
#[derive(Clone, Debug, Default)]
pub struct BuiltinEvaluator {
    /// When set, only these functions run in process (render.toml pins);
    /// `None` means every builtin.
    pub enabled: Option<Vec<Builtin>>,
}

impl Evaluator for BuiltinEvaluator {
    fn evaluate(&self, request: &FunctionRequest<'_>) -> Result<FunctionResponse, EvalError> {
        let FunctionTarget::Image(image) = request.target else {
            return Err(EvalError::NotFound(
                "builtins only implement images".to_owned(),
            ));
        };
        let builtin = Builtin::for_image(image)
            .filter(|builtin| {
                self.enabled
                    .as_ref()
                    .is_none_or(|enabled| enabled.contains(builtin))
            })
            .ok_or_else(|| EvalError::NotFound(format!("no builtin implements {image}")))?;
        let started = Instant::now();
        let deadline = started.checked_add(request.timeout);
        // A builtin bug must not take the whole render down; the Go SDK also
        // turns a panicking function into a failed function.
        let response = catch_unwind(AssertUnwindSafe(|| {
            builtin.evaluate_bytes(request.input, deadline)
        }))
        .map_err(|_| EvalError::ExecutionFailed(format!("builtin {} panicked", builtin.name())))?;
        if started.elapsed() > request.timeout {
            return Err(EvalError::TimedOut(request.timeout));
        }
        Ok(response)
    }

    fn native(&self, target: FunctionTarget<'_>) -> Option<Builtin> {
        self.enabled_for(target)
            .filter(|builtin| builtin.runs_native())
    }

    fn executor(&self, target: FunctionTarget<'_>) -> Option<Executor> {
        self.enabled_for(target)
            .map(|builtin| Executor::Builtin(builtin.name()))
    }
}

impl BuiltinEvaluator {
    /// The builtin that answers `target`, if one is enabled.
    fn enabled_for(&self, target: FunctionTarget<'_>) -> Option<Builtin> {
        let FunctionTarget::Image(image) = target else {
            return None;
        };
        Builtin::for_image(image).filter(|builtin| {
            self.enabled
                .as_ref()
                .is_none_or(|enabled| enabled.contains(builtin))
        })
    }
}

#[cfg(test)]
mod tests {
    /// A builtin serves no tag, `latest`, digests and the minors whose
    /// behaviour it follows; other minors are refused with the reason.
    #[test]
    fn builtins_serve_only_the_versions_they_follow() {
        use super::{Builtin, refused_tag};
        for image in [
            "gcr.io/kpt-fn/set-namespace",
            "gcr.io/kpt-fn/set-namespace:latest",
            "gcr.io/kpt-fn/set-namespace:v0.4.1",
            "ghcr.io/kptdev/krm-functions-catalog/set-namespace:v0.4",
            "gcr.io/kpt-fn/set-namespace@sha256:0123",
            "gcr.io/kpt-fn/set-labels:v0.2.5",
            "gcr.io/kpt-fn/starlark:v0.3.0",
            "gcr.io/kpt-fn/set-namespace:v0.5.1",
            "gcr.io/kpt-fn/apply-setters:v0.1.1",
            "gcr.io/kpt-fn/search-replace:v0.1",
            "gcr.io/kpt-fn/ensure-name-substring:v0.2.0",
        ] {
            assert_eq!(refused_tag(image), None, "{image}");
            assert!(Builtin::for_image(image).is_some(), "{image}");
        }
        for (image, says) in [
            (
                "gcr.io/kpt-fn/set-namespace:v0.3.4",
                "v0.3 only replaces existing namespaces",
            ),
            ("gcr.io/kpt-fn/set-namespace:v0.2", "v0.2 adds or replaces"),
            ("gcr.io/kpt-fn/set-labels:v0.1.5", "additionalLabelFields"),
            ("gcr.io/kpt-fn/starlark:v0.2.2", "cannot load()"),
            ("gcr.io/kpt-fn/kubeval:v0.2", "kubeval library"),
            ("gcr.io/kpt-fn/ensure-name-substring:v0.1.1", "depends-on"),
        ] {
            let refused = refused_tag(image).unwrap_or_default();
            assert!(refused.contains(says), "{image}: {refused}");
            assert!(refused.contains("map it in render.toml"), "{refused}");
            assert_eq!(Builtin::for_image(image), None, "{image}");
        }
        assert_eq!(super::suggestion("gcr.io/kpt-fn/set-namespace:v0.3"), None);
    }

    #[test]
    fn a_near_miss_of_a_builtin_gets_a_suggestion() {
        for (image, meant) in [
            (
                "gcr.io/kpt-fn/set-namepsace:v0.1",
                Some(Builtin::SetNamespace),
            ),
            ("set-lables", Some(Builtin::SetLabels)),
            (
                "ghcr.io/kptdev/krm-functions-catalog/starlak:v0.5",
                Some(Builtin::Starlark),
            ),
            // A builtin itself, another registry, or nothing close: none.
            ("set-namespace:v0.4", None),
            ("example.com/set-namepsace:v1", None),
            ("render-helm-chart:v0.2", None),
        ] {
            assert_eq!(suggestion(image), meant, "{image}");
        }
    }

    use super::*;

    #[test]
    fn images_resolve_with_any_tag() {
        let cases = [
            (
                "ghcr.io/kptdev/krm-functions-catalog/set-namespace:latest",
                Some(Builtin::SetNamespace),
            ),
            (
                "ghcr.io/kptdev/krm-functions-catalog/set-labels:v0.2.5",
                Some(Builtin::SetLabels),
            ),
            (
                "ghcr.io/kptdev/krm-functions-catalog/no-op",
                Some(Builtin::NoOp),
            ),
            ("gcr.io/kpt-fn/starlark:v0.4", Some(Builtin::Starlark)),
            ("set-namespace:latest", Some(Builtin::SetNamespace)),
            (
                "ghcr.io/kptdev/krm-functions-catalog/wasm/set-namespace:v0.5.1",
                Some(Builtin::SetNamespace),
            ),
            (
                "ghcr.io/kptdev/krm-functions-catalog/not-exist:latest",
                None,
            ),
            ("example.com/set-namespace:latest", None),
            (
                "ghcr.io/kptdev/krm-functions-catalog/apply-setters@sha256:abc",
                Some(Builtin::ApplySetters),
            ),
        ];
        for (image, expected) in cases {
            assert_eq!(Builtin::for_image(image), expected, "{image}");
        }
    }

    #[test]
    fn split_image_ignores_registry_port() {
        assert_eq!(split_image("host:5000/fn:v1"), ("host:5000/fn", ":v1"));
        assert_eq!(split_image("fn"), ("fn", ""));
        assert_eq!(split_image("fn@sha256:1"), ("fn", "@sha256:1"));
    }
}
