//! Deterministic data for the benchmarks: a seeded `splitmix64` generator and
//! the rows of each scenario. The same seed always gives the same bytes, so
//! two runs (or two machines) insert exactly the same data.

use std::fmt::Write as _;
use std::io::{self, Write};

use litelane::{BulkRow, ValueRef};

/// The `splitmix64` generator (Steele, Lea and Flood): tiny, fast, and good
/// enough for benchmark data. Not for anything that needs real randomness.
#[derive(Debug, Clone)]
pub struct SplitMix64 {
    state: u64,
}

impl SplitMix64 {
    /// A generator whose whole sequence is decided by `seed`.
    pub fn new(seed: u64) -> Self {
        SplitMix64 { state: seed }
    }

    /// A generator for stream `stream` of `seed` (one per thread), independent
    /// of the other streams.
    pub fn stream(seed: u64, stream: u64) -> Self {
        let mut base = SplitMix64::new(seed ^ stream.wrapping_mul(0xA076_1D64_78BD_642F));
        SplitMix64::new(base.next_u64())
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.state = self.state.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.state;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// A number in `0..n` (`n > 0`), by multiply-high (no modulo bias worth
    /// caring about at benchmark sizes).
    pub fn below(&mut self, n: u64) -> u64 {
        ((u128::from(self.next_u64()) * u128::from(n)) >> 64) as u64
    }

    /// True with probability `p` (0.0..=1.0).
    pub fn chance(&mut self, p: f64) -> bool {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64 > 1.0 - p
    }
}

/// One row of the "one billion rows" table
/// `user(id INTEGER PRIMARY KEY, area CHAR(6), age INTEGER NOT NULL, active INTEGER NOT NULL)`.
///
/// It implements [`BulkRow`] by borrowing its own fields, so inserting it
/// allocates nothing per row.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UserRow {
    /// Primary key, 1-based.
    pub id: i64,
    /// Six ASCII digits.
    pub area: [u8; 6],
    /// 5, 10 or 15.
    pub age: i64,
    /// 0 or 1.
    pub active: i64,
}

impl UserRow {
    /// The area code as text.
    pub fn area_str(&self) -> &str {
        // Always six ASCII digits (see `users`).
        std::str::from_utf8(&self.area).unwrap_or("000000")
    }
}

impl BulkRow for UserRow {
    fn len(&self) -> usize {
        4
    }
    fn value(&self, i: usize) -> ValueRef<'_> {
        match i {
            0 => ValueRef::Integer(self.id),
            1 => ValueRef::Text(&self.area),
            2 => ValueRef::Integer(self.age),
            _ => ValueRef::Integer(self.active),
        }
    }
}

/// The column names of [`UserRow`], in `value` order.
pub const USER_COLUMNS: [&str; 4] = ["id", "area", "age", "active"];

/// `CREATE TABLE` for [`UserRow`].
pub const USER_SCHEMA: &str = "CREATE TABLE user(id INTEGER PRIMARY KEY, area CHAR(6), \
                               age INTEGER NOT NULL, active INTEGER NOT NULL)";

/// `n` users with ids `1..=n`: a random six-digit area, age one of 5/10/15,
/// active 0 or 1.
pub fn users(seed: u64, n: u64) -> impl Iterator<Item = UserRow> {
    let mut rng = SplitMix64::new(seed);
    (1..=n).map(move |id| {
        let mut digits = rng.below(1_000_000);
        let mut area = [b'0'; 6];
        for slot in area.iter_mut().rev() {
            *slot = b'0' + (digits % 10) as u8;
            digits /= 10;
        }
        let r = rng.next_u64();
        UserRow {
            id: id as i64,
            area,
            age: [5, 10, 15][(r % 3) as usize],
            active: ((r >> 8) & 1) as i64,
        }
    })
}

/// One row of report 004's `users(id, created_at, username)` table.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Account {
    /// A UUID-v4-shaped string (36 characters).
    pub id: String,
    /// An RFC 3339 timestamp.
    pub created_at: String,
    /// `"Someone"` followed by a number, as in the report.
    pub username: String,
}

/// `CREATE TABLE` of report 004, with its (redundant) unique index, kept
/// because it is part of what the report measured.
pub const ACCOUNT_SCHEMA: &str = "CREATE TABLE users(id BLOB PRIMARY KEY NOT NULL, \
     created_at TEXT NOT NULL, username TEXT NOT NULL); \
     CREATE UNIQUE INDEX idx_users_on_id ON users(id);";

/// The insert of report 004.
pub const ACCOUNT_INSERT: &str = "INSERT INTO users(id, created_at, username) VALUES (?, ?, ?)";

