//! Snapshots against a real directory: every kind of change is seen (by the kernel's events
//! and by a whole reading alike), and a restore brings the tree back exactly.

use super::tree::{Kind, Tree};
use super::Snapshots;
use crate::config::RewindConfig;
use std::fs;
use std::os::unix::fs::{symlink, PermissionsExt};
use std::path::Path;

/// The tree as the test reads it.
fn actual(root: &Path) -> Vec<(String, char, u32, Vec<u8>)> {
    let tree = ryvos_testkit::tree_of(root).into_iter();
    tree.map(|(path, (kind, mode, bytes))| (path, kind, mode, bytes))
        .collect()
}

/// The tree as a snapshot keeps it, in the same form.
fn kept(snapshots: &Snapshots, tree: &Tree) -> Vec<(String, char, u32, Vec<u8>)> {
    let mut out: Vec<_> = tree
        .iter()
        .map(|(path, e)| match &e.kind {
            Kind::File { id, .. } => (
                path.clone(),
                'f',
                e.mode,
                snapshots.0.objects.read(id).unwrap(),
            ),
            Kind::Dir => (path.clone(), 'd', e.mode, Vec::new()),
            Kind::Symlink { to } => (path.clone(), 'l', 0, to.as_bytes().to_vec()),
            Kind::Unkept { why } => panic!("{path} not kept: {why}"),
        })
        .collect();
    out.sort();
    out
}

fn snapshots(home: &Path, exclude: &[&str]) -> Snapshots {
    let config = RewindConfig {
        exclude: exclude.iter().map(|s| s.to_string()).collect(),
        ..RewindConfig::default()
    };
    Snapshots::new(home, &config).unwrap()
}

/// Changes every kind of thing, one step at a time.
fn change(root: &Path, step: usize) {
    let p = |rel: &str| root.join(rel);
    match step {
        0 => {
            fs::write(p("a.txt"), "one\n").unwrap();
            fs::create_dir_all(p("dir/sub")).unwrap();
            fs::write(p("dir/sub/deep.txt"), "deep\n").unwrap();
        }
        1 => {
            fs::write(p("a.txt"), "two\n").unwrap();
            fs::set_permissions(p("a.txt"), fs::Permissions::from_mode(0o755)).unwrap();
            symlink("a.txt", p("link")).unwrap();
        }
        2 => {
            fs::rename(p("dir"), p("moved")).unwrap();
            fs::write(p("moved/new.txt"), "made after the move\n").unwrap();
        }
        3 => {
            fs::remove_file(p("link")).unwrap();
            symlink("moved", p("link")).unwrap();
            fs::remove_dir_all(p("moved/sub")).unwrap();
            fs::create_dir(p("fresh")).unwrap();
            fs::write(p("fresh/x"), [0u8, 1, 2]).unwrap();
        }
        _ => {
            fs::remove_file(p("a.txt")).unwrap();
            fs::set_permissions(p("fresh"), fs::Permissions::from_mode(0o555)).unwrap();
        }
    }
}

#[test]
fn every_change_is_kept_and_every_snapshot_comes_back_exactly() {
    let home = tempfile::tempdir().unwrap();
    let workspace = tempfile::tempdir().unwrap();
    let root = workspace.path().canonicalize().unwrap();
    let snapshots = snapshots(home.path(), &[]);
    let mut marks = vec![(snapshots.take(&root), actual(&root))];
    for step in 0..5 {
        change(&root, step);
        let mark = snapshots.take(&root);
        let tree = snapshots.tree(mark.snapshot.as_deref().unwrap()).unwrap();
        assert_eq!(kept(&snapshots, &tree), actual(&root), "after step {step}");
        marks.push((mark, actual(&root)));
    }
    // A process that starts later reads the same tree (from its head, with the metadata).
    let later = super::Snapshots::new(home.path(), &RewindConfig::default()).unwrap();
    let again = later.take(&root);
    assert_eq!(again.snapshot, marks.last().unwrap().0.snapshot);
    for (mark, expected) in marks.iter().rev().chain(marks.iter()) {
        snapshots.restore(mark).unwrap();
        assert_eq!(&actual(&root), expected);
    }
    fs::set_permissions(root.join("fresh"), fs::Permissions::from_mode(0o755)).ok();
}

