//! Packages on disk: the Kptfile model and its validation, the package tree,
//! `.krmignore`, the kyaml-compatible package reader and writer, and the
//! atomic commit through which every write of package files goes.

pub mod commit;
pub(crate) mod gostruct;
pub mod kptfile;
pub mod krmignore;
pub mod reader;
pub mod tree;
pub mod writer;
