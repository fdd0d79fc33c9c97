package redisstore

import "github.com/redis/go-redis/v9"

// luaDate is shared by the scripts: civil dates from day numbers (Howard
// Hinnant's algorithms), so periods follow Redis server time in UTC.
const luaDate = `
local function civil(z)
  z = z + 719468
  local era = math.floor(z / 146097)
  local doe = z - era * 146097
  local yoe = math.floor((doe - math.floor(doe / 1460) + math.floor(doe / 36524) - math.floor(doe / 146096)) / 365)
  local y = yoe + era * 400
  local doy = doe - (365 * yoe + math.floor(yoe / 4) - math.floor(yoe / 100))
  local mp = math.floor((5 * doy + 2) / 153)
  local d = doy - math.floor((153 * mp + 2) / 5) + 1
  local m = mp + 3
  if mp >= 10 then m = mp - 9 end
  if m <= 2 then y = y + 1 end
  return y, m, d
end
local function days_from_civil(y, m, d)
  if m <= 2 then y = y - 1 end
  local era = math.floor(y / 400)
  local yoe = y - era * 400
  local mp = m + 9
  if m > 2 then mp = m - 3 end
  local doy = math.floor((153 * mp + 2) / 5) + d - 1
  local doe = yoe * 365 + math.floor(yoe / 4) - math.floor(yoe / 100) + doy
  return era * 146097 + doe - 719468
end
-- period returns the key suffix of the period containing sec and the
-- unix second at which it ends.
local function period(kind, sec)
  local days = math.floor(sec / 86400)
  local y, m, d = civil(days)
  if kind == 1 then
    return string.format(':d:%04d-%02d-%02d', y, m, d), (days + 1) * 86400
  end
  local ny, nm = y, m + 1
  if nm > 12 then nm = 1; ny = y + 1 end
  return string.format(':m:%04d-%02d', y, m), days_from_civil(ny, nm, 1) * 86400
end
`

// luaLevel is shared by the scripts. level returns what the bucket hash h
// ({tokens, ts, rate, burst} as stored) holds at now, for a bucket of rate
// a and burst b in force since since (all times in microseconds). The time
// before since is credited at the rate and burst the bucket was last
// charged under, the time after at a and b: a limit change never credits
// past idle time at the new rate, which would hand out a fresh burst. A
// bucket charged under other limits after since (its key moved to a, b:
// a tier it left) earns its old ones up to now, as rate.Limiter.SetLimitAt
// has it. A bucket full at the change is full under b, as a bucket the
// instances do not hold would be; a bucket never charged, or expired, is
// full.
const luaLevel = `
local function level(h, a, b, since, now)
  local tokens, ts = tonumber(h[1]), tonumber(h[2])
  if tokens == nil or ts == nil then return b end
  local r0, b0 = tonumber(h[3]) or a, tonumber(h[4]) or b
  local split = math.min(math.max(ts, since), now)
  if since <= ts and (r0 ~= a or b0 ~= b) then split = now end
  if split > ts then
    tokens = math.min(b0, tokens + (split - ts) * r0 / 1000000)
    if tokens >= b0 then return b end
  end
  return math.min(b, tokens + math.max(now - split, 0) * a / 1000000)
end
-- need returns the milliseconds until the bucket hash h, holding tokens
-- at now (see level), holds cost (a cost above the burst b: b), at the
-- rates level credits from now on; 0 when it holds cost now. A bucket
-- charged under other limits after since earns them until full under
-- them (then it is full under b); one whose change comes later (since
-- after now, on Redis's clock) earns them until then.
local function need(h, a, b, since, now, tokens, cost)
  if tokens >= cost then return 0 end
  local target, ts = math.min(cost, b), tonumber(h[2])
  local r0, b0 = tonumber(h[3]) or a, tonumber(h[4]) or b
  local before = 0
  if ts ~= nil and (r0 ~= a or b0 ~= b) and (since <= ts or since > now) then
    local dt = (math.min(target, b0) - tokens) / r0 * 1000000
    if since <= ts or now + dt <= since then
      return math.max(math.ceil(dt / 1000), 1)
    end
    tokens, before = tokens + (since - now) * r0 / 1000000, since - now
  end
  return math.max(math.ceil((before + (target - tokens) / a * 1000000) / 1000), 1)
end
`

