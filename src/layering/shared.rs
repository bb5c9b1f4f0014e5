//! Deckhand's shared substitution values (a compatibility behaviour).
//!
//! Deckhand inserts a *shallow* copy of a substitution's source value
//! (`copy.copy` in `jsonpath_replace`): the copy is the destination's own,
//! but the mappings and lists inside it are the source's very objects. A
//! later write inside one of them (a substitution into
//! `.auth.admin.password` after one into `.auth`) changes the source
//! document, and every other document that took the same inner value, as
//! it stands when the write happens. Real Airship sites depend on it.
//!
//! A shared value can only change when a document writes inside what an
//! earlier substitution of its own inserted ([`needed`]). Only then is the
//! set rendered this way ([`render`]): one document at a time in Deckhand's
//! order, with a table of the places that hold one object ([`Shares`]); a
//! write into a shared mapping or list is made at every place holding it.
//! Otherwise copies and shared objects cannot be told apart, and the
//! parallel levels render the same output.
//!
//! Not modelled: the sharing that Python's `deepcopy` keeps inside a
//! layered copy of a parent (two places of the parent holding one object
//! stay one object in the child).

use std::collections::{HashMap, HashSet};

use super::actions::apply_actions;
use super::error::LayeringError;
use super::path::{JsonPath, Padding, Segment};
use super::plan::Plan;
use super::substitution::{
    SourceData, SubstitutionOptions, Written, dest_path, take_value, unknown_error, write_dest,
};
use super::value::Value;

/// A place in the set: a document (plan index) and a path in its data.
type Place = (usize, Vec<Segment>);

/// How many places one object may be found at: real sets share a value
/// among a handful of documents; more is an error, not an unbounded search.
const MAX_HOLDERS: usize = 10_000;

/// True when some document writes inside a value one of its own earlier
/// substitutions inserted: a path at least two steps below the earlier
/// destination (the first step is the copy's own), or a recursive pattern
/// over or under it.
pub(crate) fn needed(plan: &Plan) -> bool {
    plan.documents.iter().any(|document| {
        let mut inserted: Vec<Vec<Segment>> = Vec::new();
        for substitution in &document.substitutions {
            for dest in &substitution.dests {
                let Ok(path) = dest_path(dest) else {
                    continue;
                };
                let path = path.segments;
                let inside = inserted.iter().any(|earlier| {
                    if dest.recurse_depth.is_some() {
                        path.starts_with(earlier) || earlier.starts_with(&path)
                    } else {
                        path.starts_with(earlier) && path.len() >= earlier.len() + 2
                    }
                });
                if inside {
                    return true;
                }
                let shallow = !substitution.src.deepcopy && substitution.src.pattern.is_none();
                if dest.pattern.is_none() && shallow {
                    inserted.push(path);
                }
            }
        }
        false
    })
}

/// Renders the plan one document at a time in Deckhand's order, sharing
/// substituted values as Deckhand does. The first failure is Deckhand's.
pub(crate) fn render(
    plan: &Plan,
    options: SubstitutionOptions,
) -> Result<(Vec<Option<Value>>, Vec<String>), LayeringError> {
    let mut order: Vec<usize> = (0..plan.documents.len()).collect();
    order.sort_by_key(|&index| plan.ranks.get(index).copied().unwrap_or(usize::MAX));
    let mut rendered: Vec<Option<Value>> = vec![None; plan.documents.len()];
    let mut warnings = Vec::new();
    let mut shares = Shares::default();
    for index in order {
        let document = &plan.documents[index];
        if document.is_control {
            continue;
        }
        let data = match plan.family.effective_parent(index) {
            Some(parent) if !document.actions.is_empty() => {
                let parent_data = rendered[parent].as_ref().unwrap_or(&Value::Null);
                apply_actions(document, &plan.documents[parent], parent_data)?
            }
            _ => document.data.clone(),
        };
        rendered[index] = Some(data);
        let mut padding = Padding::per_document();
        for substitution in &document.substitutions {
            let key = (
                substitution.src.schema.clone(),
                substitution.src.name.clone(),
            );
            let source = plan.sources.get(&key).copied();
            let found = source.and_then(|source| {
                Some(SourceData {
                    reference: &plan.documents[source].reference,
                    data: rendered[source].as_ref()?,
                })
            });
            let Some(taken) = take_value(document, substitution, found, options, &mut warnings)?
            else {
                continue;
            };
            for dest in &substitution.dests {
                let mut written = Written::new();
                if let Some(data) = rendered[index].as_mut() {
                    write_dest(data, &taken.value, dest, &mut padding, Some(&mut written))
                        .map_err(|details| unknown_error(document, &dest.path, details))?;
                }
                let shared = |details: String| unknown_error(document, &dest.path, details);
                for (slot, value) in &written {
                    shares
                        .write_through(index, slot, value, &mut rendered)
                        .map_err(shared)?;
                }
                if let (None, Some(from), Some(source), Ok(at)) =
                    (&dest.pattern, &taken.from, source, dest_path(dest))
                {
                    shares
                        .copied(index, &at.segments, &taken.value, source, from)
                        .map_err(shared)?;
                }
            }
        }
    }
    Ok((rendered, warnings))
}

