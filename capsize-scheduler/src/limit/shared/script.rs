//! The one Lua script that keeps a limit's buckets on Redis, what a batch sends it and what
//! it answers, read back and checked number by number.

use std::time::Duration;

use redis::Value;

use super::SharedLimitError;

/// The farthest ahead of Redis's clock a stored bucket may be empty (its horizon, see the
/// module comment) or paused: an hour. A legitimate debt is bounded by the reservations
/// waiting (and a pause by a provider's Retry-After), which no run holds for an hour; a
/// stored value past it is taken as corrupt (the buckets are recreated), and the script never
/// stores one: a reservation that alone costs more than an hour of the rate still waits its
/// whole time, but the fleet behind it is held an hour at most.
pub(super) const MAX_AHEAD: Duration = Duration::from_secs(3600);

/// The script: `KEYS[1]` the limit's buckets; `ARGV[1]` the operations, one letter each (`r`
/// reserve, `f` refund, `p` pause), in order; `ARGV[2]` four little-endian `f64`s: per bucket,
/// requests first, its rate (per second; negative: the limit has no such bucket) and capacity;
/// `ARGV[3]` one little-endian `f64` per operation: its tokens (reserve, refund; a request
/// costs 1) or the pause in seconds; `ARGV[4]` the batch's [`Context`].
///
/// The key holds five little-endian `f64`s: per bucket its balance `b` and the instant `t` its
/// credit counts from, then the generation (Redis's clock in microseconds when the buckets
/// were created). It answers [`Reply`]'s array. A bucket the limit does not have holds zeros.
const SCRIPT: &str = r#"
local now_t = redis.call('TIME')
local now_us = tonumber(now_t[1]) * 1000000 + tonumber(now_t[2])
local now = now_us / 1000000
local unpack, huge = struct.unpack, math.huge
local d1, d2, s1, s2, f1, f2, heard, expiry = unpack('<dddddddd', ARGV[4])
if now > expiry then return {now_us} end
local min, max, ceil, byte = math.min, math.max, math.ceil, string.byte
local R, F, P = byte('rfp', 1, 3)
local last = now + @AHEAD@
local ops, vals = ARGV[1], ARGV[3]
local r1, c1, r2, c2 = unpack('<dddd', ARGV[2])
local function finite(x) return x == x and x > -huge and x < huge end
local function valid(rate, cap, b, t)
  return rate < 0 or (finite(b) and finite(t) and b <= cap and t <= last
    and t - b / rate <= last)
end
local b1, t1, b2, t2, gen
local raw = redis.pcall('GET', KEYS[1])
local ok = type(raw) == 'string' and #raw == 40
if ok then
  b1, t1, b2, t2, gen = unpack('<ddddd', raw)
  ok = gen >= 1 and gen == math.floor(gen) and gen <= now_us + @AHEAD@ * 1000000
    and valid(r1, c1, b1, t1) and valid(r2, c2, b2, t2)
end
local fresh = not ok
if fresh then gen = now_us end
local adopt = heard ~= gen
local function start(rate, cap, b, t, d, s, f)
  if rate < 0 then return 0, 0 end
  local floor = now - f
  if fresh then
    b, t, floor = 0, now - cap / rate, max(floor, now + d, now - s)
  elseif adopt then
    floor = max(floor, now - s)
  end
  return min(b, (t - min(floor, last)) * rate), t
end
b1, t1 = start(r1, c1, b1, t1, d1, s1, f1)
b2, t2 = start(r2, c2, b2, t2, d2, s2, f2)
local function step(op, v, rate, cap, cost, b, t, ready)
  if rate < 0 then return b, t, ready end
  if now > t then
    b = min(cap, b + (now - t) * rate)
    t = now
  end
  if op == R then
    b = b - cost
    local at = t
    if b < 0 then at = t + (-b) / rate end
    if at > ready then ready = at end
  elseif op == F then
    b = min(cap, b + cost)
  elseif op == P then
    local untl = now + v
    if untl > t then t = untl end
    if b > 0 then b = 0 end
  end
  return b, t, ready
end
local reply, pos = {now_us, gen, 0, 0}, 1
for i = 1, #ops do
  local op = byte(ops, i)
  local v
  v, pos = unpack('<d', vals, pos)
  local ready = now
  b1, t1, ready = step(op, v, r1, c1, 1, b1, t1, ready)
  b2, t2, ready = step(op, v, r2, c2, v, b2, t2, ready)
  local wait = ready - now
  if wait < 1e9 then reply[4 + i] = ceil(wait * 1000000)
  else reply[4 + i] = string.format('%.6f', wait) end
end
local full = 0
local function keep(k, rate, cap, b, t)
  if rate < 0 then return 0, 0 end
  t = min(t, last)
  b = max(b, (t - last) * rate)
  reply[2 + k] = max(ceil((t - b / rate - now) * 1000000), -1e15)
  full = max(full, (cap - b) / rate + (t - now))
  return b, t
end
b1, t1 = keep(1, r1, c1, b1, t1)
b2, t2 = keep(2, r2, c2, b2, t2)
redis.call('SET', KEYS[1], struct.pack('<ddddd', b1, t1, b2, t2, gen),
  'PX', ceil(full * 1000) + 60000)
return reply
"#;

/// The script's text, its constants filled in.
pub(super) fn script() -> String {
    SCRIPT.replace("@AHEAD@", &MAX_AHEAD.as_secs().to_string())
}