// luaDecide is shared by decideScript and peekScript: it reads what every
// item holds and finds the first that does not fit, writing nothing.
//
// KEYS[i] is item i's key: a bucket's hash, or a quota's base key to which
// the period suffix is appended. ARGV[1] is the TTL margin in seconds;
// then five values per item: kind (1 bucket, 2 quota, 3 quota charged
// only where it holds a count: one it holds none for is left alone, its
// cur and after -1), then for a bucket rate (tokens/s) and burst, for a
// quota period (1 day, 2 month) and limit, then the cost, then for a
// bucket the Unix microsecond its rate and burst are in force since (0
// for a quota).
//
// It leaves refused, the first item that does not fit (0 when all do),
// and wait, its wait in milliseconds; cur[i], what item i holds (a
// bucket's tokens in thousandths, a quota's count); waits[i], for a
// bucket the milliseconds until it holds item i's cost (see need), 0 for
// a quota; and for the items that fit, what charging them takes.
const luaDecide = `
local t = redis.call('TIME')
local sec = tonumber(t[1])
local now = sec * 1000000 + tonumber(t[2])
local margin = tonumber(ARGV[1])
local n = #KEYS
local left, qkeys, resets, after, cur, waits = {}, {}, {}, {}, {}, {}
local adds = {}
local refused, wait = 0, 0
for i = 1, n do
  local base = 2 + (i - 1) * 5
  local kind, a, b, cost = tonumber(ARGV[base]), tonumber(ARGV[base + 1]), tonumber(ARGV[base + 2]), tonumber(ARGV[base + 3])
  if kind == 1 then
    local h = redis.call('HMGET', KEYS[i], 'tokens', 'ts', 'rate', 'burst')
    local tokens = level(h, a, b, tonumber(ARGV[base + 4]), now)
    cur[i] = math.floor(tokens * 1000)
    waits[i] = need(h, a, b, tonumber(ARGV[base + 4]), now, tokens, cost)
    if refused == 0 then
      if tokens < cost then
        refused, wait = i, waits[i]
      else
        left[i] = tokens - cost
        after[i] = math.floor(left[i] * 1000)
      end
    end
  else
    local suffix, reset = period(a, sec)
    local qk = KEYS[i] .. suffix
    local raw = redis.call('GET', qk)
    local stored = tonumber(raw or '0')
    cur[i], waits[i] = stored, 0
    if kind == 3 and not raw then
      cur[i], after[i] = -1, -1
    elseif refused == 0 then
      local used = stored + (adds[qk] or 0)
      if used + cost > b then
        refused, wait = i, math.ceil(reset * 1000 - now / 1000)
      else
        adds[qk] = (adds[qk] or 0) + cost
        qkeys[i], resets[i], after[i] = qk, reset, used + cost
      end
    end
  end
end
`

// decideScript decides every item of one request atomically (see
// luaDecide for KEYS and ARGV).
//
// A bucket's hash expires a day (or its full refill, if longer) after its
// last use, plus the margin: a live change to a slower rate must find a
// drained bucket still there, not an expired one that reads as full. It
// holds the bucket's tokens, the time they were counted, and the rate and
// burst they were counted under.
//
// It returns {0, 0, after_1, ..., after_n} when every item fits (and
// charges them all), where after_i is what item i holds once charged: a
// bucket's tokens in thousandths, a quota's count. Otherwise it returns
// {i, wait_ms, now_1, ..., now_n, wait_1, ..., wait_n} for the first item
// i that does not fit, having written nothing: now_j is what item j holds
// (uncharged), and wait_j is luaDecide's waits[j].
var decideScript = redis.NewScript(luaDate + luaLevel + luaDecide + `
if refused > 0 then
  local reply = {refused, wait}
  for i = 1, n do reply[2 + i], reply[2 + n + i] = cur[i], waits[i] end
  return reply
end
for i = 1, n do
  local base = 2 + (i - 1) * 5
  local a, b, cost = tonumber(ARGV[base + 1]), tonumber(ARGV[base + 2]), tonumber(ARGV[base + 3])
  if left[i] ~= nil then
    redis.call('HSET', KEYS[i], 'tokens', tostring(left[i]), 'ts', tostring(now), 'rate', ARGV[base + 1], 'burst', ARGV[base + 2])
    redis.call('PEXPIRE', KEYS[i], math.max(math.ceil(b / a * 1000), 86400000) + margin * 1000)
  elseif qkeys[i] ~= nil and cost > 0 then
    redis.call('INCRBY', qkeys[i], cost)
    redis.call('EXPIREAT', qkeys[i], resets[i] + margin)
  end
end
local reply = {0, 0}
for i = 1, n do reply[2 + i] = after[i] end
return reply
`)

