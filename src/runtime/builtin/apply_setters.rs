//! `apply_setters` (work in progress).

use super::sdk::{Outcome, ResourceList};

/// Runs the function on a parsed input.
pub(crate) fn run(input: ResourceList) -> Outcome {
    Outcome::kyaml(input, Vec::new())
}
