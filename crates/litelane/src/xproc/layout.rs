//! The lock file's layout and its codec (no I/O): the header (magic, next
//! ticket, floor, checksum) at byte 0, and a ring of one 512-byte record a
//! ticket from [`RECORDS_AT`], each with its checksum. The bytes that are
//! locked rather than written ([`MUTEX_BYTE`], [`TURN_BYTE`],
//! [`PRESENCE_BYTE`], [`TICKET_BASE`]) are named here too.

use super::{clip, MAX_LABEL_BYTES, MAX_SQL_BYTES};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// A record's state: its ticket waits for the turn.
pub(super) const STATE_WAITING: u8 = 1;
/// A record's state: its ticket (or a turn taken out of order) holds the turn.
pub(super) const STATE_HOLDING: u8 = 2;

/// One ticket's record in the lock file (for attribution only: the queue's
/// correctness rests on the locks and the header).
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Record {
    pub ticket: u64,
    pub state: u8,
    pub pid: u32,
    pub since: SystemTime,
    pub label: String,
    pub sql: String,
}

/// The header: the next ticket to hand out, and the ticket of the last turn
/// taken (every ticket below it is finished).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Header {
    pub next: u64,
    pub floor: u64,
}

pub const MAGIC: &[u8; 8] = b"LLANE\x00Q1";
pub const HEADER_LEN: usize = 32;
/// Byte 0: the short mutex guarding the header.
pub const MUTEX_BYTE: u64 = 0;
/// Byte 1: write-locked by whoever holds the turn, by ticket or out of
/// order (`xproc/barge.rs`).
pub const TURN_BYTE: u64 = 1;
/// Byte 3: read-locked by every open queue (byte 2 is the syncer's,
/// `durable.rs`).
pub const PRESENCE_BYTE: u64 = 3;
/// Records of the last `RING` tickets, from this offset.
pub const RECORDS_AT: u64 = 4096;
pub const RECORD_LEN: usize = 512;
pub const RING: u64 = 64;
/// Ticket `t` locks byte `TICKET_BASE + t` (bytes past the end of the
/// file can be locked; the file stays small).
pub const TICKET_BASE: u64 = 1 << 40;
/// Tickets stay below this so that `TICKET_BASE + t` fits an `off_t`.
pub const MAX_TICKET: u64 = 1 << 62;

fn crc(bytes: &[u8]) -> u32 {
    crc32fast::hash(bytes)
}

pub fn encode_header(h: &Header) -> [u8; HEADER_LEN] {
    let mut b = [0u8; HEADER_LEN];
    b[0..8].copy_from_slice(MAGIC);
    b[8..16].copy_from_slice(&h.next.to_le_bytes());
    b[16..24].copy_from_slice(&h.floor.to_le_bytes());
    let c = crc(&b[0..24]);
    b[24..28].copy_from_slice(&c.to_le_bytes());
    b
}

/// What a header's bytes hold.
#[derive(Debug, PartialEq, Eq)]
pub enum HeaderBytes {
    /// A valid header.
    Valid(Header),
    /// Our magic but a bad checksum or impossible counters (a torn
    /// write): can be reset when no ticket is live.
    Damaged,
    /// Not our file at all: never overwritten.
    Foreign,
}

pub fn decode_header(b: &[u8]) -> HeaderBytes {
    if b.len() < HEADER_LEN || &b[0..8] != MAGIC {
        return HeaderBytes::Foreign;
    }
    let c = u32::from_le_bytes(b[24..28].try_into().unwrap());
    if c != crc(&b[0..24]) {
        return HeaderBytes::Damaged;
    }
    let next = u64::from_le_bytes(b[8..16].try_into().unwrap());
    let floor = u64::from_le_bytes(b[16..24].try_into().unwrap());
    if floor == 0 || floor > next || next >= MAX_TICKET {
        return HeaderBytes::Damaged;
    }
    HeaderBytes::Valid(Header { next, floor })
}

pub fn record_offset(ticket: u64) -> u64 {
    RECORDS_AT + (ticket % RING) * RECORD_LEN as u64
}

// Record: ticket u64 | state u8 | pid u32 | since (ns since epoch) u64 |
// label len u16 | label | sql len u16 | sql | crc u32 (last 4 bytes).
const LABEL_AT: usize = 23;
const SQL_LEN_AT: usize = LABEL_AT + MAX_LABEL_BYTES;
const SQL_AT: usize = SQL_LEN_AT + 2;
const CRC_AT: usize = RECORD_LEN - 4;
const _: () = assert!(SQL_AT + MAX_SQL_BYTES <= CRC_AT);

