//! Hydration: running Kptfile pipelines over a package tree in depth-first
//! or breadth-first order, producing a render outcome without touching disk.
