//! HDR histograms as data, for serde: each in HdrHistogram's V2 format, deflated and base64
//! encoded (the form HdrHistogram's own interval logs hold, readable by its tools in every
//! language). A [`Recording`](super::Recording) written this way reads back exactly, so a
//! replica in another process hands its whole recording to `capsize merge`.

use base64::engine::general_purpose::STANDARD;
use base64::Engine as _;
use hdrhistogram::serialization::{
    Deserializer as HdrReader, Serializer as _, V2DeflateSerializer,
};
use hdrhistogram::Histogram;
use serde::de::Error as _;
use serde::ser::Error as _;
use serde::{Deserialize, Deserializer, Serializer};

/// Writes `h` as a base64 string of its V2 deflate encoding.
pub fn serialize<S: Serializer>(h: &Histogram<u64>, s: S) -> Result<S::Ok, S::Error> {
    let mut bytes = Vec::new();
    V2DeflateSerializer::new()
        .serialize(h, &mut bytes)
        .map_err(|e| S::Error::custom(format!("cannot encode a histogram: {e:?}")))?;
    s.serialize_str(&STANDARD.encode(bytes))
}

/// Reads a histogram [`serialize`] wrote.
pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Histogram<u64>, D::Error> {
    let text = String::deserialize(d)?;
    decode(&text).map_err(D::Error::custom)
}

fn decode(text: &str) -> Result<Histogram<u64>, String> {
    let bytes = STANDARD
        .decode(text)
        .map_err(|e| format!("a histogram that is not base64: {e}"))?;
    HdrReader::new()
        .deserialize(&mut bytes.as_slice())
        .map_err(|e| format!("a histogram that is not HdrHistogram V2: {e:?}"))
}

/// The same for an optional histogram (`null` when absent).
pub mod option {
    use super::*;

    /// Writes `h`, or `null`.
    pub fn serialize<S: Serializer>(h: &Option<Histogram<u64>>, s: S) -> Result<S::Ok, S::Error> {
        match h {
            Some(h) => super::serialize(h, s),
            None => s.serialize_none(),
        }
    }

    /// Reads what [`serialize`] wrote.
    pub fn deserialize<'de, D: Deserializer<'de>>(
        d: D,
    ) -> Result<Option<Histogram<u64>>, D::Error> {
        Option::<String>::deserialize(d)?
            .map(|t| decode(&t).map_err(D::Error::custom))
            .transpose()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(serde::Serialize, serde::Deserialize)]
    struct One {
        #[serde(with = "super")]
        h: Histogram<u64>,
    }

    #[test]
    fn a_histogram_reads_back_bucket_for_bucket() {
        let mut h = Histogram::new_with_bounds(1, 86_400_000_000, 3).expect("bounds");
        for v in [1, 7, 1_000, 123_456, 86_400_000_000] {
            h.record_n(v, v % 5 + 1).expect("in range");
        }
        let text = serde_json::to_string(&One { h: h.clone() }).expect("write");
        let back: One = serde_json::from_str(&text).expect("read");
        assert_eq!(back.h, h);
        assert_eq!(back.h.high(), h.high());
        let bad = serde_json::from_str::<One>(r#"{"h": "not base64!"}"#);
        assert!(bad.is_err());
    }
}
