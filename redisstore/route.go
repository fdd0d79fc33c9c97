package redisstore

import (
	"context"

	"github.com/redis/go-redis/v9"
)

// on runs call with the client of the node holding the zone's keys: the
// URL's, or in a cluster the master of the zone's hash slot (every key of
// a zone shares it). In a cluster a call that a node redirects (MOVED: the
// slot is another master's, after a resharding or a failover; the node ran
// nothing) runs once more on the node the redirect names (see
// redirected), and a redirect or any failed call has the map read again
// in the background, so that later calls find the slot's new master, or
// the replica promoted in place of a failed one.
func (s *Store) on(ctx context.Context, call func(ctx context.Context, c *redis.Client) error) error {
	if s.cluster == nil {
		return call(ctx, s.client)
	}
	c, err := s.cluster.MasterForKey(ctx, s.prefix)
	if err == nil {
		err = call(ctx, c)
	}
	addr, moved := redis.IsMovedError(err)
	if moved {
		err = call(ctx, s.redirected(addr, c))
	}
	if moved || err != nil {
		s.cluster.ReloadState(ctx)
	}
	return err
}

// redirected is a client of the node at addr, which a MOVED redirect named
// as the slot's master, made with the options of the node client like
// (another node of the same cluster). The slot map is not asked: it is
// read from a node picked at random, which may not know of the change yet
// and name the old master, list the new one as its replica (a failover),
// or not list it at all (a master added to the cluster, then given the
// slot); the redirect's node is the one that knows. The client is kept
// for the next redirect there and closed with the store; the addresses
// are the cluster's own, named in its redirects.
func (s *Store) redirected(addr string, like *redis.Client) *redis.Client {
	s.redirectMu.Lock()
	defer s.redirectMu.Unlock()
	if c := s.redirects[addr]; c != nil {
		return c
	}
	o := *like.Options()
	o.Addr, o.NodeAddress = addr, ""
	c := redis.NewClient(&o)
	if s.redirects == nil {
		s.redirects = map[string]*redis.Client{}
	}
	s.redirects[addr] = c
	return c
}
