//! One resource's part of a decomposed builtin run (see `per_item`): what
//! each decomposable builtin returns per resource, and reduces into the
//! whole-list run's results.

/// One resource's part of a decomposed run's results.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Partial {
    /// The resource makes the list need the whole-list run.
    pub(crate) whole_list: bool,
    /// The function worked on it (it was not skipped as local config).
    pub(crate) worked: bool,
    /// What the function counts on it (values changed, labels set).
    pub(crate) count: u64,
    /// Values the function reports as a set (old namespaces).
    pub(crate) values: Vec<String>,
}

impl Partial {
    /// The part of a resource the function cannot take alone.
    pub(crate) fn whole_list() -> Partial {
        Partial {
            whole_list: true,
            ..Partial::default()
        }
    }
}
