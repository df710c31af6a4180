//! A directory tree as tests compare it: every path below the root with its kind (`f`, `d`,
//! `l`), mode and contents (a symlink's target), links never followed.

use std::collections::BTreeMap;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;

/// Each path (relative to the root) with its kind, mode and contents or target.
pub type Tree = BTreeMap<String, (char, u32, Vec<u8>)>;

/// The tree below `root`, as it is now.
pub fn tree_of(root: &Path) -> Tree {
    let mut tree = Tree::new();
    let mut dirs = vec![root.to_path_buf()];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            let rel = path
                .strip_prefix(root)
                .unwrap()
                .to_string_lossy()
                .into_owned();
            let meta = std::fs::symlink_metadata(&path).unwrap();
            let mode = meta.permissions().mode() & 0o7777;
            if meta.file_type().is_symlink() {
                let to = std::fs::read_link(&path).unwrap();
                tree.insert(rel, ('l', 0, to.to_string_lossy().as_bytes().to_vec()));
            } else if meta.is_dir() {
                tree.insert(rel, ('d', mode, Vec::new()));
                dirs.push(path);
            } else {
                tree.insert(rel, ('f', mode, std::fs::read(&path).unwrap()));
            }
        }
    }
    tree
}
