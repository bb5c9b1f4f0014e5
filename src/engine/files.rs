//! The files an in-place render writes, found by digest: each output file
//! is known by the digests of the resources it is written from, and a memo
//! gives the digest of the bytes those resources were last written as. A
//! file whose bytes on disk have that digest is unchanged and is never
//! encoded; only the files whose resources changed (or whose bytes on disk
//! differ) are materialized and written out again.

use std::collections::{BTreeMap, BTreeSet};

use rayon::prelude::*;

use super::plan::Plan;
use super::record::KeyHasher;
use super::store::Store;
use crate::hydrate::item::{Digest, Item, ItemFlags};
use crate::krm::resource::clean_path;
use crate::pkg::commit::Changes;

/// What the writer needs of the tree: each file of the packages, by path
/// relative to the root, with its digest and bytes.
fn files_on_disk(plan: &Plan) -> BTreeMap<String, (Digest, &[u8])> {
    let mut files = BTreeMap::new();
    for pkg in &plan.packages {
        for file in pkg.files.iter().flatten() {
            let relative = if pkg.rel.is_empty() {
                file.file.relative.clone()
            } else {
                format!("{}/{}", pkg.rel, file.file.relative)
            };
            files.insert(relative, (file.digest, &*file.file.bytes));
        }
    }
    files
}

/// The root-relative file an item is written to, when its bookkeeping
/// says so plainly (a path, a package below the root, a path that stays
/// inside the package); `None` sends the render to the writer's full path.
fn file_of(item: &Item) -> Option<String> {
    let meta = &item.meta;
    if meta.path.is_empty() || !meta.has(ItemFlags::RELOCATED) {
        return None;
    }
    let inner = clean_path(&meta.path);
    if inner.starts_with('/') || inner == ".." || inner.starts_with("../") {
        return None;
    }
    let relative = if meta.package.is_empty() {
        inner
    } else {
        clean_path(&format!("{}/{inner}", meta.package))
    };
    (relative != "." && !relative.starts_with("../")).then_some(relative)
}

/// The changes an in-place render of `output` makes (file writes and
/// deletions, not the Kptfile status), or `None` when the output needs the
/// writer's full path (a resource without a plain path, a Kptfile path
/// holding another kind, an encoding that fails): the caller materializes
/// the output and plans it over nodes.
pub(crate) fn planned_changes(
    plan: &Plan,
    output: &[Item],
    input_files: &BTreeSet<String>,
    materialize: &(dyn Fn(&[Item]) -> Option<Vec<crate::yaml::node::Node>> + Sync),
    store: &Store,
    build: &str,
    attribution: bool,
) -> Option<Changes> {
    let _span = tracing::info_span!("files", resources = output.len()).entered();
    let mut by_file: BTreeMap<String, Vec<&Item>> = BTreeMap::new();
    for item in output {
        by_file.entry(file_of(item)?).or_default().push(item);
    }
    for (file, items) in &by_file {
        let is_kptfile = file == "Kptfile" || file.ends_with("/Kptfile");
        if is_kptfile
            && items
                .iter()
                .any(|item| item.meta.sort_key.split(' ').nth(1) != Some("Kptfile"))
        {
            return None;
        }
    }
    let disk = files_on_disk(plan);
    let key_of = |file: &str, items: &[&Item]| {
        let mut key = KeyHasher::of(build, "file");
        key.flags(&[attribution]);
        key.text(file);
        key.number(items.len() as u64);
        for item in items {
            key.digest(&item.digest);
        }
        key.finish()
    };
    // Files whose remembered bytes are what the disk holds are unchanged.
    let stale: Vec<(&String, &Vec<&Item>, Digest)> = by_file
        .par_iter()
        .filter_map(|(file, items)| {
            let key = key_of(file, items);
            let known = store
                .action(&key)
                .and_then(|bytes| <[u8; 32]>::try_from(&*bytes).ok())
                .map(Digest);
            let on_disk = disk.get(file.as_str()).map(|(digest, _)| *digest);
            match (known, on_disk) {
                (Some(known), Some(on_disk)) if known == on_disk => None,
                _ => Some((file, items, key)),
            }
        })
        .collect();
    // The rest are written from their resources (fetched together first
    // when they are only on the remote).
    let needed: Vec<Digest> = stale
        .iter()
        .flat_map(|(_, items, _)| items.iter().map(|item| item.digest))
        .collect();
    store.prefetch(&needed);
    let written: Vec<Option<(String, String, Digest)>> = stale
        .par_iter()
        .map(|(file, items, key)| {
            let items: Vec<Item> = items.iter().map(|item| (*item).clone()).collect();
            let mut nodes = materialize(&items)?;
            crate::hydrate::apply::prepare_for_files(&plan.root, &mut nodes, attribution).ok()?;
            let mut rendered = crate::pkg::writer::render_files(&nodes).ok()?;
            let text = rendered.remove(file.as_str())?;
            if !rendered.is_empty() {
                return None;
            }
            Some(((*file).clone(), text, *key))
        })
        .collect();
    let mut changes = Changes::default();
    let outputs: BTreeSet<&str> = by_file.keys().map(String::as_str).collect();
    for relative in input_files {
        if !outputs.contains(relative.as_str()) && plan.root.join(relative).exists() {
            changes.delete(relative.clone());
        }
    }
    for one in written {
        let (file, text, key) = one?;
        let digest = Digest::of(text.as_bytes());
        store.put_action(&key, &digest.0);
        let same = match disk.get(file.as_str()) {
            Some((on_disk, _)) => *on_disk == digest,
            None => {
                std::fs::read(plan.root.join(&file)).is_ok_and(|bytes| bytes == text.as_bytes())
            }
        };
        if !same {
            changes.write(file, text);
        }
    }
    Some(changes)
}