#[test]
fn excluded_paths_and_repository_objects_are_left_out_and_left_alone() {
    let home = tempfile::tempdir().unwrap();
    let workspace = tempfile::tempdir().unwrap();
    let root = workspace.path().canonicalize().unwrap();
    fs::create_dir_all(root.join(".git/objects/ab")).unwrap();
    fs::write(root.join(".git/objects/ab/cd"), "object").unwrap();
    fs::write(root.join(".git/HEAD"), "ref: refs/heads/main\n").unwrap();
    fs::create_dir_all(root.join("target/debug")).unwrap();
    fs::write(root.join("target/debug/app"), "binary").unwrap();
    let snapshots = snapshots(home.path(), &["target", "docs/*.pdf"]);
    let first = snapshots.take(&root);
    let tree = snapshots.tree(first.snapshot.as_deref().unwrap()).unwrap();
    let paths: Vec<_> = tree.keys().cloned().collect();
    assert_eq!(paths, [".git", ".git/HEAD"]);
    fs::write(root.join("target/debug/app"), "rebuilt").unwrap();
    fs::write(root.join(".git/HEAD"), "ref: refs/heads/other\n").unwrap();
    snapshots.restore(&first).unwrap();
    assert_eq!(
        fs::read_to_string(root.join(".git/HEAD")).unwrap(),
        "ref: refs/heads/main\n"
    );
    assert_eq!(
        fs::read_to_string(root.join("target/debug/app")).unwrap(),
        "rebuilt"
    );
    assert!(root.join(".git/objects/ab/cd").exists());
}

#[test]
fn a_file_over_the_cap_is_named_and_a_restore_to_it_refused() {
    let home = tempfile::tempdir().unwrap();
    let workspace = tempfile::tempdir().unwrap();
    let root = workspace.path().canonicalize().unwrap();
    let config = RewindConfig {
        max_file_mb: 1,
        ..RewindConfig::default()
    };
    let snapshots = Snapshots::new(home.path(), &config).unwrap();
    fs::write(root.join("big.bin"), vec![7u8; (1 << 20) + 1]).unwrap();
    let mark = snapshots.take(&root);
    let why = mark.unkept.clone().unwrap();
    assert!(
        why.contains("big.bin") && why.contains("max_file_mb = 1"),
        "{why}"
    );
    fs::write(root.join("small.txt"), "x").unwrap();
    let refused = snapshots.restore(&mark).unwrap_err();
    assert!(refused.contains("big.bin"), "{refused}");
    assert!(root.join("small.txt").exists(), "nothing was changed");
}

#[test]
fn every_snapshot_of_a_long_chain_comes_back_and_its_chain_stays_short() {
    use super::chain::Chain;
    use super::manifest::{self, Changes};
    use super::tree::{Entry, Stat};
    let home = tempfile::tempdir().unwrap();
    let objects = super::objects::Objects::new(home.path().join("objects"));
    let entry = |n: u64| Entry {
        kind: Kind::File {
            id: format!("{n:064x}"),
            size: n,
        },
        mode: 0o644,
        stat: Stat::default(),
    };
    let mut chain = Chain::default();
    let mut tree = Tree::new();
    let mut taken = Vec::new();
    for n in 0..300u64 {
        let mut changes = Changes::new();
        changes.insert(format!("f{}", n % 17), Some(entry(n)));
        if n % 5 == 0 {
            changes.insert(format!("f{}", (n + 3) % 17), None);
        }
        manifest::apply(&mut tree, changes.clone());
        let id = chain.record(changes, &tree, n as i128, &objects).unwrap();
        taken.push((id, tree.clone()));
        if n % 97 == 50 {
            // A process starting here goes on from the head.
            let (resumed, kept, _) = Chain::resume(&objects, &taken.last().unwrap().0).unwrap();
            assert_eq!(kept, tree);
            chain = resumed;
        }
    }
    for (n, (id, expected)) in taken.iter().enumerate() {
        assert_eq!(
            &manifest::tree_at(&objects, id).unwrap(),
            expected,
            "snapshot {n}"
        );
        assert!(
            manifest::chain_of(&objects, id).unwrap().len() <= 10,
            "snapshot {n}"
        );
    }
}

