//! The threads of a render: the worker pool its levels run on, the progress
//! callback it reports to, and the thread that frees a whole tree's values
//! off the render's path.

use std::sync::Arc;

use crate::hydrate;

/// A progress callback: (packages done, packages in the tree).
pub type Progress = Arc<dyn Fn(usize, usize) + Send + Sync>;

/// Runs `work` on a pool of `jobs` threads, or on rayon's global pool.
pub(crate) fn in_pool<T: Send>(jobs: Option<usize>, work: impl FnOnce() -> T + Send) -> T {
    match hydrate::worker_pool(jobs) {
        Some(pool) => pool.install(work),
        None => work(),
    }
}

/// Hands `value` to one long-lived thread that drops it. Where that thread
/// cannot be started, `value` is dropped here.
pub(crate) fn free_in_background<T: Send + 'static>(value: T) {
    use std::sync::mpsc::{Sender, channel};
    type Garbage = Box<dyn Send>;
    static FREER: std::sync::OnceLock<Option<Sender<Garbage>>> = std::sync::OnceLock::new();
    let freer = FREER.get_or_init(|| {
        let (sender, receiver) = channel::<Garbage>();
        std::thread::Builder::new()
            .name("krender-free".into())
            .spawn(move || receiver.into_iter().for_each(drop))
            .ok()
            .map(|_| sender)
    });
    // Without the thread, or should its channel close, `value` drops here.
    if let Some(sender) = freer {
        let _ = sender.send(Box::new(value));
    }
}

#[cfg(test)]
mod tests {
    use super::free_in_background;

    /// Reports the thread it is dropped on.
    struct Witness(std::sync::mpsc::Sender<Option<String>>);

    impl Drop for Witness {
        fn drop(&mut self) {
            let thread = std::thread::current().name().map(str::to_owned);
            let _ = self.0.send(thread);
        }
    }

    #[test]
    fn a_value_handed_to_the_freer_is_dropped_on_its_thread() {
        let (sender, receiver) = std::sync::mpsc::channel();
        free_in_background(Witness(sender.clone()));
        free_in_background(Witness(sender));
        for _ in 0..2 {
            let thread = receiver
                .recv_timeout(std::time::Duration::from_secs(10))
                .expect("the value was dropped");
            assert_eq!(thread.as_deref(), Some("krender-free"));
        }
    }
}