/// Which places hold one object, as pairs (both directions kept): a pair
/// `(a, b)` means the object at `a` is the one at `b`, and so is everything
/// inside it.
#[derive(Default)]
struct Shares {
    by_document: HashMap<usize, Vec<(Vec<Segment>, Place)>>,
}

impl Shares {
    fn pair(&mut self, a: Place, b: Place) {
        self.by_document
            .entry(a.0)
            .or_default()
            .push((a.1.clone(), b.clone()));
        self.by_document.entry(b.0).or_default().push((b.1, a));
    }

    /// A shallow copy of `value` (from `source` at `from`) now sits at
    /// `document` `at`: its mappings and lists are the source's. Where the
    /// copy lands inside one of those (below the copied value, not in one of
    /// its own slots), Python would make a value that contains itself: that
    /// is an error.
    fn copied(
        &mut self,
        document: usize,
        at: &[Segment],
        value: &Value,
        source: usize,
        from: &[Segment],
    ) -> Result<(), String> {
        let inside_a_child =
            |path: &[Segment]| path.starts_with(from) && path.len() > from.len() + 1;
        let inside_itself = (document == source && inside_a_child(at))
            || self
                .holders(document, at)?
                .iter()
                .any(|(holder, path)| *holder == source && inside_a_child(path));
        if inside_itself {
            return Err(format!(
                "the value substituted would contain itself (it lands inside the source's {} it copies)",
                JsonPath {
                    segments: from.to_vec()
                }
            ));
        }
        let children: Vec<Segment> = match value {
            Value::Map(map) => map
                .iter()
                .filter(|(_, child)| matches!(child, Value::Map(_) | Value::Seq(_)))
                .map(|(key, _)| Segment::Field(key.text().to_owned()))
                .collect(),
            Value::Seq(items) => items
                .iter()
                .enumerate()
                .filter(|(_, child)| matches!(child, Value::Map(_) | Value::Seq(_)))
                .map(|(index, _)| Segment::Index(index))
                .collect(),
            _ => return Ok(()),
        };
        for child in children {
            let mut here = at.to_vec();
            here.push(child.clone());
            let mut there = from.to_vec();
            there.push(child);
            self.pair((document, here), (source, there));
        }
        Ok(())
    }

    /// Every other place holding the object at `document` `path`; an error
    /// beyond [`MAX_HOLDERS`].
    fn holders(&self, document: usize, path: &[Segment]) -> Result<Vec<Place>, String> {
        let start: Place = (document, path.to_vec());
        let mut seen: HashSet<Place> = HashSet::from([start.clone()]);
        let mut queue = vec![start.clone()];
        while let Some((at_document, at_path)) = queue.pop() {
            let Some(pairs) = self.by_document.get(&at_document) else {
                continue;
            };
            for (prefix, (other, other_path)) in pairs {
                if !at_path.starts_with(prefix) {
                    continue;
                }
                if seen.len() >= MAX_HOLDERS {
                    return Err(format!(
                        "a substituted value is shared by more than {MAX_HOLDERS} places"
                    ));
                }
                let mut place = other_path.clone();
                place.extend_from_slice(&at_path[prefix.len()..]);
                let place = (*other, place);
                if seen.insert(place.clone()) {
                    queue.push(place);
                }
            }
        }
        seen.remove(&start);
        let mut holders: Vec<Place> = seen.into_iter().collect();
        holders.sort_by(|a, b| a.0.cmp(&b.0).then_with(|| a.1.len().cmp(&b.1.len())));
        Ok(holders)
    }

    /// `document` wrote `value` into `slot`: every place holding the
    /// mapping or list around the slot sees the write; whatever sat at the
    /// slot (and below) is no longer shared from there.
    fn write_through(
        &mut self,
        document: usize,
        slot: &[Segment],
        value: &Value,
        rendered: &mut [Option<Value>],
    ) -> Result<(), String> {
        let Some((last, container)) = slot.split_last() else {
            self.forget_under(document, slot);
            return Ok(());
        };
        for (holder, path) in self.holders(document, container)? {
            let mut target = path;
            target.push(last.clone());
            if let Some(data) = rendered.get_mut(holder).and_then(Option::as_mut) {
                let path = JsonPath {
                    segments: target.clone(),
                };
                // The place exists in the holder as in the writer (one
                // object); only a budget can stop the write, as it would
                // have stopped the writer's.
                let _ = path.write(data, value.clone(), &mut Padding::per_document());
            }
            self.forget_under(holder, &target);
        }
        self.forget_under(document, slot);
        Ok(())
    }

    /// Drops the pairs of places at or under `document` `path`, both ways.
    fn forget_under(&mut self, document: usize, path: &[Segment]) {
        let Some(pairs) = self.by_document.get_mut(&document) else {
            return;
        };
        let mut gone = Vec::new();
        pairs.retain(|(at, other)| {
            let keep = !at.starts_with(path);
            if !keep {
                gone.push((at.clone(), other.clone()));
            }
            keep
        });
        for (at, (other, other_path)) in gone {
            if let Some(pairs) = self.by_document.get_mut(&other) {
                pairs.retain(|(back, place)| {
                    !(back == &other_path && place.0 == document && place.1 == at)
                });
            }
        }
    }
}
