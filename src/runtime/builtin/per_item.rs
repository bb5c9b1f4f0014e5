//! Builtins whose run over a list decomposes: one call per resource
//! (`map`, which edits the resource and returns its part of the results)
//! and a `reduce` of the parts into exactly the results the whole-list run
//! writes. The engine memoises the map per resource, so an ancestor that
//! runs again over a whole tree recomputes only the resources that
//! changed.
//!
//! A builtin decomposes only under the config and over the resources where
//! its work on one resource does not depend on the others: a part can say
//! so ([`Partial::whole_list`]), and the step then runs over the whole list
//! as before. `KRENDER_NATIVE=verify` (the `native::verify` tests in
//! `tests/cases/native.rs`) holds the decomposed run to the whole-list run.

pub(crate) use super::partial::Partial;
use super::sdk::{FnResult, ResourceList, results_node};
use super::{Builtin, set_labels, set_namespace};
use crate::runtime::EvalError;
use crate::yaml::node::Node;

/// A decomposed run of one builtin under one config.
pub(crate) enum ItemStep {
    /// set-namespace without a namespace matcher.
    SetNamespace(set_namespace::PerItem),
    /// set-labels with labels to set.
    SetLabels(set_labels::PerItem),
}

impl ItemStep {
    /// The decomposed form of `builtin` under `config` (as the step passes
    /// it: the config is read as the function would read it from the
    /// wire), when it has one.
    pub(crate) fn new(
        builtin: Builtin,
        config: Option<&Node>,
    ) -> Result<Option<ItemStep>, EvalError> {
        let config = builtin.wire_config(config)?;
        let config = config.as_ref();
        Ok(match builtin {
            Builtin::SetNamespace => {
                set_namespace::PerItem::new(config).map(ItemStep::SetNamespace)
            }
            Builtin::SetLabels => set_labels::PerItem::new(config).map(ItemStep::SetLabels),
            _ => None,
        })
    }

    /// Whether the function sorts its output as the kpt Go SDK does.
    pub(crate) fn sorts(&self) -> bool {
        match self {
            ItemStep::SetNamespace(_) | ItemStep::SetLabels(_) => true,
        }
    }

    /// The run's work on one resource (a root mapping), edited in place.
    pub(crate) fn map(&self, item: &mut Node) -> Partial {
        match self {
            ItemStep::SetNamespace(step) => step.map(item),
            ItemStep::SetLabels(step) => step.map(item),
        }
    }

    /// The part this step reports when it runs again on a resource its run
    /// made (whose part was `first`), when the step is declared idempotent:
    /// it then leaves the resource as it is. `KRENDER_NATIVE=verify` checks
    /// the declaration on the renders it verifies.
    pub(crate) fn again(&self, first: &Partial) -> Option<Partial> {
        if first.whole_list {
            return None;
        }
        Some(match self {
            // The namespaces are set: nothing changes, nothing is counted.
            ItemStep::SetNamespace(_) => Partial {
                worked: first.worked,
                ..Partial::default()
            },
            // Labels are counted where they are set, changed or not.
            ItemStep::SetLabels(_) => first.clone(),
        })
    }

    /// What the step writes, for telling whether two steps of a chain can
    /// undo each other's work (then running the chain again may change
    /// what the first run made).
    pub(crate) fn writes(&self) -> &'static str {
        match self {
            ItemStep::SetNamespace(_) => "namespaces",
            ItemStep::SetLabels(_) => "labels",
        }
    }

    /// The `results` node the whole-list run writes over resources whose
    /// parts are `partials` (none of which asks for the whole list).
    pub(crate) fn reduce<'p>(&self, partials: impl Iterator<Item = &'p Partial>) -> Option<Node> {
        let results: Vec<FnResult> = match self {
            ItemStep::SetNamespace(step) => step.reduce(partials),
            ItemStep::SetLabels(step) => step.reduce(partials),
        };
        results_node(&results, Vec::new())
    }
}

impl Builtin {
    /// The function config as the function reads it from the wire (cached:
    /// the same few configs recur in every package).
    pub(crate) fn wire_config(self, config: Option<&Node>) -> Result<Option<Node>, EvalError> {
        use super::sdk::RoundTrips;
        use crate::krm::resource_list::encode_function_input;
        static READ_BACK: RoundTrips<Result<Option<Node>, String>> = RoundTrips::new();
        let wire = encode_function_input(&[], config);
        READ_BACK
            .parse(&wire, |text| {
                ResourceList::parse(text.as_bytes()).map(|list| list.function_config)
            })
            .map_err(|message| EvalError::System(format!("function config: {message}")))
    }
}
