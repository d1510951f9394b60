//! [`Either`]: one of two response or request bodies, as one body type.
//!
//! `http_body_util::Either` would do, but it boxes its error (`Box<dyn Error + Send + Sync>`),
//! which is not itself an `std::error::Error` and so cannot sit inside the proxy's
//! `MeteredBody` (whose error wraps its inner body's). This one keeps the left body's error
//! type: the right body's error converts into it (`Infallible` for a `Full`, via a `From`
//! impl), so no error is boxed and the hot path is one `match`.

use bytes::Bytes;
use http_body::{Body, Frame, SizeHint};
use std::pin::Pin;
use std::task::{Context, Poll};

/// One of two bodies. The error is the left body's; the right one's converts into it.
#[derive(Debug)]
pub enum Either<L, R> {
    /// The left body.
    Left(L),
    /// The right body.
    Right(R),
}

impl<L, R> Body for Either<L, R>
where
    L: Body<Data = Bytes> + Unpin,
    R: Body<Data = Bytes> + Unpin,
    R::Error: Into<L::Error>,
{
    type Data = Bytes;
    type Error = L::Error;

    #[inline]
    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, L::Error>>> {
        match self.get_mut() {
            Either::Left(l) => Pin::new(l).poll_frame(cx),
            Either::Right(r) => Pin::new(r)
                .poll_frame(cx)
                .map(|o| o.map(|r| r.map_err(Into::into))),
        }
    }

    #[inline]
    fn is_end_stream(&self) -> bool {
        match self {
            Either::Left(l) => l.is_end_stream(),
            Either::Right(r) => r.is_end_stream(),
        }
    }

    fn size_hint(&self) -> SizeHint {
        match self {
            Either::Left(l) => l.size_hint(),
            Either::Right(r) => r.size_hint(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::convert::Infallible;
    use std::task::Waker;

    #[derive(Debug)]
    struct E;
    impl From<Infallible> for E {
        fn from(never: Infallible) -> E {
            match never {}
        }
    }

    /// One frame, then the error `E` (the left side).
    struct Failing(bool);
    impl Body for Failing {
        type Data = Bytes;
        type Error = E;
        fn poll_frame(
            mut self: Pin<&mut Self>,
            _: &mut Context<'_>,
        ) -> Poll<Option<Result<Frame<Bytes>, E>>> {
            if std::mem::replace(&mut self.0, true) {
                Poll::Ready(Some(Err(E)))
            } else {
                Poll::Ready(Some(Ok(Frame::data(Bytes::from_static(b"x")))))
            }
        }
    }

    fn next<B: Body<Data = Bytes> + Unpin>(b: &mut B) -> Option<Result<Bytes, B::Error>> {
        let mut cx = Context::from_waker(Waker::noop());
        match Pin::new(b).poll_frame(&mut cx) {
            Poll::Ready(Some(Ok(f))) => Some(Ok(f.into_data().ok()?)),
            Poll::Ready(Some(Err(e))) => Some(Err(e)),
            _ => None,
        }
    }

    #[test]
    fn each_side_passes_frames_errors_and_hints_through() {
        let full = http_body_util::Full::new(Bytes::from_static(b"hello"));
        let mut right: Either<Failing, _> = Either::Right(full);
        assert_eq!(right.size_hint().exact(), Some(5));
        assert!(!right.is_end_stream());
        assert_eq!(next(&mut right).unwrap().unwrap(), "hello");
        assert!(right.is_end_stream());
        assert!(next(&mut right).is_none());

        let mut left: Either<Failing, http_body_util::Full<Bytes>> = Either::Left(Failing(false));
        assert_eq!(next(&mut left).unwrap().unwrap(), "x");
        assert!(matches!(next(&mut left), Some(Err(E))));
    }
}
