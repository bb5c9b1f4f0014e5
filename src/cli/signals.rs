//! Ctrl-C and SIGTERM: the first trips the render's [`Cancel`] token (the
//! running functions' process groups are killed at once, the render stops
//! between steps, and the command writes nothing and exits 128 + the
//! signal); a second one ends the process at once, leaving what the package
//! lock and the commit journal recover on the next run.

use std::sync::Arc;
use std::sync::atomic::{AtomicI32, Ordering};

use signal_hook::consts::{SIGINT, SIGTERM};
use signal_hook::iterator::Signals;

use crate::runtime::cancel::Cancel;

/// The signals a command listens for, and the token they trip.
pub(super) struct Interrupts {
    cancel: Cancel,
    /// The first signal received, 0 while none was.
    signal: Arc<AtomicI32>,
}

impl Interrupts {
    /// Starts listening for SIGINT and SIGTERM. Where the handler cannot be
    /// installed, the default action (the process dies) stays.
    pub(super) fn install() -> Interrupts {
        let cancel = Cancel::new();
        let signal = Arc::new(AtomicI32::new(0));
        if let Ok(mut signals) = Signals::new([SIGINT, SIGTERM]) {
            let (cancel, first) = (cancel.clone(), signal.clone());
            let _ = std::thread::Builder::new()
                .name("krender-signals".to_owned())
                .spawn(move || {
                    for received in signals.forever() {
                        if first
                            .compare_exchange(0, received, Ordering::SeqCst, Ordering::SeqCst)
                            .is_err()
                        {
                            // A second signal: the user insists.
                            std::process::exit(128 + received);
                        }
                        cancel.cancel();
                    }
                });
        }
        Interrupts { cancel, signal }
    }

    /// The token to hand to the render.
    pub(super) fn cancel(&self) -> &Cancel {
        &self.cancel
    }

    /// The exit code for the signal received (130 for SIGINT, 143 for
    /// SIGTERM), if one was.
    pub(super) fn exit_code(&self) -> Option<i32> {
        match self.signal.load(Ordering::SeqCst) {
            0 => None,
            signal => Some(128 + signal),
        }
    }

    /// The line that says what stopped the command.
    pub(super) fn message(&self, what: &str) -> String {
        let name = match self.signal.load(Ordering::SeqCst) {
            SIGTERM => "SIGTERM",
            _ => "SIGINT",
        };
        format!("krender: {what} interrupted ({name}); nothing was written")
    }
}
