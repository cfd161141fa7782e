//! Helpers shared by the modules.

/// The ids stored in table `t` of `c`, in the order SQLite returns them,
/// collected into `T` (a `Vec` keeps that order, a `BTreeSet` sorts).
pub fn stored_ids<T: FromIterator<i64>>(c: &rusqlite::Connection) -> T {
    c.prepare("SELECT id FROM t")
        .unwrap()
        .query_map([], |r| r.get(0))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap()
}
