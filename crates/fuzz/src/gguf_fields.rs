//! Where a GGUF header's integer fields lie, so a mutation can hit a count,
//! a length, a type id, a dimension or an offset instead of a random byte.
//!
//! The scan follows the layout (magic, version, tensor and metadata counts,
//! each key/value, then the tensor table) and stops quietly where the bytes
//! stop making sense: a mutated input is scanned as far as it goes.

/// One integer field of the header.
#[derive(Clone, Copy, Debug)]
pub struct Field {
    pub at: usize,
    /// 4 or 8 bytes, little-endian.
    pub width: usize,
}

/// Elements of one array whose fields are recorded: enough to hit the first
/// entries, few enough that a 150k-token vocabulary does not flood the list.
const FIELDS_PER_ARRAY: u64 = 8;
const STRING: u32 = 8;
const ARRAY: u32 = 9;

struct Scan<'a> {
    bytes: &'a [u8],
    at: usize,
    fields: Vec<Field>,
}

impl Scan<'_> {
    fn int(&mut self, width: usize, record: bool) -> Option<u64> {
        let raw = self.bytes.get(self.at..self.at + width)?;
        let mut buf = [0u8; 8];
        buf[..width].copy_from_slice(raw);
        if record {
            self.fields.push(Field { at: self.at, width });
        }
        self.at += width;
        Some(u64::from_le_bytes(buf))
    }

    fn skip(&mut self, n: u64) -> Option<()> {
        let end = self.at.checked_add(usize::try_from(n).ok()?)?;
        (end <= self.bytes.len()).then(|| self.at = end)
    }

    fn string(&mut self, record: bool) -> Option<()> {
        let len = self.int(8, record)?;
        self.skip(len)
    }

    fn value(&mut self, ty: u32, record: bool) -> Option<()> {
        let width = match ty {
            0 | 1 | 7 => 1,
            2 | 3 => 2,
            4..=6 => 4,
            10..=12 => 8,
            STRING => return self.string(record),
            ARRAY => {
                let elem = self.int(4, record)? as u32;
                let count = self.int(8, record)?;
                for i in 0..count {
                    self.value(elem, record && i < FIELDS_PER_ARRAY)?;
                }
                return Some(());
            }
            _ => return None,
        };
        // Scalar values are fields too (a block_count is a u32 value).
        if width >= 4 {
            self.int(width, record)?;
            Some(())
        } else {
            self.skip(width as u64)
        }
    }
}

/// The integer fields of `bytes`, in file order.
pub fn fields(bytes: &[u8]) -> Vec<Field> {
    let mut s = Scan {
        bytes,
        at: 0,
        fields: Vec::new(),
    };
    scan(&mut s);
    s.fields
}

fn scan(s: &mut Scan) -> Option<()> {
    s.skip(4)?;
    s.int(4, true)?;
    let tensors = s.int(8, true)?;
    let kvs = s.int(8, true)?;
    for _ in 0..kvs {
        s.string(true)?;
        let ty = s.int(4, true)? as u32;
        s.value(ty, true)?;
    }
    for _ in 0..tensors {
        s.string(true)?;
        let n_dims = s.int(4, true)?;
        for _ in 0..n_dims.min(16) {
            s.int(8, true)?;
        }
        s.int(4, true)?;
        s.int(8, true)?;
    }
    Some(())
}