/// What a batch tells the script besides its operations (`ARGV[4]`), per bucket: the debt this
/// replica last heard (seconds from Redis's now then to the bucket's horizon; negative for
/// credit; -inf if it heard none), the seconds since the latest horizon it heard (negative if
/// that is ahead; +inf: none), and the seconds since the horizon of its own share after a
/// fallback (+inf: none); then the generation it last heard (-1: none), and the instant, on
/// Redis's clock in seconds, after which the batch must change nothing (+inf: none).
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) struct Context {
    pub(super) debt: [f64; 2],
    pub(super) since: [f64; 2],
    pub(super) floor_since: [f64; 2],
    pub(super) generation: f64,
    pub(super) expiry: f64,
}

impl Context {
    /// As the script unpacks it: eight little-endian `f64`s.
    pub(super) fn bytes(&self) -> Vec<u8> {
        [
            self.debt[0],
            self.debt[1],
            self.since[0],
            self.since[1],
            self.floor_since[0],
            self.floor_since[1],
            self.generation,
            self.expiry,
        ]
        .iter()
        .flat_map(|v| v.to_le_bytes())
        .collect()
    }
}

/// The script's answer, checked.
#[derive(Debug, Clone, PartialEq)]
pub(super) enum Reply {
    /// The batch came after its expiry and changed nothing (`{now}`).
    Expired {
        /// Redis's clock when it ran, in microseconds.
        now_us: i64,
    },
    /// The batch ran (`{now, generation, horizon 1, horizon 2, wait per operation...}`).
    Done {
        now_us: i64,
        generation: i64,
        /// Per bucket, the instant it is empty, in microseconds from `now_us` (0 for a bucket
        /// the limit does not have).
        horizons: [i64; 2],
        waits: Vec<Duration>,
    },
}

/// Reads the script's answer to a batch of `ops` operations; any number out of what the
/// script returns makes the whole answer an error.
pub(super) fn parse(answer: Value, ops: usize) -> Result<Reply, SharedLimitError> {
    let bad = |v: &dyn std::fmt::Debug| SharedLimitError::Answer(format!("{v:?}"));
    let Value::Array(items) = answer else {
        return Err(bad(&answer));
    };
    let int = |v: &Value| match v {
        Value::Int(i) => Some(*i),
        _ => None,
    };
    let now_us = items.first().and_then(int).filter(|&n| n > 0);
    match (items.len(), now_us) {
        (1, Some(now_us)) => Ok(Reply::Expired { now_us }),
        (n, Some(now_us)) if n == 4 + ops => {
            let generation = int(&items[1])
                .filter(|&g| g > 0)
                .ok_or_else(|| bad(&items))?;
            // No horizon beyond what the script stores (plus its rounding).
            let most = MAX_AHEAD.as_micros() as i64 + 1_000_000;
            let horizon =
                |v: &Value| int(v).filter(|&h| (-1_000_000_000_000_000..=most).contains(&h));
            let horizons = [horizon(&items[2]), horizon(&items[3])];
            let [Some(h1), Some(h2)] = horizons else {
                return Err(bad(&items));
            };
            let waits = items[4..].iter().map(wait).collect::<Option<Vec<_>>>();
            Ok(Reply::Done {
                now_us,
                generation,
                horizons: [h1, h2],
                waits: waits.ok_or_else(|| bad(&items))?,
            })
        }
        _ => Err(bad(&items)),
    }
}

/// One operation's wait, as the script returns it: whole microseconds, or seconds in a string
/// for a wait too long for the integer; never negative, never NaN.
fn wait(answer: &Value) -> Option<Duration> {
    match answer {
        Value::Int(micros) => u64::try_from(*micros).ok().map(Duration::from_micros),
        Value::BulkString(bytes) => {
            let secs: f64 = std::str::from_utf8(bytes).ok()?.parse().ok()?;
            (secs >= 0.0).then(|| Duration::try_from_secs_f64(secs).ok())?
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ints(v: &[i64]) -> Value {
        Value::Array(v.iter().map(|&i| Value::Int(i)).collect())
    }

    #[test]
    fn answers_are_read_and_checked() {
        assert_eq!(
            parse(ints(&[5, 3, -2, 0, 7]), 1).unwrap(),
            Reply::Done {
                now_us: 5,
                generation: 3,
                horizons: [-2, 0],
                waits: vec![Duration::from_micros(7)],
            }
        );
        assert_eq!(parse(ints(&[5]), 3).unwrap(), Reply::Expired { now_us: 5 });
        let long = Value::Array(vec![
            Value::Int(5),
            Value::Int(3),
            Value::Int(0),
            Value::Int(0),
            Value::BulkString(b"2000000000.5".to_vec()),
        ]);
        let Reply::Done { waits, .. } = parse(long, 1).unwrap() else {
            panic!("a wait in seconds");
        };
        assert_eq!(waits, [Duration::from_secs_f64(2_000_000_000.5)]);
        // A negative wait, a NaN, a horizon too far ahead, a count that does not match, a
        // clock that is not one: all refused.
        let nan = Value::Array(vec![
            Value::Int(5),
            Value::Int(3),
            Value::Int(0),
            Value::Int(0),
            Value::BulkString(b"nan".to_vec()),
        ]);
        for answer in [
            ints(&[5, 3, 0, 0, -1]),
            nan,
            ints(&[5, 3, 7_200_000_000, 0, 1]),
            ints(&[5, 3, 0, 0, 1, 1]),
            ints(&[0, 3, 0, 0, 1]),
            ints(&[5, 0, 0, 0, 1]),
            Value::Int(1),
        ] {
            assert!(parse(answer.clone(), 1).is_err(), "{answer:?}");
        }
    }

    #[test]
    fn the_script_has_its_constants() {
        let text = script();
        assert!(!text.contains('@'));
        assert!(text.contains("local last = now + 3600"));
    }
}
