//! go-yaml v3's guard against alias bombs: a few hundred bytes of nested
//! aliases can stand for billions of nodes once expanded. Every place that
//! expands aliases into copies (Starlark's values, layering's values)
//! counts what it builds here and stops where go-yaml's decoder stops.

/// go-yaml's error text.
pub const EXCESSIVE_ALIASING: &str = "yaml: document contains excessive aliasing";

/// Nodes built so far, and how many of them through an alias (go-yaml's
/// `decodeCount` and `aliasCount`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct AliasBudget {
    decoded: usize,
    aliased: usize,
}

impl AliasBudget {
    /// Counts `nodes` more built nodes, `via_alias` when they are an
    /// alias's copy; fails with [`EXCESSIVE_ALIASING`] once aliasing
    /// outgrows go-yaml's allowed ratio.
    pub fn count(&mut self, nodes: usize, via_alias: bool) -> Result<(), &'static str> {
        self.decoded = self.decoded.saturating_add(nodes);
        if via_alias {
            self.aliased = self.aliased.saturating_add(nodes);
        }
        let excessive = self.aliased > 100
            && self.decoded > 1000
            && self.aliased as f64 / self.decoded as f64 > allowed_alias_ratio(self.decoded);
        if excessive {
            Err(EXCESSIVE_ALIASING)
        } else {
            Ok(())
        }
    }
}

/// go-yaml v3's `allowedAliasRatio`: up to 400,000 decoded nodes almost
/// any aliasing is fine, from 4,000,000 on at most 10%, linear between.
fn allowed_alias_ratio(decoded: usize) -> f64 {
    const LOW: f64 = 400_000.0;
    const HIGH: f64 = 4_000_000.0;
    let decoded = decoded as f64;
    if decoded <= LOW {
        0.99
    } else if decoded >= HIGH {
        0.10
    } else {
        0.99 - 0.89 * ((decoded - LOW) / (HIGH - LOW))
    }
}

#[cfg(test)]
mod tests {
    use super::{AliasBudget, EXCESSIVE_ALIASING};

    #[test]
    fn modest_aliasing_passes_and_a_bomb_stops() {
        let mut budget = AliasBudget::default();
        assert_eq!(budget.count(2_000, false), Ok(()));
        assert_eq!(budget.count(1_000, true), Ok(()));
        let mut bomb = AliasBudget::default();
        assert_eq!(bomb.count(50, false), Ok(()));
        let mut result = Ok(());
        for _ in 0..10_000 {
            result = bomb.count(1_000, true);
            if result.is_err() {
                break;
            }
        }
        assert_eq!(result, Err(EXCESSIVE_ALIASING));
    }
}
