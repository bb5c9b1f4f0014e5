//! A layering session (`LayeringSession`, what `krender watch` keeps)
//! renders every shared Deckhand case as a from-scratch `krender layer
//! render` does, bytes or error (`deckhand::incremental::<case>`).

use std::path::Path;

use krender::layering::LayeringSession;
use libtest_mimic::Trial;

use crate::support::session_against_fresh;

pub(super) fn trials() -> Vec<Trial> {
    crate::shared_suite("deckhand::incremental", "conformance/deckhand", |dir| {
        crate::case_dirs(dir, "input.yaml")
            .into_iter()
            .map(|case| {
                let name = format!("deckhand::incremental::{}", crate::name_of(&case));
                Trial::test(name, move || run(&case.join("input.yaml")))
            })
            .collect()
    })
}

fn run(input: &Path) -> crate::Outcome {
    let mut session = LayeringSession::new(&[input.to_owned()])
        .map_err(|error| format!("the session does not start: {error}"))?;
    session_against_fresh(&mut session, input)?;
    Ok(())
}
