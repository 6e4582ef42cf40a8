use std::str;

use bytes::{Buf, BufMut, BytesMut};

use crate::error::{PgWireError, PgWireResult};

/// Get null-terminated string, returns None when empty or
/// non null-terminated cstring read.
///
/// Note that this implementation will also advance cursor by 1 after reading
/// empty cstring. This behaviour works for how postgres wire protocol handling
/// key-value pairs, which is ended by a single `\0`
pub(crate) fn get_cstring(buf: &mut BytesMut) -> Option<String> {
    let mut i = 0;

    // with bound check to prevent invalid format
    while i < buf.remaining() && buf[i] != b'\0' {
        i += 1;
    }

    if i == buf.remaining() {
        return None;
    }

    // i+1: include the '\0'
    // move cursor to the end of cstring
    let string_buf = buf.split_to(i + 1);

    if i == 0 {
        None
    } else {
        Some(String::from_utf8_lossy(&string_buf[..i]).into_owned())
    }
}

/// untorn: where text is not UTF-8, PostgreSQL's 22021 detail (its first
/// bad bytes, as `0xff 0x41`), so that a query is refused rather than run
/// with U+FFFD in place of what the client sent.
pub(crate) fn invalid_utf8(bytes: &[u8]) -> Option<String> {
    let e = str::from_utf8(bytes).err()?;
    let at = e.valid_up_to();
    let len = e.error_len().unwrap_or(bytes.len() - at).clamp(1, 2);
    let shown: Vec<String> = bytes[at..at + len.min(bytes.len() - at)]
        .iter()
        .map(|b| format!("0x{b:02x}"))
        .collect();
    Some(shown.join(" "))
}

/// Like [`get_cstring`], with [`invalid_utf8`]'s detail when the string
/// was not UTF-8.
pub(crate) fn get_cstring_checked(buf: &mut BytesMut) -> (Option<String>, Option<String>) {
    let end = (0..buf.remaining()).find(|&i| buf[i] == b'\0');
    let bad = end.and_then(|i| invalid_utf8(&buf[..i]));
    (get_cstring(buf), bad)
}

/// Put null-termianted string
///
/// You can put empty string by giving `""` as input.
pub(crate) fn put_cstring(buf: &mut BytesMut, input: &str) {
    buf.put_slice(input.as_bytes());
    buf.put_u8(b'\0');
}

pub(crate) fn put_option_cstring(buf: &mut BytesMut, input: &Option<String>) {
    if let Some(input) = input {
        put_cstring(buf, input);
    } else {
        buf.put_u8(b'\0');
    }
}

/// Try to read message length from buf, without actually move the cursor
pub(crate) fn get_length(buf: &BytesMut, offset: usize) -> Option<usize> {
    if buf.remaining() >= 4 + offset {
        Some((&buf[offset..4 + offset]).get_i32() as usize)
    } else {
        None
    }
}

/// untorn: bounds-checked reads for message bodies; `bytes`' own getters
/// panic when the bytes run out.
pub(crate) trait CheckedBuf {
    fn need(&self, n: usize) -> PgWireResult<()>;
    fn checked_u8(&mut self) -> PgWireResult<u8>;
    fn checked_i8(&mut self) -> PgWireResult<i8>;
    fn checked_u16(&mut self) -> PgWireResult<u16>;
    fn checked_i16(&mut self) -> PgWireResult<i16>;
    fn checked_u32(&mut self) -> PgWireResult<u32>;
    fn checked_i32(&mut self) -> PgWireResult<i32>;
    /// `len` bytes, refusing a negative or overrunning length.
    fn checked_split(&mut self, len: i64) -> PgWireResult<BytesMut>;
}

