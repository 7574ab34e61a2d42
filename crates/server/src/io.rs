//! A connection's stream whose writes fail once they have made no progress for a while: a client that sends
//! requests and never reads the answers would otherwise hold its connection slot, and the answer waiting to be
//! written, for as long as it keeps the socket open (hyper times out only the reading of headers).

use std::future::Future;
use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::time::Sleep;

/// `S` with a write timeout: a write, flush or shutdown that stays pending for `timeout` fails with
/// [`io::ErrorKind::TimedOut`], and hyper then closes the connection. Any progress restarts the clock.
pub(super) struct WriteTimeout<S> {
    inner: S,
    timeout: Duration,
    /// Running while the writes are pending; `None` once one makes progress.
    stalled: Option<Pin<Box<Sleep>>>,
}

impl<S> WriteTimeout<S> {
    pub(super) fn new(inner: S, timeout: Duration) -> Self {
        WriteTimeout {
            inner,
            timeout,
            stalled: None,
        }
    }

    /// `r`, except that a `Pending` arms the clock (if it is not running) and becomes `TimedOut` once it runs
    /// out, and anything else stops it.
    fn watch<T>(&mut self, cx: &mut Context<'_>, r: Poll<io::Result<T>>) -> Poll<io::Result<T>> {
        if r.is_ready() {
            self.stalled = None;
            return r;
        }
        let timeout = self.timeout;
        let clock = self
            .stalled
            .get_or_insert_with(|| Box::pin(tokio::time::sleep(timeout)));
        match clock.as_mut().poll(cx) {
            Poll::Ready(()) => Poll::Ready(Err(io::Error::new(
                io::ErrorKind::TimedOut,
                format!(
                    "the client read nothing of the answer for {} s",
                    timeout.as_secs_f64()
                ),
            ))),
            Poll::Pending => Poll::Pending,
        }
    }
}

impl<S: AsyncRead + Unpin> AsyncRead for WriteTimeout<S> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_read(cx, buf)
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for WriteTimeout<S> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        let r = Pin::new(&mut this.inner).poll_write(cx, buf);
        this.watch(cx, r)
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        let r = Pin::new(&mut this.inner).poll_write_vectored(cx, bufs);
        this.watch(cx, r)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        let r = Pin::new(&mut this.inner).poll_flush(cx);
        this.watch(cx, r)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        let r = Pin::new(&mut this.inner).poll_shutdown(cx);
        this.watch(cx, r)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::{Arc, Mutex};
    use std::task::Waker;

    /// A sink that takes one byte per credit and is pending without credit.
    #[derive(Clone, Default)]
    struct Credit(Arc<Mutex<(usize, Option<Waker>)>>);

    impl Credit {
        fn give(&self) {
            let mut c = self.0.lock().unwrap();
            c.0 += 1;
            if let Some(w) = c.1.take() {
                w.wake();
            }
        }
    }

    impl AsyncRead for Credit {
        fn poll_read(
            self: Pin<&mut Self>,
            _: &mut Context<'_>,
            _: &mut ReadBuf<'_>,
        ) -> Poll<io::Result<()>> {
            Poll::Pending
        }
    }

    impl AsyncWrite for Credit {
        fn poll_write(
            self: Pin<&mut Self>,
            cx: &mut Context<'_>,
            _: &[u8],
        ) -> Poll<io::Result<usize>> {
            let mut c = self.0.lock().unwrap();
            if c.0 == 0 {
                c.1 = Some(cx.waker().clone());
                return Poll::Pending;
            }
            c.0 -= 1;
            Poll::Ready(Ok(1))
        }

        fn poll_flush(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
            Poll::Ready(Ok(()))
        }

        fn poll_shutdown(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
            Poll::Ready(Ok(()))
        }
    }

    /// Writes `n` bytes one write at a time.
    async fn write(s: &mut WriteTimeout<Credit>, n: usize) -> io::Result<()> {
        for _ in 0..n {
            std::future::poll_fn(|cx| Pin::new(&mut *s).poll_write(cx, b"x")).await?;
        }
        Ok(())
    }

    #[test]
    fn a_write_nobody_reads_times_out_and_one_read_slowly_does_not() {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async {
            let timeout = Duration::from_millis(200);
            // Nobody reads: the write fails once the timeout has passed.
            let mut s = WriteTimeout::new(Credit::default(), timeout);
            let t0 = std::time::Instant::now();
            let e = write(&mut s, 1).await.unwrap_err();
            assert_eq!(e.kind(), io::ErrorKind::TimedOut);
            assert!(
                t0.elapsed() >= timeout && t0.elapsed() < 5 * timeout,
                "{:?}",
                t0.elapsed()
            );
            // A reader takes a byte every 80 ms: the writes take 800 ms in all, four timeouts, and never fail,
            // since every byte taken restarts the clock.
            let credit = Credit::default();
            let mut s = WriteTimeout::new(credit.clone(), timeout);
            let reader = tokio::spawn(async move {
                for _ in 0..10 {
                    tokio::time::sleep(Duration::from_millis(80)).await;
                    credit.give();
                }
            });
            let t0 = std::time::Instant::now();
            write(&mut s, 10).await.unwrap();
            assert!(t0.elapsed() >= 4 * timeout, "{:?}", t0.elapsed());
            reader.await.unwrap();
        });
    }
}
