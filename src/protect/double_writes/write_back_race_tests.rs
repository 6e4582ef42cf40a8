//! Deferred pages against what runs beside them: a table dropped while an
//! eviction stores one of its pages.

use super::*;

/// `drop_table` forgets the file's deferred pages (`discard_file`), then
/// removes its segments. An eviction that copied one of its pages before
/// the drop named the file stores that copy in between (issue 34, part 3,
/// item 4). Published, the copy was written back by the next write-back,
/// which created the removed file again (the shutdown's did).
#[test]
fn a_page_stored_after_its_file_was_forgotten_is_dropped_at_publish() {
    let s = deferring_with_file_7();
    // The eviction's copy, taken before the drop.
    let copied = page(7, 1, 100);
    s.dw.forget_file(7);
    write(&s, std::slice::from_ref(&copied), Issuer::Client);
    assert_eq!(s.dw.deferred_pages(), 0, "its file is gone");
    assert_eq!(lsn_read(&s, 1), None);
    s.files.remove(7, Issuer::Client).unwrap();
    assert_eq!(s.dw.write_back_all(Issuer::Checkpointer).unwrap(), 0);
    assert!(
        !s.files.ids_on_disk().unwrap().contains(&7),
        "the dropped file was created again"
    );
}
