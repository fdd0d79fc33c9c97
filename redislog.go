package mcplimit

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/redis/go-redis/v9"
	"go.uber.org/zap"
)

// goRedisLog hands go-redis's own messages (a connection pool that failed
// to dial while Redis is down, say) to Caddy's logger, instead of the
// library's plain-text default on stderr that log collectors cannot parse.
// They are debug messages: the zone logs each change of its store's state
// once, with the error, and go-redis would repeat a failed dial every few
// seconds for as long as Redis is away. go-redis keeps one logger per
// process: the zone that opened a store last supplies it.
var goRedisLog redisLogger

// redisLogger implements go-redis's Logging interface on a zap logger.
type redisLogger struct {
	l    atomic.Pointer[zap.Logger]
	once sync.Once
}

// use makes go-redis log through l.
func (r *redisLogger) use(l *zap.Logger) {
	r.l.Store(l.Named("go-redis"))
	r.once.Do(func() { redis.SetLogger(r) })
}

// Printf implements go-redis's Logging interface.
func (r *redisLogger) Printf(_ context.Context, format string, v ...any) {
	msg := strings.TrimSpace(strings.TrimPrefix(fmt.Sprintf(format, v...), "redis: "))
	r.l.Load().Debug(msg)
}
