//! Packages on disk: the Kptfile model and its validation, the package tree,
//! `.krmignore`, and the kyaml-compatible package reader and writer.

pub(crate) mod gostruct;
pub mod kptfile;
pub mod krmignore;
pub mod reader;
pub mod tree;
pub mod writer;
