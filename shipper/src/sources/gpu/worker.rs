//! The GPU library on a thread of its own, waited for at most [`DEADLINE`] a read: a call the
//! driver never answers (a GPU resetting after an Xid error, one stuck in the driver) then
//! costs the GPU figures of the cycles it hangs, counted in `GpuErrors`, not every job's CPU,
//! memory and cost figures, the flushes and the TaskEpilogs' final samples, which the
//! collection thread would wait behind it.

use super::source::{GpuId, GpuSource, ReadError, Reading};
use std::sync::mpsc::{Receiver, RecvTimeoutError, SyncSender, TryRecvError};
use std::time::Duration;

/// How long a read is waited for: NVML answers a node's GPUs in well under a second.
pub const DEADLINE: Duration = Duration::from_secs(5);

enum Ask {
    Read,
    Rewind(GpuId, bool),
}

type Readings = Vec<(GpuId, Result<Reading, ReadError>)>;

pub struct Worker {
    asks: SyncSender<Ask>,
    answers: Receiver<Readings>,
    describe: String,
    deadline: Duration,
    /// A read not answered in time is still running on the thread.
    waiting: bool,
}

impl Worker {
    /// `source` on a thread named `gpu`; None where the thread cannot start.
    pub fn spawn(mut source: Box<dyn GpuSource + Send>, deadline: Duration) -> std::io::Result<Worker> {
        let describe = source.describe();
        let (asks, asked) = std::sync::mpsc::sync_channel::<Ask>(64);
        let (answer, answers) = std::sync::mpsc::sync_channel::<Readings>(1);
        std::thread::Builder::new().name("gpu".into()).spawn(move || {
            for ask in asked {
                match ask {
                    Ask::Read => {
                        if answer.send(source.read_all()).is_err() {
                            return;
                        }
                    }
                    Ask::Rewind(id, errors) => source.rewind(&id, errors),
                }
            }
        })?;
        Ok(Worker { asks, answers, describe, deadline, waiting: false })
    }

    /// What a read that did not come back says: one failed device, counted and logged.
    fn hung(&self) -> Readings {
        let id = GpuId { index: 0, mig: None, uuid: String::new() };
        let why =
            format!("the NVIDIA driver did not answer within {:?}; GPU figures left out", self.deadline);
        vec![(id, Err(ReadError::Failed(why)))]
    }
}

impl GpuSource for Worker {
    fn describe(&self) -> String {
        self.describe.clone()
    }

    fn read_all(&mut self) -> Readings {
        if self.waiting {
            match self.answers.try_recv() {
                // The late answer is dropped, but what it took is given back first (the thread
                // takes asks in order): its Xid errors, the likely cause of the hang, and its
                // windows are the new read's.
                Ok(late) => {
                    self.waiting = false;
                    for (id, _) in late.iter().filter(|(_, r)| r.is_ok()) {
                        let _ = self.asks.try_send(Ask::Rewind(id.clone(), true));
                    }
                }
                Err(TryRecvError::Empty) => return self.hung(),
                Err(TryRecvError::Disconnected) => return self.hung(),
            }
        }
        if self.asks.try_send(Ask::Read).is_err() {
            return self.hung();
        }
        match self.answers.recv_timeout(self.deadline) {
            Ok(readings) => readings,
            Err(RecvTimeoutError::Timeout) => {
                self.waiting = true;
                self.hung()
            }
            Err(RecvTimeoutError::Disconnected) => self.hung(),
        }
    }

    fn rewind(&mut self, id: &GpuId, errors: bool) {
        // Behind a hung read it would only queue; the read it is of is answered already.
        if !self.waiting {
            let _ = self.asks.try_send(Ask::Rewind(id.clone(), errors));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Mutex;
    use std::sync::mpsc::Receiver;

    /// A library whose read waits for the test's word, and which counts what is given back.
    struct Stuck(Mutex<Receiver<()>>, std::sync::Arc<std::sync::atomic::AtomicUsize>);

    impl GpuSource for Stuck {
        fn describe(&self) -> String {
            "stuck".into()
        }

        fn read_all(&mut self) -> Readings {
            let go = self.0.lock().map(|r| r.recv().is_ok()).unwrap_or(false);
            let id = GpuId { index: 0, mig: None, uuid: "GPU-x".into() };
            vec![(id, if go { Ok(Reading::default()) } else { Err(ReadError::Lost) })]
        }

        fn rewind(&mut self, _: &GpuId, errors: bool) {
            self.1.fetch_add(usize::from(errors), std::sync::atomic::Ordering::Relaxed);
        }
    }

    #[test]
    fn a_read_the_driver_does_not_answer_costs_the_gpu_figures_not_the_cycle() {
        let (go, wait) = std::sync::mpsc::channel();
        let rewound = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let stuck = Stuck(Mutex::new(wait), rewound.clone());
        let deadline = Duration::from_millis(400);
        let mut w = Worker::spawn(Box::new(stuck), deadline).unwrap();
        assert_eq!(w.describe(), "stuck");
        let started = std::time::Instant::now();
        let r = w.read_all();
        assert!(started.elapsed() < Duration::from_secs(2), "waited {:?}", started.elapsed());
        assert!(
            matches!(&r[..], [(_, Err(ReadError::Failed(why)))] if why.contains("did not answer")),
            "{r:?}"
        );
        // Still hung: said at once, no second read queued behind it (which would be waited for
        // its whole deadline: half of it tells the two apart on however loaded a machine).
        let started = std::time::Instant::now();
        assert!(w.read_all()[0].1.is_err());
        assert!(started.elapsed() < deadline / 2, "{:?}", started.elapsed());
        // The driver answers at last: that late answer is dropped, and the next read is new.
        go.send(()).unwrap();
        go.send(()).unwrap();
        let mut fresh = None;
        for _ in 0..100 {
            let r = w.read_all();
            if r[0].1.is_ok() {
                fresh = Some(r);
                break;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        assert_eq!(fresh.map(|r| r[0].0.uuid.clone()), Some("GPU-x".to_owned()));
        // The late answer's errors were given back before the new read.
        assert_eq!(rewound.load(std::sync::atomic::Ordering::Relaxed), 1);
    }
}