/// Makes [`Account`]s for one thread: `stream` keeps threads' ids apart.
#[derive(Debug, Clone)]
pub struct Accounts {
    rng: SplitMix64,
    stream: u64,
    n: u64,
}

impl Accounts {
    /// Accounts of thread `stream` under `seed`.
    pub fn new(seed: u64, stream: u64) -> Self {
        Accounts {
            rng: SplitMix64::stream(seed, stream),
            stream,
            n: 0,
        }
    }
}

impl Iterator for Accounts {
    type Item = Account;
    fn next(&mut self) -> Option<Account> {
        let (a, b) = (self.rng.next_u64(), self.rng.next_u64());
        // xxxxxxxx-xxxx-4xxx-yxxx-xxxxxxxxxxxx, y in 8..b
        let a = (a & !0xF000) | 0x4000;
        let b = (b & !(0xC << 60)) | (0x8 << 60);
        let mut id = String::with_capacity(36);
        let _ = write!(
            id,
            "{:08x}-{:04x}-{:04x}-{:04x}-{:012x}",
            a >> 32,
            (a >> 16) & 0xFFFF,
            a & 0xFFFF,
            b >> 48,
            b & 0xFFFF_FFFF_FFFF
        );
        let secs = 1_726_000_000 + self.n * 7 + self.stream * 100_003;
        let created_at = rfc3339(secs, (self.rng.next_u64() % 1_000_000) as u32);
        let username = format!("Someone{}", self.stream * 1_000_000_000 + self.n);
        self.n += 1;
        Some(Account {
            id,
            created_at,
            username,
        })
    }
}

/// Formats Unix seconds as `YYYY-MM-DDTHH:MM:SS.ffffff+00:00`.
pub fn rfc3339(secs: u64, micros: u32) -> String {
    let days = secs / 86_400;
    let rem = secs % 86_400;
    // Civil-from-days (Howard Hinnant's algorithm), days since 1970-01-01.
    let z = days as i64 + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}.{micros:06}+00:00",
        rem / 3600,
        (rem / 60) % 60,
        rem % 60
    )
}

/// One row of the Toronto transit trips file of report 003.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Trip {
    /// `route_id`.
    pub route_id: i64,
    /// `service_id`.
    pub service_id: i64,
    /// `trip_id`.
    pub trip_id: i64,
    /// `trip_headsign`: text with commas and double quotes.
    pub headsign: String,
    /// `direction_id`: 0 or 1.
    pub direction_id: i64,
    /// `block_id`.
    pub block_id: i64,
    /// `shape_id`.
    pub shape_id: i64,
    /// `wheelchair_accessible`.
    pub accessible: bool,
}

/// The header line of the trips CSV.
pub const TRIP_COLUMNS: [&str; 8] = [
    "route_id",
    "service_id",
    "trip_id",
    "trip_headsign",
    "direction_id",
    "block_id",
    "shape_id",
    "wheelchair_accessible",
];

/// The number of rows in report 003's file.
pub const TRIP_ROWS: u64 = 128_982;

const STREETS: [&str; 12] = [
    "QUEEN", "KING", "DUNDAS", "COLLEGE", "BATHURST", "SPADINA", "ST CLAIR", "BLOOR", "YONGE",
    "EGLINTON", "LAWRENCE", "FINCH",
];
const PLACES: [&str; 8] = [
    "NEVILLE PARK",
    "LONG BRANCH",
    "UNION STATION",
    "KIPLING STN",
    "DUNDAS WEST STN",
    "MAIN STREET STN",
    "EXHIBITION",
    "BROADVIEW STN",
];

/// `n` trips: ids and numbers in the ranges of the real file; a headsign like
/// `EAST - 501 QUEEN towards NEVILLE PARK, via "KING"` (so CSV quoting and
/// embedded commas are exercised on every row).
pub fn trips(seed: u64, n: u64) -> impl Iterator<Item = Trip> {
    let mut rng = SplitMix64::new(seed);
    (0..n).map(move |i| {
        let route = 500 + rng.below(450) as i64;
        let dir = rng.below(2) as i64;
        let street = STREETS[rng.below(STREETS.len() as u64) as usize];
        let via = STREETS[rng.below(STREETS.len() as u64) as usize];
        let place = PLACES[rng.below(PLACES.len() as u64) as usize];
        let bound = ["EAST", "WEST", "NORTH", "SOUTH"][rng.below(4) as usize];
        Trip {
            route_id: route,
            service_id: 1 + rng.below(3) as i64,
            trip_id: 39_000_000 + i as i64,
            headsign: format!("{bound} - {route} {street} towards {place}, via \"{via}\""),
            direction_id: dir,
            block_id: 1_000_000 + rng.below(50_000) as i64,
            shape_id: 590_000 + rng.below(10_000) as i64,
            accessible: rng.chance(0.8),
        }
    })
}

