//! The output set's contract, on a real filesystem.

use super::*;

fn temp(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("capsize-outputs-{name}-{}", std::process::id()));
    let _ = fs::remove_dir_all(&dir);
    fs::create_dir_all(&dir).unwrap();
    dir
}

fn names(dir: &Path) -> Vec<String> {
    let mut n: Vec<String> = fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    n.sort();
    n
}

#[test]
fn commit_writes_every_file_and_leaves_nothing_else() {
    let t = temp("all");
    fs::write(t.join("a"), "old a").unwrap();
    let mut set = OutputSet::new();
    set.put(t.join("a"), "new a")
        .put(t.join("sub/deeper/b"), "new b")
        .put_with(t.join("c"), |p| {
            fs::write(p, "new c").map_err(|e| e.to_string())
        });
    set.commit().unwrap();
    assert_eq!(names(&t), ["a", "c", "sub"]);
    assert_eq!(names(&t.join("sub/deeper")), ["b"]);
    for (f, text) in [("a", "new a"), ("sub/deeper/b", "new b"), ("c", "new c")] {
        assert_eq!(fs::read_to_string(t.join(f)).unwrap(), text);
    }
    let _ = fs::remove_dir_all(&t);
}

#[test]
fn a_failure_while_staging_changes_nothing() {
    let t = temp("staging");
    fs::write(t.join("a"), "old a").unwrap();
    let mut set = OutputSet::new();
    set.put(t.join("a"), "new a")
        .put(t.join("new/b"), "new b")
        .put_with(t.join("c"), |_| Err("the encoder failed".into()));
    let e = set.commit().unwrap_err();
    assert_eq!((e.path.clone(), e.refused), (t.join("c"), false), "{e}");
    assert!(e.to_string().contains("the encoder failed"), "{e}");
    assert_eq!(names(&t), ["a"], "the created folder and staging are gone");
    assert_eq!(fs::read_to_string(t.join("a")).unwrap(), "old a");
    let _ = fs::remove_dir_all(&t);
}

#[test]
fn a_failure_while_moving_into_place_puts_back_what_was_moved() {
    let t = temp("swap");
    for f in ["a", "b", "c"] {
        fs::write(t.join(f), format!("old {f}")).unwrap();
    }
    let mut set = OutputSet::new();
    set.put(t.join("a"), "new a").put(t.join("b"), "new b");
    // Staged last, c takes b's staged file away: a is moved into place, b cannot be.
    set.put_with(t.join("c"), |p| {
        fs::write(p, "new c").map_err(|e| e.to_string())?;
        fs::remove_file(p.with_file_name("b")).map_err(|e| e.to_string())
    });
    let e = set.commit().unwrap_err();
    assert_eq!(e.path, t.join("b"), "{e}");
    assert_eq!(names(&t), ["a", "b", "c"]);
    for f in ["a", "b", "c"] {
        assert_eq!(fs::read_to_string(t.join(f)).unwrap(), format!("old {f}"));
    }
    let _ = fs::remove_dir_all(&t);
}

#[test]
fn a_symbolic_link_is_replaced_never_written_through() {
    let t = temp("link");
    fs::write(t.join("real"), "kept").unwrap();
    std::os::unix::fs::symlink(t.join("real"), t.join("link")).unwrap();
    let mut set = OutputSet::new();
    set.put(t.join("link"), "new");
    set.commit().unwrap();
    assert_eq!(fs::read_to_string(t.join("real")).unwrap(), "kept");
    assert!(fs::symlink_metadata(t.join("link")).unwrap().is_file());
    let _ = fs::remove_dir_all(&t);
}

#[test]
fn check_refuses_special_files_inputs_and_doubles_by_identity() {
    let t = temp("check");
    let fifo = t.join("fifo");
    let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
    // SAFETY: a valid NUL-terminated path.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o644) }, 0);
    fs::write(t.join("input"), "in").unwrap();
    std::os::unix::fs::symlink(t.join("fifo"), t.join("to-fifo")).unwrap();
    let refused = |target: PathBuf, other: Option<PathBuf>| {
        let mut set = OutputSet::new();
        set.input(t.join("input"), "the baseline");
        set.output(target, "--junit");
        if let Some(o) = other {
            set.output(o, "--summary-md");
        }
        let e = set.check().unwrap_err();
        assert!(e.refused);
        e.to_string()
    };
    assert!(refused(fifo, None).contains("a FIFO"));
    assert!(refused(t.join("to-fifo"), None).contains("through a symbolic link"));
    assert!(refused(t.clone(), None).contains("a folder"));
    assert!(refused(t.join("input/x"), None).contains("not a folder"));
    assert!(refused(t.join("sub/../input"), None).contains("the baseline"));
    let double = refused(t.join("new/x"), Some(t.join("new/./y/../x")));
    assert!(double.contains("--junit names the same file"), "{double}");
    let mut ok = OutputSet::new();
    ok.input(t.join("input"), "the baseline")
        .output(t.join("out"), "--junit");
    ok.check().unwrap();
    let _ = fs::remove_dir_all(&t);
}