#[test]
fn a_directory_removed_and_made_again_in_one_turn_is_watched_again() {
    let home = tempfile::tempdir().unwrap();
    let workspace = tempfile::tempdir().unwrap();
    let root = workspace.path().canonicalize().unwrap();
    let snapshots = snapshots(home.path(), &[]);
    fs::create_dir(root.join("dist")).unwrap();
    fs::write(root.join("dist/old.js"), "old").unwrap();
    snapshots.take(&root);
    fs::remove_dir_all(root.join("dist")).unwrap();
    fs::create_dir(root.join("dist")).unwrap();
    fs::write(root.join("dist/new.js"), "new").unwrap();
    let mark = snapshots.take(&root);
    let tree = snapshots.tree(mark.snapshot.as_deref().unwrap()).unwrap();
    assert_eq!(kept(&snapshots, &tree), actual(&root));
    // Its new watch hears what is made in it next.
    fs::write(root.join("dist/later.js"), "later").unwrap();
    let mark = snapshots.take(&root);
    let tree = snapshots.tree(mark.snapshot.as_deref().unwrap()).unwrap();
    assert_eq!(kept(&snapshots, &tree), actual(&root));
}

#[test]
fn a_symlink_left_where_a_directory_was_leads_no_restore_out_of_the_workspace() {
    let home = tempfile::tempdir().unwrap();
    let workspace = tempfile::tempdir().unwrap();
    let elsewhere = tempfile::tempdir().unwrap();
    let root = workspace.path().canonicalize().unwrap();
    let snapshots = snapshots(home.path(), &[]);
    fs::create_dir_all(root.join("out/cache")).unwrap();
    fs::write(root.join("out/cache/f"), "cached").unwrap();
    let first = snapshots.take(&root);
    let expected = actual(&root);
    fs::remove_dir_all(root.join("out")).unwrap();
    fs::create_dir(root.join("out")).unwrap();
    symlink(elsewhere.path(), root.join("out/cache")).unwrap();
    snapshots.restore(&first).unwrap();
    assert_eq!(actual(&root), expected);
    assert_eq!(
        fs::read_dir(elsewhere.path()).unwrap().count(),
        0,
        "nothing written outside"
    );
}

#[test]
fn a_read_only_directory_is_brought_back_with_its_contents_and_its_mode() {
    let home = tempfile::tempdir().unwrap();
    let workspace = tempfile::tempdir().unwrap();
    let root = workspace.path().canonicalize().unwrap();
    let snapshots = snapshots(home.path(), &[]);
    fs::create_dir(root.join("cache")).unwrap();
    fs::write(root.join("cache/a"), "a").unwrap();
    fs::set_permissions(root.join("cache"), fs::Permissions::from_mode(0o555)).unwrap();
    let first = snapshots.take(&root);
    let expected = actual(&root);
    fs::set_permissions(root.join("cache"), fs::Permissions::from_mode(0o755)).unwrap();
    fs::write(root.join("cache/b"), "b").unwrap();
    fs::set_permissions(root.join("cache"), fs::Permissions::from_mode(0o555)).unwrap();
    snapshots.take(&root);
    snapshots.restore(&first).unwrap();
    assert_eq!(actual(&root), expected);
    fs::set_permissions(root.join("cache"), fs::Permissions::from_mode(0o755)).unwrap();
}
