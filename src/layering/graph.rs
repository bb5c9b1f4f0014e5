//! The dependency graph (spec §10): a document depends on its (effective)
//! parent and on its substitution sources. Kahn's algorithm groups the
//! documents into levels; every document's dependencies are in earlier
//! levels, so one level can be rendered in parallel. What Kahn cannot place
//! is in or behind a cycle, which is reported with the documents in it.

/// Levels of document indexes; each level in ascending index (input) order.
pub type Levels = Vec<Vec<usize>>;

/// Groups nodes `0..dependencies.len()` into levels, or returns one cycle
/// (node indexes, the first repeated at the end) when there is one.
/// `dependencies[node]` lists the nodes `node` needs first.
pub fn level(dependencies: &[Vec<usize>]) -> Result<Levels, Vec<usize>> {
    let n_nodes = dependencies.len();
    let mut dependants: Vec<Vec<usize>> = vec![Vec::new(); n_nodes];
    let mut pending: Vec<usize> = vec![0; n_nodes];
    for (node, needs) in dependencies.iter().enumerate() {
        for &needed in needs {
            dependants[needed].push(node);
            pending[node] += 1;
        }
    }
    let mut levels: Levels = Vec::new();
    let mut current: Vec<usize> = (0..n_nodes).filter(|&node| pending[node] == 0).collect();
    let mut placed = 0;
    while !current.is_empty() {
        placed += current.len();
        let mut next = Vec::new();
        for &node in &current {
            for &dependant in &dependants[node] {
                pending[dependant] -= 1;
                if pending[dependant] == 0 {
                    next.push(dependant);
                }
            }
        }
        next.sort_unstable();
        levels.push(std::mem::replace(&mut current, next));
    }
    if placed == n_nodes {
        return Ok(levels);
    }
    Err(find_cycle(dependencies, &pending))
}

/// Follows unplaced dependencies from the first unplaced node until a node
/// repeats. Every unplaced node has an unplaced dependency, so this ends.
fn find_cycle(dependencies: &[Vec<usize>], pending: &[usize]) -> Vec<usize> {
    let Some(start) = (0..pending.len()).find(|&node| pending[node] > 0) else {
        return Vec::new();
    };
    let mut position = vec![usize::MAX; pending.len()];
    let mut path = Vec::new();
    let mut node = start;
    loop {
        if position[node] != usize::MAX {
            let mut cycle = path[position[node]..].to_vec();
            cycle.push(node);
            return cycle;
        }
        position[node] = path.len();
        path.push(node);
        match dependencies[node]
            .iter()
            .copied()
            .find(|&needed| pending[needed] > 0)
        {
            Some(next) => node = next,
            None => return path,
        }
    }
}

/// Each node's position in Deckhand's rendering order
/// (`DocumentLayering._topologically_sort_documents`): a networkx 3
/// `DiGraph` gets an edge from each document to each of its dependencies in
/// `edges` order (documents in input order), `topological_sort` (Kahn by
/// generations: in-degree-0 nodes in node-insertion order, their successors
/// in edge-insertion order) is reversed, and the documents the graph never
/// saw follow in input order. The graph must be acyclic.
pub fn deckhand_ranks(edges: &[Vec<usize>]) -> Vec<usize> {
    let n_nodes = edges.len();
    let mut inserted = vec![false; n_nodes];
    let mut insertion = Vec::new();
    let mut successors: Vec<Vec<usize>> = vec![Vec::new(); n_nodes];
    let mut in_degree = vec![0usize; n_nodes];
    for (node, needs) in edges.iter().enumerate() {
        for &needed in needs {
            for endpoint in [node, needed] {
                if !inserted[endpoint] {
                    inserted[endpoint] = true;
                    insertion.push(endpoint);
                }
            }
            // networkx keeps one edge per pair, in its first position.
            if !successors[node].contains(&needed) {
                successors[node].push(needed);
                in_degree[needed] += 1;
            }
        }
    }
    let mut sorted = Vec::with_capacity(n_nodes);
    let mut generation: Vec<usize> = insertion
        .iter()
        .copied()
        .filter(|&node| in_degree[node] == 0)
        .collect();
    while !generation.is_empty() {
        let mut next = Vec::new();
        for &node in &generation {
            for &successor in &successors[node] {
                in_degree[successor] -= 1;
                if in_degree[successor] == 0 {
                    next.push(successor);
                }
            }
        }
        sorted.extend(std::mem::replace(&mut generation, next));
    }
    sorted.reverse();
    sorted.extend((0..n_nodes).filter(|&node| !inserted[node]));
    let mut ranks = vec![usize::MAX; n_nodes];
    for (rank, node) in sorted.into_iter().enumerate() {
        ranks[node] = rank;
    }
    ranks
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Hand-run networkx 3.4: `g.add_edge(1, 0); g.add_edge(2, 1);
    /// g.add_edge(4, 0); g.add_edge(4, 3)` gives generations [2, 4],
    /// [1, 3], [0]; reversed: 0 3 1 4 2, then the unseen 5.
    #[test]
    fn deckhand_order_is_networkx_reversed_then_the_rest() {
        let edges = vec![vec![], vec![0], vec![1], vec![], vec![0, 3], vec![]];
        let ranks = deckhand_ranks(&edges);
        let mut order: Vec<usize> = (0..edges.len()).collect();
        order.sort_by_key(|&node| ranks[node]);
        assert_eq!(order, vec![0, 3, 1, 4, 2, 5]);
    }

    #[test]
    fn levels_follow_dependencies() {
        // 0 <- 1 <- 2, 3 alone, 4 needs 0 and 3.
        let deps = vec![vec![], vec![0], vec![1], vec![], vec![0, 3]];
        assert_eq!(level(&deps), Ok(vec![vec![0, 3], vec![1, 4], vec![2]]));
    }

    #[test]
    fn cycles_are_reported_with_their_nodes() {
        let deps = vec![vec![], vec![2], vec![3], vec![1], vec![1]];
        assert_eq!(level(&deps), Err(vec![1, 2, 3, 1]));
        assert_eq!(level(&[vec![0]]), Err(vec![0, 0]));
    }
}
