//! One gzip member (RFC 1952) from a compressor that is kept: a new compressor's tables (some
//! 160 kB, mapped and faulted in afresh each time) cost more than compressing one flush. The
//! spool files and the OTLP request bodies are made with it.

use flate2::{Compress, Compression, FlushCompress, Status};

pub struct Gzip {
    deflate: Compress,
}

impl Gzip {
    pub fn new(level: Compression) -> Self {
        Gzip { deflate: Compress::new(level, false) }
    }

    /// Header (no name, no time; OS "unknown"), raw deflate, CRC-32 and length: the bytes a
    /// new `flate2::write::GzEncoder` of the same level writes.
    pub fn member(&mut self, input: &[u8]) -> Vec<u8> {
        let mut out = Vec::with_capacity(input.len() / 4 + 64);
        out.extend_from_slice(&[0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 0xff]);
        self.deflate.reset();
        loop {
            if out.capacity() - out.len() < 64 {
                out.reserve(out.capacity().max(256));
            }
            let done = self.deflate.total_in() as usize;
            match self.deflate.compress_vec(&input[done..], &mut out, FlushCompress::Finish) {
                Ok(Status::StreamEnd) => break,
                Ok(_) => {}
                // Compressing into a Vec with room does not fail; were it to, the reader's own
                // checks fail (a spool file is counted corrupt, a receiver refuses the body)
                // rather than the daemon stopping.
                Err(_) => break,
            }
        }
        out.extend_from_slice(&crc32fast::hash(input).to_le_bytes());
        out.extend_from_slice(&(input.len() as u32).to_le_bytes());
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Read, Write};

    #[test]
    fn a_kept_compressor_writes_what_a_new_encoder_writes() {
        let mut g = Gzip::new(Compression::default());
        for input in [&b"first body, longer than the second"[..], b"second", b""] {
            let mut fresh = flate2::write::GzEncoder::new(Vec::new(), Compression::default());
            fresh.write_all(input).unwrap();
            let member = g.member(input);
            assert_eq!(member, fresh.finish().unwrap());
            let mut back = Vec::new();
            flate2::read::GzDecoder::new(&member[..]).read_to_end(&mut back).unwrap();
            assert_eq!(back, input);
        }
    }
}
