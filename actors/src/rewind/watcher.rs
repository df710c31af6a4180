//! Hearing a workspace change: an inotify watch on each of its directories. The kernel queues
//! an event as part of the call that makes a change, so every change made before a snapshot
//! is in the queue when the snapshot reads it: a turn reads only the paths named.

use inotify::{EventMask, Inotify, WatchDescriptor, WatchMask};
use std::collections::{BTreeSet, HashMap};
use std::io;
use std::path::Path;

/// What changed since the queue was last read.
#[derive(Debug, Default)]
pub(super) struct Heard {
    /// Paths (relative) that were made, changed, or removed.
    pub(super) paths: BTreeSet<String>,
    /// Directories made (perhaps where one was removed: the old one's watch went with it),
    /// to be watched and read whole.
    pub(super) made_dirs: BTreeSet<String>,
    /// The tree must be read again whole: the queue overflowed, or a directory moved (the
    /// watches under it now name the wrong paths).
    pub(super) rescan: bool,
}

/// The watches on one workspace.
pub(super) struct Watcher {
    inotify: Inotify,
    dirs: HashMap<WatchDescriptor, String>,
}

fn mask() -> WatchMask {
    WatchMask::CREATE
        | WatchMask::DELETE
        | WatchMask::MODIFY
        | WatchMask::ATTRIB
        | WatchMask::CLOSE_WRITE
        | WatchMask::MOVED_FROM
        | WatchMask::MOVED_TO
        | WatchMask::DELETE_SELF
        | WatchMask::MOVE_SELF
        | WatchMask::DONT_FOLLOW
        | WatchMask::EXCL_UNLINK
        | WatchMask::ONLYDIR
}

impl Watcher {
    pub(super) fn new() -> io::Result<Self> {
        Ok(Self {
            inotify: Inotify::init()?,
            dirs: HashMap::new(),
        })
    }

    /// Watches the directory `full`, known as `rel`. Fails when the watch limit is reached
    /// (`fs.inotify.max_user_watches`).
    pub(super) fn watch(&mut self, rel: &str, full: &Path) -> io::Result<()> {
        match self.inotify.watches().add(full, mask()) {
            Ok(wd) => {
                self.dirs.insert(wd, rel.to_owned());
                Ok(())
            }
            // Gone before it was watched: its parent's event says so.
            Err(e) if super::tree::gone(&e) => Ok(()),
            Err(e) => Err(e),
        }
    }

    /// Drops every watch (before a whole new reading of the tree).
    pub(super) fn clear(&mut self) {
        for (wd, _) in self.dirs.drain() {
            // A watch on a directory since removed is gone already: nothing is lost.
            if let Err(e) = self.inotify.watches().remove(wd) {
                tracing::trace!("a watch was gone before it was removed: {e}");
            }
        }
        self.drain_quietly();
    }

    fn drain_quietly(&mut self) {
        let mut buffer = [0u8; 16384];
        while let Ok(events) = self.inotify.read_events(&mut buffer) {
            if events.count() == 0 {
                break;
            }
        }
    }

    /// Everything the kernel queued since the last call.
    pub(super) fn heard(&mut self) -> io::Result<Heard> {
        let mut heard = Heard::default();
        let mut buffer = [0u8; 16384];
        loop {
            let events = match self.inotify.read_events(&mut buffer) {
                Ok(events) => events,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(e) => return Err(e),
            };
            let mut any = false;
            for event in events {
                any = true;
                if event.mask.contains(EventMask::Q_OVERFLOW) {
                    heard.rescan = true;
                    continue;
                }
                let moved = EventMask::MOVED_FROM | EventMask::MOVED_TO | EventMask::MOVE_SELF;
                if event.mask.contains(EventMask::ISDIR) && event.mask.intersects(moved) {
                    heard.rescan = true;
                }
                if event.mask.contains(EventMask::IGNORED) {
                    self.dirs.remove(&event.wd);
                    continue;
                }
                let Some(dir) = self.dirs.get(&event.wd) else {
                    continue;
                };
                match event.name {
                    Some(name) => {
                        let name = name.to_string_lossy();
                        let path = match dir.as_str() {
                            "" => name.into_owned(),
                            dir => format!("{dir}/{name}"),
                        };
                        if event.mask.contains(EventMask::ISDIR | EventMask::CREATE) {
                            heard.made_dirs.insert(path.clone());
                        }
                        heard.paths.insert(path);
                    }
                    // The workspace itself moved or went.
                    None if dir.is_empty()
                        && event.mask.intersects(moved | EventMask::DELETE_SELF) =>
                    {
                        heard.rescan = true;
                    }
                    None => {}
                }
            }
            if !any {
                break;
            }
        }
        Ok(heard)
    }
}
