//! The few facts Karu reads from error bodies: an S3-style `416` states the object's size.
//! (Summaries of error bodies for messages are [`error_body`](crate::sdk::error_body)'s.)

use super::range::digits;
use crate::sdk::error_body::xml_element;

/// The object size an S3-style `416` error body states (`<ActualObjectSize>N</ActualObjectSize>`),
/// for answers without `Content-Range: bytes */N`.
pub fn actual_object_size(body: &[u8]) -> Option<u64> {
    let text = std::str::from_utf8(body).ok()?;
    digits(xml_element(text, "ActualObjectSize")?.trim())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_size_in_an_s3_416_body() {
        let body = b"<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<Error><Code>InvalidRange</Code><Message>The requested range is not satisfiable</Message><RangeRequested>bytes=0-0</RangeRequested><ActualObjectSize>0</ActualObjectSize><RequestId>X</RequestId></Error>";
        assert_eq!(actual_object_size(body), Some(0));
        assert_eq!(
            actual_object_size(b"<Error><ActualObjectSize> 2000000 </ActualObjectSize></Error>"),
            Some(2_000_000)
        );
        for bad in [
            &b"<Error><Code>InvalidRange</Code></Error>"[..],
            b"<Error><ActualObjectSize>-1</ActualObjectSize></Error>",
            b"<Error><ActualObjectSize>1e3</ActualObjectSize></Error>",
            b"<Error><ActualObjectSize></ActualObjectSize></Error>",
            b"<Error><ActualObjectSize>99999999999999999999</ActualObjectSize></Error>",
            b"<Error><ActualObjectSize>12",
            b"\xff\xfe<ActualObjectSize>1</ActualObjectSize>",
        ] {
            assert_eq!(
                actual_object_size(bad),
                None,
                "{}",
                String::from_utf8_lossy(bad)
            );
        }
    }
}