impl CheckedBuf for BytesMut {
    fn need(&self, n: usize) -> PgWireResult<()> {
        if self.remaining() < n {
            Err(PgWireError::MessageTruncated(n, self.remaining()))
        } else {
            Ok(())
        }
    }
    fn checked_u8(&mut self) -> PgWireResult<u8> {
        self.need(1)?;
        Ok(self.get_u8())
    }
    fn checked_i8(&mut self) -> PgWireResult<i8> {
        self.need(1)?;
        Ok(self.get_i8())
    }
    fn checked_u16(&mut self) -> PgWireResult<u16> {
        self.need(2)?;
        Ok(self.get_u16())
    }
    fn checked_i16(&mut self) -> PgWireResult<i16> {
        self.need(2)?;
        Ok(self.get_i16())
    }
    fn checked_u32(&mut self) -> PgWireResult<u32> {
        self.need(4)?;
        Ok(self.get_u32())
    }
    fn checked_i32(&mut self) -> PgWireResult<i32> {
        self.need(4)?;
        Ok(self.get_i32())
    }
    fn checked_split(&mut self, len: i64) -> PgWireResult<BytesMut> {
        let n = usize::try_from(len).map_err(|_| PgWireError::MessageTruncated(0, self.remaining()))?;
        self.need(n)?;
        Ok(self.split_to(n))
    }
}

/// Validate an on-wire element count before it is used to pre-allocate a
/// collection. Counts are unsigned; `count` elements of `elem_size` bytes each
/// must fit in the remaining buffer, or the message cannot be real.
pub(crate) fn ensure_count(count: usize, elem_size: usize, buf: &BytesMut) -> PgWireResult<()> {
    let remaining = buf.remaining();
    let needed = count.saturating_mul(elem_size);
    if needed > remaining {
        Err(PgWireError::InvalidElementCount(count, needed, remaining))
    } else {
        Ok(())
    }
}

/// Check if message_length matches and move the cursor to right position then
/// call the `decode_fn` for the body
pub(crate) fn decode_packet<T, F>(
    buf: &mut BytesMut,
    offset: usize,
    max_size: usize,
    decode_fn: F,
) -> PgWireResult<Option<T>>
where
    F: Fn(&mut BytesMut, usize) -> PgWireResult<T>,
{
    if let Some(msg_len) = get_length(buf, offset) {
        if msg_len > max_size {
            return Err(PgWireError::MessageTooLarge(max_size, msg_len));
        }
        // untorn: the length counts itself, so less than 4 cannot be.
        if msg_len < 4 {
            return Err(PgWireError::MessageTruncated(4, msg_len));
        }

        if buf.remaining() >= msg_len + offset {
            buf.advance(offset + 4);
            // untorn: decode the body from its own bytes only, so a field
            // that overruns the message fails instead of reading the next
            // message (or past the buffer, which panicked).
            let mut body = buf.split_to(msg_len - 4);
            return decode_fn(&mut body, msg_len).map(|r| Some(r));
        }
    }

    Ok(None)
}

// pub(crate) fn get_and_ensure_message_type(buf: &mut BytesMut, t: u8) -> PgWireResult<()> {
//     let msg_type = buf[0];
//     // ensure the type is corrent
//     if msg_type != t {
//         return Err(PgWireError::InvalidMessageType(t, msg_type));
//     }

//     Ok(())
// }

pub(crate) fn option_string_len(s: &Option<String>) -> usize {
    1 + s.as_ref().map(|s| s.len()).unwrap_or(0)
}

#[cfg(test)]
mod test {
    use super::get_cstring;
    use bytes::{BufMut, BytesMut};

    #[test]
    fn get_cstring_valid() {
        let mut buf = BytesMut::new();
        buf.put(&b"a cstring\0"[..]);
        buf.put(&b"\0"[..]);

        assert_eq!(Some("a cstring".into()), get_cstring(&mut buf));
        assert_eq!(None, get_cstring(&mut buf));
    }

    #[test]
    fn get_cstring_empty() {
        let mut buf = BytesMut::new();

        assert_eq!(None, get_cstring(&mut buf));
    }

    #[test]
    fn get_cstring_without_null() {
        let mut buf = BytesMut::new();
        buf.put(&b"a cstring"[..]);
        assert_eq!(None, get_cstring(&mut buf));
    }
}
