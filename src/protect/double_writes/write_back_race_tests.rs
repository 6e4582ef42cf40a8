//! Deferred pages against what runs beside them: a table dropped while an
//! eviction stores one of its pages, a client writing in place while a
//! paced write-back naps.

use super::*;
use std::sync::mpsc;
use std::time::Duration;

/// Only a guard against a hang: nothing here waits on time otherwise.
const HANG: Duration = Duration::from_secs(60);

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

/// A paced write-back naps between its batches (`progress` runs the
/// checkpoint's `schedule.pause`). A page written in place meanwhile from
/// a newer version waits only for a batch holding an older version of it
/// in flight, never for a nap: it waited out the whole write-back while
/// its writer held frame I/O locks (issue 34, part 3, item 5). Here the
/// write-back is held at its first nap while a client writes in place
/// three pages: one written back already, one claimed and not yet
/// written, one never claimed.
#[test]
fn a_write_in_place_does_not_wait_for_a_napping_write_back() {
    // Three pages per write-back batch; five slots.
    let s = setup_area(AreaSettings {
        deferred_slots: 5,
        ..area(8, 8, true)
    });
    assert_eq!(s.dw.max_batch(), 3);
    s.files
        .get(7)
        .unwrap()
        .write_pages(0, &[page(7, 0, 1).bytes()], Issuer::Client)
        .unwrap();
    let old: Vec<PageCopy> = (1..=4).map(|b| page(7, b, 100 + b as u64)).collect();
    write(&s, &old, Issuer::Client);
    // A checkpoint starts: page 5, stored after, is not cold, and stays.
    s.dw.begin_checkpoint(false);
    write(&s, &[page(7, 5, 105)], Issuer::Client);
    assert!(!s.dw.deferred.has_room_for(1), "the file is full");
    let s = &s;
    std::thread::scope(|sc| {
        // Inside the scope: a failed expect drops `go_tx` before the scope
        // joins, which releases the write-back.
        let (paused_tx, paused_rx) = mpsc::channel();
        let (go_tx, go_rx) = mpsc::channel::<()>();
        let write_back = sc.spawn(move || {
            s.dw.write_back_paced(Issuer::Checkpointer, &mut |done| {
                if done == 3 {
                    paused_tx.send(()).unwrap();
                    // Also released when the test fails and drops `go_tx`.
                    let _ = go_rx.recv();
                }
            })
        });
        paused_rx.recv_timeout(HANG).expect("the first nap");
        assert_eq!(lsn_in_place(s, 1), Some(101), "batch one is in place");
        assert_eq!(lsn_in_place(s, 4), None, "batch two is not");
        // No slot is free: the newer versions go through the area.
        let (done_tx, done_rx) = mpsc::channel();
        sc.spawn(move || {
            let newer = [page(7, 1, 201), page(7, 4, 204), page(7, 5, 205)];
            write(s, &newer, Issuer::Client);
            let _ = done_tx.send(());
        });
        done_rx
            .recv_timeout(HANG)
            .expect("the writes in place end while the write-back naps");
        go_tx.send(()).unwrap();
        let written = write_back.join().unwrap().unwrap();
        assert_eq!(written, 3, "pages 1 to 3; page 4 went in place newer");
    });
    let in_place = [1, 2, 3, 4, 5].map(|b| lsn_in_place(s, b));
    assert_eq!(
        in_place,
        [Some(201), Some(102), Some(103), Some(204), Some(205)],
        "no older version lands over a newer one"
    );
    assert_eq!(s.dw.deferred_pages(), 0);
    assert_eq!((1..=5).find_map(|b| lsn_read(s, b)), None);
}

/// Runs `after_read` once, right after the next read of `dw/deferred`
/// returns, as a thread freeing and reusing the slot would.
#[derive(Clone, Default)]
struct AfterRead(Arc<parking_lot::Mutex<Option<Hook>>>);

type Hook = Box<dyn FnOnce() + Send>;

struct AfterReadFile {
    inner: Arc<dyn File>,
    hook: AfterRead,
}

impl File for AfterReadFile {
    crate::forward_file_methods!(inner: path, kind, write_at, write_vectored_at, sync_all,
        sync_data, writeback_hint, write_back_and_wait, allocate, set_len, len, try_lock);

    fn read_at(&self, buf: &mut [u8], offset: u64, who: Issuer) -> Result<usize> {
        let n = self.inner.read_at(buf, offset, who)?;
        if let Some(hook) = self.hook.0.lock().take() {
            hook();
        }
        Ok(n)
    }
}

/// Issue 34, review item 6: a read of a deferred page counted the bytes
/// it read if they passed the page's checks, without asking whether the
/// slot was still the page's copy after the read. Here the page's copy is
/// retired while its read is under way (its newer version went in place,
/// as a write-back or a supersede does): the read must not return the old
/// version, but look again and find the page in place.
#[test]
fn a_deferred_read_counts_only_a_copy_still_named_after_it() {
    let hook = AfterRead::default();
    let layer = hook.clone();
    let s = setup_area_on(area(8, 8, true), move |fs| {
        Arc::new(WrapDoubleWriteFiles(fs, move |inner| {
            let hook = layer.clone();
            Arc::new(AfterReadFile { inner, hook }) as Arc<dyn File>
        }))
    });
    s.files
        .get(7)
        .unwrap()
        .write_pages(0, &[page(7, 0, 1).bytes()], Issuer::Client)
        .unwrap();
    write(&s, &[page(7, 1, 100)], Issuer::Client);
    assert_eq!(lsn_read(&s, 1), Some(100));
    // The newer version lands in place, then the copy is superseded: the
    // order a write in place keeps.
    let newer = page(7, 1, 200);
    let files = s.files.clone();
    let s = Arc::new(s);
    let dw = s.clone();
    *hook.0.lock() = Some(Box::new(move || {
        files
            .get(7)
            .unwrap()
            .write_pages(1, &[newer.bytes()], Issuer::Client)
            .unwrap();
        assert_eq!(dw.dw.deferred.supersede([PageId::new(7, 1)].into_iter()), 1);
    }));
    assert_eq!(lsn_read(&s, 1), None, "not the old copy: read it in place");
    assert_eq!(lsn_in_place(&s, 1), Some(200));
}