// peekScript decides as decideScript does but charges nothing, whether
// every item fits or not: it returns {i, wait_ms, now_1, ..., now_n,
// wait_1, ..., wait_n}, with i 0 when every item fits.
var peekScript = redis.NewScript(luaDate + luaLevel + luaDecide + `
local reply = {refused, wait}
for i = 1, n do reply[2 + i], reply[2 + n + i] = cur[i], waits[i] end
return reply
`)

// refundScript gives back what a successful decide took, with the same
// KEYS and ARGV: tokens return to buckets (up to the burst) and quota
// counts of the current period go down (never below zero).
var refundScript = redis.NewScript(luaDate + luaLevel + `
local t = redis.call('TIME')
local sec = tonumber(t[1])
local now = sec * 1000000 + tonumber(t[2])
local margin = tonumber(ARGV[1])
for i = 1, #KEYS do
  local base = 2 + (i - 1) * 5
  local kind, a, b, cost = tonumber(ARGV[base]), tonumber(ARGV[base + 1]), tonumber(ARGV[base + 2]), tonumber(ARGV[base + 3])
  if kind == 1 then
    local h = redis.call('HMGET', KEYS[i], 'tokens', 'ts', 'rate', 'burst')
    if tonumber(h[1]) ~= nil and tonumber(h[2]) ~= nil then
      local tokens = math.min(b, level(h, a, b, tonumber(ARGV[base + 4]), now) + cost)
      redis.call('HSET', KEYS[i], 'tokens', tostring(tokens), 'ts', tostring(now), 'rate', ARGV[base + 1], 'burst', ARGV[base + 2])
      redis.call('PEXPIRE', KEYS[i], math.max(math.ceil(b / a * 1000), 86400000) + margin * 1000)
    end
  else
    local suffix = period(a, sec)
    local qk = KEYS[i] .. suffix
    local used = tonumber(redis.call('GET', qk) or '0')
    if used > 0 then
      redis.call('DECRBY', qk, math.min(used, cost))
    end
  end
end
return 0
`)

// pushScript adds counts made elsewhere, once per push: KEYS[1] marks the
// push (its id), set for ARGV[1] seconds; KEYS[2..] are quota keys, each
// with its delta and its expiry (unix seconds) in ARGV. A push whose
// marker is already there ran before (a retry of one whose answer was
// lost) and adds nothing. Returns 1 when the counts were added, 0 when
// the push had already run.
var pushScript = redis.NewScript(`
if not redis.call('SET', KEYS[1], '1', 'NX', 'EX', ARGV[1]) then
  return 0
end
for i = 2, #KEYS do
  local a = 2 * (i - 1)
  redis.call('INCRBY', KEYS[i], ARGV[a])
  redis.call('EXPIREAT', KEYS[i], ARGV[a + 1])
end
return 1
`)

// fpKeyScript returns the zone's fingerprint key (KEYS[1]), storing the
// candidate (ARGV[1]) when there is none or the one there is damaged (not
// 32 bytes: written by hand, or truncated), so that instances converge on
// one key instead of each keeping its own. It returns the zone's epoch
// (KEYS[2]) with it, storing ARGV[2] there first when there is none.
var fpKeyScript = redis.NewScript(`
local k = redis.call('GET', KEYS[1])
if not k or string.len(k) ~= 32 then
  redis.call('SET', KEYS[1], ARGV[1])
  k = ARGV[1]
end
local e = redis.call('GET', KEYS[2])
if not e then
  redis.call('SET', KEYS[2], ARGV[2])
  e = ARGV[2]
end
return {k, e}
`)
