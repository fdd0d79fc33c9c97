package redisstore

import (
	"context"
	"fmt"
	"strconv"

	"github.com/redis/go-redis/v9"
)

// seedScript raises each KEYS[i] to at least ARGV[2i-1], never lowering it,
// and makes it expire at the unix second ARGV[2i].
var seedScript = redis.NewScript(`
for i = 1, #KEYS do
  local v = tonumber(ARGV[2 * i - 1])
  local cur = tonumber(redis.call('GET', KEYS[i]) or '0')
  if cur < v then redis.call('SET', KEYS[i], v) end
  redis.call('EXPIREAT', KEYS[i], tonumber(ARGV[2 * i]))
end
return 0
`)

// seedBatch bounds the keys of one seed script call.
const seedBatch = 1000

// Seed raises the quota counts in Redis to at least the counts given
// (Delta.N), never lowering one: counts made before the zone decided in
// Redis then bound it too. Taking the larger of the two, not their sum,
// lets every instance seed what it knows without counting a call twice.
func (s *Store) Seed(ctx context.Context, counts []Delta) error {
	for len(counts) > 0 {
		batch := counts[:min(len(counts), seedBatch)]
		counts = counts[len(batch):]
		keys := make([]string, 0, len(batch))
		args := make([]any, 0, 2*len(batch))
		for _, c := range batch {
			if !c.Period.Valid() || c.N <= 0 {
				continue
			}
			keys = append(keys, s.QuotaKey(c.Key, c.Period, c.Start))
			args = append(args, strconv.FormatInt(c.N, 10), c.Period.Next(c.Start).Add(ttlMargin).Unix())
		}
		if len(keys) == 0 {
			continue
		}
		err := s.held(ctx, s.timeout*4, func(ctx context.Context, c *redis.Client) error {
			return seedScript.Run(ctx, c, keys, args...).Err()
		})
		if err != nil {
			return fmt.Errorf("seeding %d quota counts in redis: %w", len(keys), err)
		}
	}
	return nil
}
