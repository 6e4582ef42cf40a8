//! Connections the server cannot take, refused as PostgreSQL refuses
//! them: an SSLRequest (or GSSENCRequest) answered `N`, the start-up
//! packet read, then FATAL 53300 "sorry, too many clients already", and
//! the socket closed only after the client closed its side, so that the
//! client reads the error rather than a reset (closing a socket with
//! bytes unread sends one).
//!
//! Rules:
//! - One thread serves every refusal, a task each on its own runtime, so
//!   a burst of thousands of connections costs no thread per connection
//!   (before: a thread each for eight, and the rest closed at once, which
//!   their clients saw as resets).
//! - At most `REFUSING_MAX` refusals at a time, each within
//!   `REFUSAL_TIME`; past that a connection gets the error and is closed
//!   at once.

use pgwire::error::ErrorInfo;
use pgwire::messages::response::ErrorResponse;
use pgwire::messages::Message;
use std::io::Write;
use std::net::TcpStream;
use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
use std::sync::Arc;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

const REFUSING_MAX: usize = 4096;
const REFUSAL_TIME: Duration = Duration::from_secs(2);
const TOO_MANY: (&str, &str) = ("53300", "sorry, too many clients already");

pub struct Refuser {
    queue: tokio::sync::mpsc::UnboundedSender<TcpStream>,
    refusing: Arc<AtomicUsize>,
}

impl Refuser {
    /// Starts the refusing thread; it ends when the refuser is dropped.
    pub fn start() -> std::io::Result<Refuser> {
        let (queue, mut next) = tokio::sync::mpsc::unbounded_channel::<TcpStream>();
        let refusing = Arc::new(AtomicUsize::new(0));
        let counted = refusing.clone();
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_io()
            .enable_time()
            .build()?;
        std::thread::Builder::new()
            .name("untorn-refuser".into())
            .spawn(move || {
                runtime.block_on(async move {
                    while let Some(stream) = next.recv().await {
                        let counted = counted.clone();
                        tokio::spawn(async move {
                            let _ = tokio::time::timeout(REFUSAL_TIME, refuse(stream)).await;
                            counted.fetch_sub(1, SeqCst);
                        });
                    }
                })
            })?;
        Ok(Refuser { queue, refusing })
    }

    /// Refuses `stream` (module rules); never waits.
    pub fn refuse(&self, stream: TcpStream) {
        if self.refusing.fetch_add(1, SeqCst) >= REFUSING_MAX {
            self.refusing.fetch_sub(1, SeqCst);
            send_fatal(&stream, TOO_MANY.0, TOO_MANY.1);
            return;
        }
        if let Err(e) = self.queue.send(stream) {
            self.refusing.fetch_sub(1, SeqCst);
            send_fatal(&e.0, TOO_MANY.0, TOO_MANY.1);
        }
    }
}

/// One refusal: negotiation answered, start-up read, the error sent, the
/// client's close awaited.
async fn refuse(stream: TcpStream) -> std::io::Result<()> {
    const NEGOTIATION_CODES: [u32; 2] = [80877103, 80877104];
    stream.set_nonblocking(true)?;
    let mut s = tokio::net::TcpStream::from_std(stream)?;
    for _ in 0..3 {
        let mut head = [0u8; 8];
        s.read_exact(&mut head).await?;
        let len = u32::from_be_bytes([head[0], head[1], head[2], head[3]]) as usize;
        let code = u32::from_be_bytes([head[4], head[5], head[6], head[7]]);
        if len == 8 && NEGOTIATION_CODES.contains(&code) {
            s.write_all(b"N").await?;
            continue;
        }
        let mut rest = vec![0u8; len.saturating_sub(8).min(10_000)];
        s.read_exact(&mut rest).await?;
        break;
    }
    s.write_all(&fatal_bytes(TOO_MANY.0, TOO_MANY.1)).await?;
    s.shutdown().await?;
    let mut sink = [0u8; 1024];
    while s.read(&mut sink).await? > 0 {}
    Ok(())
}

/// A FATAL ErrorResponse, as PostgreSQL ends a connection it refuses.
fn fatal_bytes(code: &str, message: &str) -> Vec<u8> {
    let info = ErrorInfo::new("FATAL".into(), code.into(), message.into());
    let mut msg = bytes::BytesMut::new();
    match ErrorResponse::from(info).encode(&mut msg) {
        Ok(()) => msg.to_vec(),
        Err(_) => Vec::new(),
    }
}

/// Ends a connection with a FATAL ErrorResponse, at once.
pub fn send_fatal(mut stream: &TcpStream, code: &str, message: &str) {
    let _ = stream.set_nonblocking(false);
    let _ = stream.write_all(&fatal_bytes(code, message));
}
