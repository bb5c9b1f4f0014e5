//! Scheduling levels of the package DAG (Kahn's algorithm): level 0 holds
//! the nodes with no prerequisites, level k the nodes whose prerequisites
//! are all in earlier levels. The nodes of one level are independent and may
//! run in parallel; within a level they are sorted, so any output built by
//! reading results back level by level is deterministic.
//!
//! A cycle is an error value naming the whole path, never a panic. Not yet
//! wired into hydrate.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Display;

/// The prerequisites form a cycle.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error, miette::Diagnostic)]
#[error("dependency cycle: {}", path.join(" -> "))]
#[diagnostic(code(krender::engine::cycle))]
pub struct CycleError {
    /// The nodes of one cycle, first node repeated at the end (`a -> b -> a`).
    pub path: Vec<String>,
}

/// Why a graph could not be levelled.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error, miette::Diagnostic)]
pub enum LevelsError {
    /// The graph has a cycle.
    #[error(transparent)]
    #[diagnostic(transparent)]
    Cycle(#[from] CycleError),
    /// A node names a prerequisite that is not a node.
    #[error("{node} depends on unknown {prerequisite}")]
    #[diagnostic(code(krender::engine::unknown_node))]
    UnknownNode {
        /// The node.
        node: String,
        /// The missing prerequisite.
        prerequisite: String,
    },
}

/// Levels of `prerequisites`, which maps every node to the nodes that must
/// run before it (for DFS rendering: a package's subpackages; for BFS: its
/// parent). Every node must be a key.
pub fn levels<N: Ord + Clone + Display>(
    prerequisites: &BTreeMap<N, Vec<N>>,
) -> Result<Vec<Vec<N>>, LevelsError> {
    let mut remaining: BTreeMap<&N, usize> = BTreeMap::new();
    let mut dependents: BTreeMap<&N, Vec<&N>> = BTreeMap::new();
    for (node, before) in prerequisites {
        // Duplicate edges count once.
        let before: BTreeSet<&N> = before.iter().collect();
        for prerequisite in &before {
            if !prerequisites.contains_key(*prerequisite) {
                return Err(LevelsError::UnknownNode {
                    node: node.to_string(),
                    prerequisite: prerequisite.to_string(),
                });
            }
            dependents.entry(*prerequisite).or_default().push(node);
        }
        remaining.insert(node, before.len());
    }
    let mut result = Vec::new();
    let mut ready: Vec<&N> = remaining
        .iter()
        .filter(|(_, count)| **count == 0)
        .map(|(node, _)| *node)
        .collect();
    while !ready.is_empty() {
        for node in &ready {
            remaining.remove(*node);
        }
        let mut next = BTreeSet::new();
        for node in &ready {
            for dependent in dependents.get(*node).into_iter().flatten() {
                if let Some(count) = remaining.get_mut(*dependent) {
                    *count -= 1;
                    if *count == 0 {
                        next.insert(*dependent);
                    }
                }
            }
        }
        result.push(ready.iter().map(|node| (*node).clone()).collect());
        ready = next.into_iter().collect();
    }
    if remaining.is_empty() {
        return Ok(result);
    }
    Err(find_cycle(prerequisites, &remaining.keys().copied().collect()).into())
}

/// Follows unfinished prerequisites from the smallest unfinished node until
/// a node repeats; every unfinished node has one, so this ends in a cycle.
fn find_cycle<N: Ord + Display>(
    prerequisites: &BTreeMap<N, Vec<N>>,
    unfinished: &BTreeSet<&N>,
) -> CycleError {
    let mut path: Vec<&N> = Vec::new();
    let mut current = unfinished.first().copied();
    while let Some(node) = current {
        if let Some(start) = path.iter().position(|seen| *seen == node) {
            let mut cycle: Vec<String> = path[start..].iter().map(ToString::to_string).collect();
            cycle.push(node.to_string());
            // Report from the prerequisite side: `a -> b` means a needs b.
            return CycleError { path: cycle };
        }
        path.push(node);
        current = prerequisites
            .get(node)
            .into_iter()
            .flatten()
            .filter(|next| unfinished.contains(next))
            .min();
    }
    CycleError {
        path: path.iter().map(ToString::to_string).collect(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn graph(
        edges: &[(&'static str, &[&'static str])],
    ) -> BTreeMap<&'static str, Vec<&'static str>> {
        edges
            .iter()
            .map(|(node, before)| (*node, before.to_vec()))
            .collect()
    }

    #[test]
    fn dfs_tree_runs_leaves_first_sorted_within_a_level() {
        // root needs its subpackages; b needs its own subpackage b/c.
        let dag = graph(&[
            ("root", &["b", "a"]),
            ("a", &[]),
            ("b", &["b/c"]),
            ("b/c", &[]),
            ("d", &[]),
        ]);
        assert_eq!(
            levels(&dag).unwrap(),
            vec![vec!["a", "b/c", "d"], vec!["b"], vec!["root"]]
        );
    }

    #[test]
    fn bfs_tree_runs_parents_first() {
        let dag = graph(&[
            ("root", &[]),
            ("a", &["root"]),
            ("b", &["root"]),
            ("b/c", &["b"]),
        ]);
        assert_eq!(
            levels(&dag).unwrap(),
            vec![vec!["root"], vec!["a", "b"], vec!["b/c"]]
        );
    }

    #[test]
    fn diamond_and_duplicate_edges() {
        let dag = graph(&[
            ("a", &[]),
            ("b", &["a", "a"]),
            ("c", &["a"]),
            ("d", &["b", "c"]),
        ]);
        assert_eq!(
            levels(&dag).unwrap(),
            vec![vec!["a"], vec!["b", "c"], vec!["d"]]
        );
    }

    #[test]
    fn empty_graph_has_no_levels() {
        assert_eq!(
            levels::<&str>(&BTreeMap::new()).unwrap(),
            Vec::<Vec<&str>>::new()
        );
    }

    #[test]
    fn cycle_is_reported_with_its_path() {
        let dag = graph(&[
            ("a", &["b"]),
            ("b", &["c"]),
            ("c", &["a"]),
            ("x", &[]),
            ("y", &["a"]),
        ]);
        let error = levels(&dag).unwrap_err();
        assert_eq!(error.to_string(), "dependency cycle: a -> b -> c -> a");
    }

    #[test]
    fn self_loop_is_a_cycle() {
        let dag = graph(&[("a", &["a"])]);
        assert_eq!(
            levels(&dag).unwrap_err().to_string(),
            "dependency cycle: a -> a"
        );
    }

    #[test]
    fn unknown_prerequisite_is_an_error() {
        let dag = graph(&[("a", &["ghost"])]);
        assert_eq!(
            levels(&dag).unwrap_err(),
            LevelsError::UnknownNode {
                node: "a".to_owned(),
                prerequisite: "ghost".to_owned()
            }
        );
    }
}