/// Writes `value` as one CSV field (RFC 4180: quoted when it holds a comma,
/// quote or line break, quotes doubled).
pub fn write_csv_field(out: &mut impl Write, value: &str) -> io::Result<()> {
    if value.contains([',', '"', '\n', '\r']) {
        out.write_all(b"\"")?;
        out.write_all(value.replace('"', "\"\"").as_bytes())?;
        out.write_all(b"\"")
    } else {
        out.write_all(value.as_bytes())
    }
}

/// Writes a header line and `trips` as CSV.
pub fn write_trips_csv(out: &mut impl Write, trips: impl Iterator<Item = Trip>) -> io::Result<u64> {
    writeln!(out, "{}", TRIP_COLUMNS.join(","))?;
    let mut n = 0;
    for t in trips {
        write!(out, "{},{},{},", t.route_id, t.service_id, t.trip_id)?;
        write_csv_field(out, &t.headsign)?;
        writeln!(
            out,
            ",{},{},{},{}",
            t.direction_id,
            t.block_id,
            t.shape_id,
            u8::from(t.accessible)
        )?;
        n += 1;
    }
    Ok(n)
}

/// One row of the ladder's table: what an app might load at start-up.
#[derive(Debug, Clone, PartialEq)]
pub struct Record {
    /// Primary key, 1-based.
    pub id: i64,
    /// A short code.
    pub code: String,
    /// A name.
    pub name: String,
    /// An amount.
    pub amount: f64,
    /// 0 or 1.
    pub flag: i64,
}

/// `CREATE TABLE` of the ladder.
pub const RECORD_SCHEMA: &str = "CREATE TABLE record(id INTEGER PRIMARY KEY, code TEXT NOT NULL, \
                                 name TEXT NOT NULL, amount REAL NOT NULL, flag INTEGER NOT NULL)";

/// The insert of the ladder.
pub const RECORD_INSERT: &str =
    "INSERT INTO record(id, code, name, amount, flag) VALUES (?, ?, ?, ?, ?)";

/// `n` records with ids `1..=n`.
pub fn records(seed: u64, n: u64) -> impl Iterator<Item = Record> {
    let mut rng = SplitMix64::new(seed);
    (1..=n).map(move |id| {
        let r = rng.next_u64();
        Record {
            id: id as i64,
            code: format!("C{:06}", r % 1_000_000),
            name: format!("{} {}", PLACES[(r >> 20) as usize % PLACES.len()], id),
            amount: (rng.below(10_000_000) as f64) / 100.0,
            flag: ((r >> 40) & 1) as i64,
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_same_seed_gives_the_same_rows() {
        let a: Vec<_> = users(7, 100).collect();
        let b: Vec<_> = users(7, 100).collect();
        assert_eq!(a, b);
        assert_ne!(a, users(8, 100).collect::<Vec<_>>());
        assert!(a
            .iter()
            .all(|u| u.area_str().bytes().all(|c| c.is_ascii_digit())));
        assert!(a
            .iter()
            .all(|u| [5, 10, 15].contains(&u.age) && u.active <= 1));
    }

    #[test]
    fn accounts_look_like_uuids_and_differ_between_threads() {
        let a = Accounts::new(1, 0).next().unwrap();
        let b = Accounts::new(1, 1).next().unwrap();
        assert_eq!(a.id.len(), 36);
        assert_eq!(&a.id[14..15], "4");
        assert_ne!(a.id, b.id);
        assert!(a.created_at.starts_with("2024-09-"), "{}", a.created_at);
    }

    #[test]
    fn rfc3339_of_the_epoch_and_a_leap_day() {
        assert_eq!(rfc3339(0, 0), "1970-01-01T00:00:00.000000+00:00");
        assert_eq!(rfc3339(951_782_400, 5), "2000-02-29T00:00:00.000005+00:00");
    }

    #[test]
    fn csv_fields_with_commas_and_quotes_are_quoted() {
        let mut out = Vec::new();
        write_csv_field(&mut out, "a, \"b\"").unwrap();
        assert_eq!(out, b"\"a, \"\"b\"\"\"");
        let mut out = Vec::new();
        let n = write_trips_csv(&mut out, trips(1, 3)).unwrap();
        assert_eq!(n, 3);
        let text = String::from_utf8(out).unwrap();
        assert_eq!(text.lines().count(), 4);
        assert!(text.lines().nth(1).unwrap().contains("\"\""));
    }

    #[test]
    fn below_stays_in_range() {
        let mut r = SplitMix64::new(3);
        assert!((0..10_000).all(|_| r.below(7) < 7));
    }
}
