//! Sharded renders: `fn render ROOT --shard K/N` runs only the K-th of N
//! balanced parts of a package tree and leaves the runs in the action cache
//! (and its remote); a final render of ROOT then runs only the packages
//! above the cut and takes the rest from the cache. Breadth-first, a
//! subtree's input is what the packages above it left, so every shard runs
//! those too (they are cached once one shard has), and the final render
//! finds everything cached.
//!
//! The cut is made of whole subtrees: a package's run needs its
//! subpackages' outputs, so a subtree is the smallest unit a machine can
//! render alone. Starting from the root's children, the largest subtree is
//! replaced by its children (its root joins the packages above the cut)
//! until every subtree holds at most a quarter of a shard's share, and the
//! subtrees are then dealt largest first to the least loaded shard. Every
//! shard computes the same plan from the same tree.

use std::fmt;
use std::str::FromStr;

/// `K/N`: this machine renders part K (1-based) of N.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ShardSpec {
    /// K, from 1.
    pub index: usize,
    /// N.
    pub count: usize,
}

impl FromStr for ShardSpec {
    type Err = String;

    fn from_str(text: &str) -> Result<ShardSpec, String> {
        let parsed = text.split_once('/').and_then(|(index, count)| {
            Some((index.trim().parse().ok()?, count.trim().parse().ok()?))
        });
        match parsed {
            Some((index, count)) if (1..=count).contains(&index) => Ok(ShardSpec { index, count }),
            _ => Err(format!(
                "--shard {text:?}: must be K/N with 1 <= K <= N (for example 2/4)"
            )),
        }
    }
}

impl fmt::Display for ShardSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.index, self.count)
    }
}

/// Where the cut goes, by package index (the root is index 0).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ShardPlan {
    /// The packages above the cut: the final render runs them.
    pub above: Vec<usize>,
    /// Per shard, the roots of its subtrees.
    pub subtrees: Vec<Vec<usize>>,
    /// Per shard, how many packages its subtrees hold.
    pub loads: Vec<usize>,
}

/// The plan for `count` shards of the tree whose package `i` has the
/// subpackages `children[i]` and, for tie-breaking, the name `names[i]`.
pub fn plan(children: &[Vec<usize>], names: &[String], count: usize) -> ShardPlan {
    let total = children.len();
    let mut sizes = vec![1usize; total];
    // Children come after their parent (BFS order), so a reverse pass
    // sums each subtree once.
    for parent in (0..total).rev() {
        let below: usize = children[parent]
            .iter()
            .filter_map(|&child| sizes.get(child))
            .sum();
        sizes[parent] += below;
    }
    let count = count.max(1);
    let limit = (total / (4 * count)).max(1);
    let mut above = Vec::new();
    let mut candidates: Vec<usize> = Vec::new();
    if total > 0 {
        above.push(0);
        candidates.extend(&children[0]);
    }
    loop {
        let largest = candidates
            .iter()
            .enumerate()
            .filter(|&(_, &package)| sizes[package] > limit && !children[package].is_empty())
            .max_by(|(_, a), (_, b)| {
                sizes[**a]
                    .cmp(&sizes[**b])
                    .then(names[**b].cmp(&names[**a]))
            })
            .map(|(position, _)| position);
        let Some(position) = largest else { break };
        let split = candidates.swap_remove(position);
        above.push(split);
        candidates.extend(&children[split]);
    }
    candidates.sort_by(|a, b| sizes[*b].cmp(&sizes[*a]).then(names[*a].cmp(&names[*b])));
    let mut subtrees = vec![Vec::new(); count];
    let mut loads = vec![0usize; count];
    for package in candidates {
        let lightest = (0..count)
            .min_by_key(|&shard| (loads[shard], shard))
            .unwrap_or(0);
        subtrees[lightest].push(package);
        loads[lightest] += sizes[package];
    }
    above.sort_unstable();
    ShardPlan {
        above,
        subtrees,
        loads,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A root with `fanout` children, each with `fanout` leaves.
    fn two_levels(fanout: usize) -> (Vec<Vec<usize>>, Vec<String>) {
        let mut children = vec![(1..=fanout).collect::<Vec<_>>()];
        let leaves_from = 1 + fanout;
        for child in 0..fanout {
            children.push(
                (0..fanout)
                    .map(|leaf| leaves_from + child * fanout + leaf)
                    .collect(),
            );
        }
        children.extend(std::iter::repeat_n(Vec::new(), fanout * fanout));
        let names = (0..children.len()).map(|i| format!("p{i:04}")).collect();
        (children, names)
    }

    #[test]
    fn every_package_is_in_one_place_and_the_shards_balance() {
        let (children, names) = two_levels(10);
        for count in [1, 2, 3, 4, 7] {
            let plan = plan(&children, &names, count);
            let mut seen = vec![0; children.len()];
            let mark = |package: usize, seen: &mut Vec<usize>| {
                let mut stack = vec![package];
                while let Some(p) = stack.pop() {
                    seen[p] += 1;
                    stack.extend(&children[p]);
                }
            };
            for subtree in plan.subtrees.iter().flatten() {
                mark(*subtree, &mut seen);
            }
            for &package in &plan.above {
                seen[package] += 1;
            }
            // Above-cut packages were counted with their subtrees' roots'
            // ancestors only once: each package is in exactly one place.
            assert!(seen.iter().all(|&n| n == 1), "{count}: {seen:?}");
            let (min, max) = (
                plan.loads.iter().min().copied().unwrap_or(0),
                plan.loads.iter().max().copied().unwrap_or(0),
            );
            assert!(max - min <= 10, "{count}: {:?}", plan.loads);
        }
    }

    #[test]
    fn the_plan_is_the_same_on_every_machine_and_specs_parse() {
        let (children, names) = two_levels(6);
        assert_eq!(plan(&children, &names, 4), plan(&children, &names, 4));
        assert_eq!("2/4".parse(), Ok(ShardSpec { index: 2, count: 4 }));
        for bad in ["0/4", "5/4", "x", "1/0", "2"] {
            assert!(bad.parse::<ShardSpec>().is_err(), "{bad}");
        }
    }
}
