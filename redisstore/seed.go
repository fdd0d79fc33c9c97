package redisstore

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/redis/go-redis/v9"
)

// seedScript raises each count KEYS[2i-1] to at least ARGV[2i-1], never
// lowering it, adds what it raised it by to its restore base KEYS[2i]
// (see Restore), and makes both expire at the unix second ARGV[2i].
var seedScript = redis.NewScript(`
for i = 1, #KEYS / 2 do
  local v = tonumber(ARGV[2 * i - 1])
  local at = tonumber(ARGV[2 * i])
  local cur = tonumber(redis.call('GET', KEYS[2 * i - 1]) or '0')
  if cur < v then
    redis.call('SET', KEYS[2 * i - 1], v)
    redis.call('INCRBY', KEYS[2 * i], v - cur)
    redis.call('EXPIREAT', KEYS[2 * i], at)
  end
  redis.call('EXPIREAT', KEYS[2 * i - 1], at)
end
return 0
`)

// restoreScript adds to each count KEYS[2i-1] what ARGV[2i-1] claims it
// held before Redis lost its data, less what an earlier claim already
// added, recorded in KEYS[2i] (its restore base); both expire at the unix
// second ARGV[2i].
var restoreScript = redis.NewScript(`
for i = 1, #KEYS / 2 do
  local claim = tonumber(ARGV[2 * i - 1])
  local base = tonumber(redis.call('GET', KEYS[2 * i]) or '0')
  if claim > base then
    local at = tonumber(ARGV[2 * i])
    redis.call('INCRBY', KEYS[2 * i - 1], claim - base)
    redis.call('EXPIREAT', KEYS[2 * i - 1], at)
    redis.call('SET', KEYS[2 * i], claim)
    redis.call('EXPIREAT', KEYS[2 * i], at)
  end
end
return 0
`)

// seedBatch bounds the keys of one seed script call.
const seedBatch = 1000

// Seed raises the quota counts in Redis to at least the counts given
// (Delta.N), never lowering one: counts made before the zone decided in
// Redis then bound it too. Taking the larger of the two, not their sum,
// lets every instance seed what it knows without counting a call twice.
// What a seed raises a count by is added to its restore base, as calls
// given back: after Redis lost its data, a start's seed and a running
// instance's Restore then give them back once between them.
func (s *Store) Seed(ctx context.Context, counts []Delta) error {
	for len(counts) > 0 {
		batch := counts[:min(len(counts), seedBatch)]
		counts = counts[len(batch):]
		keys := make([]string, 0, 2*len(batch))
		args := make([]any, 0, 2*len(batch))
		for _, c := range batch {
			if !c.Period.Valid() || c.N <= 0 {
				continue
			}
			keys = append(keys, s.countAndBase(c)...)
			args = append(args, strconv.FormatInt(c.N, 10), c.Period.Next(c.Start).Add(ttlMargin).Unix())
		}
		if len(keys) == 0 {
			continue
		}
		err := s.held(ctx, s.timeout*4, func(ctx context.Context, c *redis.Client) error {
			return seedScript.Run(ctx, c, keys, args...).Err()
		})
		if err != nil {
			return fmt.Errorf("seeding %d quota counts in redis: %w", len(keys)/2, err)
		}
	}
	return nil
}

// countAndBase returns the key of count c and of its restore base.
func (s *Store) countAndBase(c Delta) []string {
	key := s.QuotaKey(c.Key, c.Period, c.Start)
	return []string{key, s.prefix + "r:" + strings.TrimPrefix(key, s.prefix)}
}

// Restore gives back to a Redis that lost its data (a restart without
// persistence, FLUSHALL) the quota counts it held, as instances claim them
// (Delta.N: what each knew Redis held, less the calls it pushes there
// itself). Unlike Seed it adds each claim to what Redis counted since
// the loss (the calls decided there since, and the outage calls pushed
// there), for those are calls the claims do not hold; and of several
// instances' claims for one count it adds the largest once: each count's
// restore base (<prefix>r:<its key>, expiring with it) records what was
// given back so far (by a claim, or a start's Seed), and a larger claim
// adds only its excess.
func (s *Store) Restore(ctx context.Context, counts []Delta) error {
	for len(counts) > 0 {
		batch := counts[:min(len(counts), seedBatch)]
		counts = counts[len(batch):]
		keys := make([]string, 0, 2*len(batch))
		args := make([]any, 0, 2*len(batch))
		for _, c := range batch {
			if !c.Period.Valid() || c.N <= 0 {
				continue
			}
			keys = append(keys, s.countAndBase(c)...)
			args = append(args, strconv.FormatInt(c.N, 10), c.Period.Next(c.Start).Add(ttlMargin).Unix())
		}
		if len(keys) == 0 {
			continue
		}
		err := s.held(ctx, s.timeout*4, func(ctx context.Context, c *redis.Client) error {
			return restoreScript.Run(ctx, c, keys, args...).Err()
		})
		if err != nil {
			return fmt.Errorf("restoring %d quota counts in redis: %w", len(keys)/2, err)
		}
	}
	return nil
}
