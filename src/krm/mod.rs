//! KRM resources and the ResourceList wire format of the function protocol
//! (`config.kubernetes.io/v1`), on top of the YAML node model.

pub mod comments;
pub mod order;
pub mod resource;
pub mod resource_list;