pub fn encode_record(r: &Record) -> [u8; RECORD_LEN] {
    let mut b = [0u8; RECORD_LEN];
    b[0..8].copy_from_slice(&r.ticket.to_le_bytes());
    b[8] = r.state;
    b[9..13].copy_from_slice(&r.pid.to_le_bytes());
    let ns = r
        .since
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos().min(u64::MAX as u128) as u64);
    b[13..21].copy_from_slice(&ns.to_le_bytes());
    let label = clip(&r.label, MAX_LABEL_BYTES).as_bytes();
    b[21..23].copy_from_slice(&(label.len() as u16).to_le_bytes());
    b[LABEL_AT..LABEL_AT + label.len()].copy_from_slice(label);
    let sql = clip(&r.sql, MAX_SQL_BYTES).as_bytes();
    b[SQL_LEN_AT..SQL_AT].copy_from_slice(&(sql.len() as u16).to_le_bytes());
    b[SQL_AT..SQL_AT + sql.len()].copy_from_slice(sql);
    let c = crc(&b[..CRC_AT]);
    b[CRC_AT..].copy_from_slice(&c.to_le_bytes());
    b
}

/// Decodes a record; `None` for anything that is not a whole, valid one
/// (never written, torn by a concurrent write, or garbage).
pub fn decode_record(b: &[u8]) -> Option<Record> {
    if b.len() != RECORD_LEN {
        return None;
    }
    let c = u32::from_le_bytes(b[CRC_AT..].try_into().ok()?);
    if c != crc(&b[..CRC_AT]) {
        return None;
    }
    let ticket = u64::from_le_bytes(b[0..8].try_into().ok()?);
    let state = b[8];
    let pid = u32::from_le_bytes(b[9..13].try_into().ok()?);
    let ns = u64::from_le_bytes(b[13..21].try_into().ok()?);
    let label_len = u16::from_le_bytes(b[21..23].try_into().ok()?) as usize;
    let sql_len = u16::from_le_bytes(b[SQL_LEN_AT..SQL_AT].try_into().ok()?) as usize;
    if label_len > MAX_LABEL_BYTES || sql_len > MAX_SQL_BYTES {
        return None;
    }
    Some(Record {
        ticket,
        state,
        pid,
        since: UNIX_EPOCH + Duration::from_nanos(ns),
        label: String::from_utf8_lossy(&b[LABEL_AT..LABEL_AT + label_len]).into_owned(),
        sql: String::from_utf8_lossy(&b[SQL_AT..SQL_AT + sql_len]).into_owned(),
    })
}

#[cfg(test)]
mod tests {
    use super::super::{MAX_LABEL_BYTES, MAX_SQL_BYTES};
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn header_round_trip_and_damage() {
        let h = Header {
            next: 42,
            floor: 40,
        };
        let b = encode_header(&h);
        assert_eq!(decode_header(&b), HeaderBytes::Valid(h));
        let mut torn = b;
        torn[9] ^= 1;
        assert_eq!(decode_header(&torn), HeaderBytes::Damaged);
        // Counters that cannot happen are damage, not a valid header.
        for bad in [
            Header { next: 5, floor: 6 },
            Header { next: 5, floor: 0 },
            Header {
                next: MAX_TICKET,
                floor: 1,
            },
        ] {
            assert_eq!(
                decode_header(&encode_header(&bad)),
                HeaderBytes::Damaged,
                "{bad:?}"
            );
        }
        assert_eq!(
            decode_header(b"SQLite format 3\0 and more bytes.."),
            HeaderBytes::Foreign
        );
        assert_eq!(decode_header(&b[..10]), HeaderBytes::Foreign);
    }

    #[test]
    fn record_round_trip_clips_at_char_boundaries() {
        let r = Record {
            ticket: 7,
            state: STATE_HOLDING,
            pid: 1234,
            since: UNIX_EPOCH + Duration::from_nanos(1_700_000_000_123_456_789),
            label: "é".repeat(100), // 200 bytes: cut to 120
            sql: "INSERT INTO t VALUES (1)".into(),
        };
        let back = decode_record(&encode_record(&r)).unwrap();
        assert_eq!(back.label, "é".repeat(60));
        assert_eq!(back.sql, r.sql);
        assert_eq!(back.since, r.since);
        assert_eq!(
            (back.ticket, back.state, back.pid),
            (7, STATE_HOLDING, 1234)
        );
        assert_eq!(decode_record(&[0u8; RECORD_LEN]), None, "never written");
    }

    proptest! {
        #[test]
        fn decoding_arbitrary_bytes_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..600)) {
            let _ = decode_header(&bytes);
            let _ = decode_record(&bytes);
        }

        #[test]
        fn records_round_trip(ticket in 0u64..MAX_TICKET, pid: u32, label in ".{0,200}", sql in ".{0,500}") {
            let r = Record { ticket, state: STATE_WAITING, pid, since: UNIX_EPOCH, label: label.clone(), sql: sql.clone() };
            let back = decode_record(&encode_record(&r)).unwrap();
            prop_assert!(label.starts_with(&back.label));
            prop_assert!(back.label.len() <= MAX_LABEL_BYTES);
            prop_assert!(sql.starts_with(&back.sql));
            prop_assert!(back.sql.len() <= MAX_SQL_BYTES);
            prop_assert_eq!((back.ticket, back.pid), (ticket, pid));
        }
    }
}
